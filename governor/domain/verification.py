"""rules §8 "Result": how a verification run's recorded result is decided, from what the
sandbox reports (verification/sandbox.py only runs the command and says how it ended).

    output receipt   receipt("code-verification-output", {"stream", "sha256"}) over every byte
                     the command wrote to that stream, whatever was kept
    outcome          passed = exit 0, no signal, no timeout, the command started; otherwise a
                     failure kind: `exit` (a status, or a signal: bubblewrap reports signal N as
                     status 128+N, so 129..159 are signals), `timeout` (recorded as SIGKILL,
                     the signal that ended it), `configuration` (the command could not be
                     executed), `infrastructure` (the sandbox could not be set up or checked)
    result           {verificationId, profile, profileReceipt, startedAfterSeq, passed,
                     failureKind, exitCode, signal, durationMs, sandboxMode, stdout, stderr,
                     treeBefore, tree, environment, failureReason?}, bound to its run by the
                     first four and to the trees it ran on (rules §10.2), with
                     receipt("code-verification-result", it without receipt)
    operator failure `infrastructure`, `configuration` and `environment-changed` are failures
                     the work did not cause and asking again does not mend (OPERATOR_KINDS):
                     their record says why in `failureReason` (≤ MAX_REASON_CHARS; never the
                     command, which agents do not see: CONFIGURATION_REASON), worded for the
                     operator, who can act; every page and the agent's answers show it
                     (`environment-changed` also lists `environmentChanges`, rules §17.8)
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Any

from governor.domain.canonical import receipt

SIGNAL_STATUSES = range(129, 160)
OPERATOR_KINDS = ("infrastructure", "configuration", "environment-changed")
MAX_REASON_CHARS = 500
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def output_receipt(stream: str, sha256_hex: str) -> str:
    return receipt("code-verification-output", {"stream": stream, "sha256": sha256_hex})


def stream_record(*, total: int, kept: int, sha256_hex: str, stream: str) -> dict[str, Any]:
    """The persisted part of one output stream: never the output itself."""
    return {"bytes": total, "truncated": total > kept,
            "receipt": output_receipt(stream, sha256_hex)}


@dataclass(frozen=True)
class Ended:
    """How the sandbox's process ended, as it reported it."""

    refused: str | None  # why the command was held at the gate (it never started)
    finished: bool  # False: killed at the timeout
    exit_status: int | None  # the command's, None when bubblewrap stopped before exec
    bwrap_message: str  # bubblewrap's own message (stderr) when it stopped before exec
    bwrap_status: int  # bubblewrap's own exit status
    timeout_ms: int


@dataclass(frozen=True)
class Outcome:
    passed: bool
    failure_kind: str | None
    exit_code: int | None
    signal: int | None
    detail: str  # why it failed, for operators


def outcome(ended: Ended) -> Outcome:
    """The outcome of a run whose sandbox started (rules §8)."""
    if ended.refused is not None:
        return Outcome(False, "infrastructure", None, None, ended.refused)
    if not ended.finished:
        return Outcome(False, "timeout", None, int(signal.SIGKILL),
                       f"killed after the {ended.timeout_ms:,} ms timeout")
    if ended.exit_status is None:
        message = (ended.bwrap_message.strip()
                   or f"bubblewrap ended with status {ended.bwrap_status}")
        kind = "configuration" if "execvp" in message else "infrastructure"
        return Outcome(False, kind, None, None, message)
    if ended.exit_status in SIGNAL_STATUSES:
        number = ended.exit_status - 128
        return Outcome(False, "exit", None, number,
                       f"killed by signal {number} ({signal.Signals(number).name})")
    if ended.exit_status != 0:
        return Outcome(False, "exit", ended.exit_status, None,
                       f"exited with status {ended.exit_status}")
    return Outcome(True, None, 0, None, "")


def not_started(kind: str, sandbox_mode: str) -> dict[str, Any]:
    """The record of a run whose command never started (`configuration` or `infrastructure`)."""
    empty = {stream: stream_record(total=0, kept=0, sha256_hex=EMPTY_SHA256, stream=stream)
             for stream in ("stdout", "stderr")}
    return {"passed": False, "failureKind": kind, "exitCode": None, "signal": None,
            "durationMs": 0, "sandboxMode": sandbox_mode, **empty}


# The agent never sees a profile's command (rules §8), so a command that cannot be executed is
# said without naming it; the run's detail (the timeline, the admin, the log) names it.
CONFIGURATION_REASON = ("the profile's command cannot be executed in the sandbox (not found, or "
                        "not executable there)")


def failure_reason(detail: str, kind: str = "infrastructure") -> str:
    """An operator failure's `failureReason`: its detail, cut to MAX_REASON_CHARS — for a
    `configuration` failure, CONFIGURATION_REASON."""
    if kind == "configuration":
        return CONFIGURATION_REASON
    text = " ".join(detail.split())
    return text if len(text) <= MAX_REASON_CHARS else text[:MAX_REASON_CHARS - 1] + "…"


def infrastructure_record(sandbox_mode: str, *, baseline: bool, reason: str) -> dict[str, Any]:
    """The record of a run the infrastructure ended (the sandbox could not be set up, the
    worker was lost): it judged no tree."""
    return {**not_started("infrastructure", sandbox_mode), "treeBefore": None, "tree": None,
            "environment": None, "failureReason": failure_reason(reason),
            **({"baseline": True} if baseline else {})}


def environment_changed_record(sandbox_mode: str, *, baseline: bool, tree: dict[str, str],
                               environment: dict[str, Any] | None,
                               changes: list[dict[str, str]], count: int,
                               reason: str) -> dict[str, Any]:
    """Rules §17.8: the record of a run that did not start because its workspace environment
    is not the session's reference's: the tree it would have run on, the environment as it
    found it, and the first differing paths (of `count`)."""
    return {**not_started("environment-changed", sandbox_mode), "treeBefore": tree,
            "tree": tree, "environment": environment, "failureReason": failure_reason(reason),
            "environmentChanges": changes, "environmentChangesCount": count,
            **({"baseline": True} if baseline else {})}


def run_result(*, verification_id: str, profile: str, profile_receipt: str,
               started_after_seq: int | None, record: dict[str, Any]) -> dict[str, Any]:
    """The `reliability/code-verification` event data: the run's identity, then `record` (the
    sandbox's outcome and the trees), then its receipt."""
    data = {"verificationId": verification_id, "profile": profile,
            "profileReceipt": profile_receipt, "startedAfterSeq": started_after_seq, **record}
    data["receipt"] = receipt("code-verification-result", data)
    return data

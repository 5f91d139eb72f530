"""rules §4 rules 6–10: evaluating a contract's checks.

File checks read through `Workspace`. Tool and verification checks never scan the log here: they
ask an `Evidence` object aggregate questions. `LogEvidence` answers them over a list of stored
events, the reference the database's indexed SQL (`governor/selectors/evidence.py`) is tested
against.

Only events with seq > the contract's `startedAtSeq` count (the `after_seq` of every question).

Every evaluation judges one workspace tree (rules §10): `tree`, the reference
`{"id", "exclusions"}` of the tree the workspace was hashed to. File checks read that tree (the
`Workspace` that hashed it refuses anything else), and a verifier result counts only for the tree
it ran on (§10.3).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, NotRequired, Protocol, TypedDict

from governor.domain.canonical import (
    JSONValueError,
    canonical_bytes,
    canonical_equal,
    loads_strict,
)
from governor.domain.changes import PROTECTED_CHECK_ID, WorkspaceChange, scope_result
from governor.domain.documents import Check
from governor.domain.harness import is_workspace_mutation, tool_result_info
from governor.domain.heldout import oracle_evidence
from governor.domain.reports import against_baseline, named
from governor.domain.tamper import (
    MAX_FILE_BYTES,
    TAMPER_CHECK_KIND,
    findings_text,
    scan,
    scanned_paths,
)
from governor.domain.tree import TREE_ID_PREFIX
from governor.domain.workspace import Workspace, WorkspaceError

WORKSPACE_WRITE = "workspace-write"
EVIDENCE_SNIPPET_CHARS = 80
SHORT_TREE_HEX = 12  # hex digits of a tree id or digest in evidence text
NO_RUN = "No run of profile"  # a trusted run's check with no run yet: not run, not failed
# Failures the work did not cause and another run does not mend: the operator's to fix.
OPERATOR_FAILURES = ("infrastructure", "configuration")


def awaits_run(result: Mapping[str, Any]) -> bool:
    """A failed result of a trusted run's check that no run counts for yet: the check has not
    run, so it has not failed either (the reliability page counts it apart)."""
    return (result.get("kind") == "code_verification_succeeded" and not result.get("passed")
            and str(result.get("evidence", "")).startswith(NO_RUN))

TreeKey = tuple[str, str]  # (tree id, exclusions digest): two trees are the same when both are


def tree_key(reference: object) -> TreeKey | None:
    """A tree reference `{"id", "exclusions"}` as a comparable key; None when it is not one."""
    if not isinstance(reference, Mapping):
        return None
    tree_id, exclusions = reference.get("id"), reference.get("exclusions")
    if not isinstance(tree_id, str) or not isinstance(exclusions, str):
        return None
    return tree_id, exclusions


@dataclass(frozen=True)
class VerificationRecord:
    """One `reliability/code-verification` event, as the freshness rule needs it."""

    seq: int
    verification_id: str
    profile: str
    profile_receipt: str
    passed: bool
    failure_kind: str | None
    sandbox_mode: str
    started_after_seq: int  # the last seq of the log when the run was claimed
    receipt: str = ""  # its `code-verification-result` receipt ("" when recorded without one)
    tree: TreeKey | None = None  # the tree the result counts for (None: recorded without one)
    environment: str | None = None  # its environment's digest (None: the profile had none)
    baseline: bool = False  # a run on the contract-start tree: never evidence (§14.7)
    report: Mapping[str, Any] | None = None  # a report profile's counts and receipt (§14.6)
    stream_problem: str | None = None  # what its report stream disagreed with (§17.4)
    oracle: Mapping[str, Any] | None = None  # an oracle profile's verdict (§18.3)
    # the held-out suite versions it used, by field ("heldout", "oracle"; rules §18)
    suites: Mapping[str, str] = field(default_factory=dict)
    failure_reason: str | None = None  # why an operator failure failed (its failureReason)
    # rules §17.8: the first environment paths that differ from the reference's
    environment_changes: tuple[str, ...] = ()


class Evidence(Protocol):
    """Aggregate questions about a session log; `after_seq` excludes itself (seq > after_seq)."""

    def tool_success_count(
        self, tool: str, after_seq: int, arguments_contain: str | None, limit: int
    ) -> int:
        """`tool/call`s named `tool` after `after_seq` (whose raw `arguments` text contains
        `arguments_contain`, when given) that a non-error `tool/result` answers, by call id;
        counting stops at `limit`, so the cost is bounded by what the check needs."""
        ...

    def tool_call_count(self, tool: str, after_seq: int) -> int:
        """`tool/call`s named `tool` after `after_seq`."""
        ...

    def first_tool_error(self, after_seq: int) -> tuple[int, str | None] | None:
        """(seq, tool name or None when no call matches) of the first errored `tool/result`
        after `after_seq`, or None."""
        ...

    def mutation_boundary(self, after_seq: int, profile: str) -> int:
        """Rule 4.10: the highest seq after `after_seq` of a non-governor `tool/call` or
        `tool/code-dispatch-start`, or of a `reliability/code-verification` of another profile
        run in workspace-write mode; `after_seq` when there is none."""
        ...

    def verifications_after(self, profile: str, after_seq: int) -> list[VerificationRecord]:
        """`reliability/code-verification` events of `profile` after `after_seq`, in seq order."""
        ...

    def test_outcomes(self, verification_id: str) -> Mapping[str, str] | None:
        """The per-test outcomes a report run recorded beside its event (§14.6), or None."""
        ...


class CheckResult(TypedDict):
    id: str
    kind: str
    passed: bool
    evidence: str
    # rules §17.5, only on the tamper scan's check: {id, path, line, rule, reason, excerpt}
    findings: NotRequired[list[dict[str, object]]]
    # only on a trusted run's check that failed because its last run (or its baseline) could
    # not run for a reason only the operator can mend: {kind, reason} (OPERATOR_FAILURES)
    operatorFailure: NotRequired[dict[str, str]]


def _data(event: Mapping[str, Any]) -> dict[str, Any]:
    data = event.get("data")
    return data if isinstance(data, dict) else {}


class LogEvidence:
    """`Evidence` over stored events `{"seq", "type", "origin", "data"}` held in memory."""

    def __init__(self, events: Iterable[Mapping[str, Any]]) -> None:
        self._events = sorted(events, key=lambda event: int(event["seq"]))

    def _calls_answered_ok(self) -> set[int]:
        """Seqs of `tool/call`s that some non-error `tool/result` answers. A result answers the
        latest earlier call with its call id."""
        latest_call: dict[str, int] = {}
        answered: set[int] = set()
        for event in self._events:
            data = _data(event)
            if event["type"] == "tool/call" and isinstance(data.get("callId"), str):
                latest_call[data["callId"]] = int(event["seq"])
            elif (result := tool_result_info(event)) is not None:
                call_id, is_error = result
                if call_id in latest_call and not is_error:
                    answered.add(latest_call[call_id])
        return answered

    def _calls(self, tool: str, after_seq: int) -> list[tuple[int, dict[str, Any]]]:
        return [
            (int(event["seq"]), _data(event))
            for event in self._events
            if event["type"] == "tool/call"
            and int(event["seq"]) > after_seq
            and _data(event).get("name") == tool
        ]

    def tool_success_count(
        self, tool: str, after_seq: int, arguments_contain: str | None, limit: int
    ) -> int:
        answered = self._calls_answered_ok()
        count = 0
        for seq, data in self._calls(tool, after_seq):
            arguments = data.get("arguments")
            if arguments_contain is not None and not (
                isinstance(arguments, str) and arguments_contain in arguments
            ):
                continue
            if seq in answered:
                count += 1
        return min(count, limit)

    def tool_call_count(self, tool: str, after_seq: int) -> int:
        return len(self._calls(tool, after_seq))

    def first_tool_error(self, after_seq: int) -> tuple[int, str | None] | None:
        call_names: dict[str, str | None] = {}
        for event in self._events:
            data = _data(event)
            if event["type"] == "tool/call" and isinstance(data.get("callId"), str):
                name = data.get("name")
                call_names[data["callId"]] = name if isinstance(name, str) else None
            elif int(event["seq"]) > after_seq and (result := tool_result_info(event)) is not None:
                call_id, is_error = result
                if is_error:
                    return int(event["seq"]), call_names.get(call_id)
        return None

    def mutation_boundary(self, after_seq: int, profile: str) -> int:
        boundary = after_seq
        for event in self._events:
            seq = int(event["seq"])
            if seq <= after_seq:
                continue
            data = _data(event)
            kind = event["type"]
            if kind in ("tool/call", "tool/code-dispatch-start"):
                mutates = is_workspace_mutation(kind, data.get("name"))
            elif kind == "reliability/code-verification":
                mutates = (
                    data.get("profile") != profile and data.get("sandboxMode") == WORKSPACE_WRITE
                    and data.get("baseline") is not True
                )
            else:
                mutates = False
            if mutates:
                boundary = max(boundary, seq)
        return boundary

    def test_outcomes(self, verification_id: str) -> Mapping[str, str] | None:
        """A log alone holds no per-test outcomes (they are kept beside the run)."""
        return None

    def verifications_after(self, profile: str, after_seq: int) -> list[VerificationRecord]:
        return [
            verification_record(int(event["seq"]), _data(event))
            for event in self._events
            if event["type"] == "reliability/code-verification"
            and int(event["seq"]) > after_seq
            and _data(event).get("profile") == profile
        ]


def _int(value: object, default: int) -> int:
    return value if type(value) is int else default


def verification_record(seq: int, data: Mapping[str, Any]) -> VerificationRecord:
    """A `reliability/code-verification` event's data (rules §8 "Result") as a record."""
    failure_kind = data.get("failureKind")
    return VerificationRecord(
        seq=seq,
        verification_id=str(data.get("verificationId", "")),
        profile=str(data.get("profile", "")),
        profile_receipt=str(data.get("profileReceipt", "")),
        passed=data.get("passed") is True,
        failure_kind=failure_kind if isinstance(failure_kind, str) else None,
        sandbox_mode=str(data.get("sandboxMode", "")),
        started_after_seq=_int(data.get("startedAfterSeq"), seq - 1),
        receipt=str(data.get("receipt", "")),
        tree=tree_key(data.get("tree")),
        environment=_environment_digest(data.get("environment")),
        baseline=data.get("baseline") is True,
        report=data.get("report") if isinstance(data.get("report"), Mapping) else None,
        stream_problem=_stream_problem(data.get("stream")),
        oracle=data.get("oracle") if isinstance(data.get("oracle"), Mapping) else None,
        suites={name: str(data[name].get("version")) for name in ("heldout", "oracle")
                if isinstance(data.get(name), Mapping)},
        failure_reason=(data["failureReason"] if isinstance(data.get("failureReason"), str)
                        else None),
        environment_changes=tuple(
            f"{change.get('path')} ({change.get('kind')})"
            for change in data.get("environmentChanges") or [] if isinstance(change, Mapping)),
    )


def _stream_problem(stream: object) -> str | None:
    problem = stream.get("problem") if isinstance(stream, Mapping) else None
    return problem if isinstance(problem, str) else None


def _environment_digest(reference: object) -> str | None:
    digest = reference.get("digest") if isinstance(reference, Mapping) else None
    return digest if isinstance(digest, str) else None


# --- JSON pointer (rule 4.8) ---------------------------------------------------------------

_INDEX_RE = re.compile(r"^(0|[1-9][0-9]*)$")
_MISSING = object()


def resolve_pointer(document: object, pointer: str) -> tuple[bool, object]:
    """RFC 6901, strictly: (True, value) when `pointer` names a value in `document`, else
    (False, None). Array indices are decimal without leading zeros and in range; `-` and any
    other name on an array, and any step into a scalar, resolve to nothing."""
    if pointer == "":
        return True, document
    if not pointer.startswith("/") or re.search(r"~(?![01])", pointer):
        return False, None
    current = document
    for token in pointer[1:].split("/"):
        name = token.replace("~1", "/").replace("~0", "~")
        if isinstance(current, dict):
            current = current.get(name, _MISSING)
            if current is _MISSING:
                return False, None
        elif isinstance(current, list):
            if not _INDEX_RE.match(name) or int(name) >= len(current):
                return False, None
            current = current[int(name)]
        else:
            return False, None
    return True, current


# --- evaluation ------------------------------------------------------------------------------


def _snippet(value: object) -> str:
    text = value if isinstance(value, str) else canonical_bytes(value).decode("utf-8")
    if len(text) > EVIDENCE_SNIPPET_CHARS:
        text = text[: EVIDENCE_SNIPPET_CHARS - 1] + "…"
    return repr(text) if isinstance(value, str) else text


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


@dataclass(frozen=True)
class _Context:
    after_seq: int
    evidence: Evidence
    workspace: Workspace
    tree: TreeKey | None
    current_profile_receipts: Mapping[str, str]
    max_file_bytes: int
    environments: Mapping[str, str | None]
    changes: Sequence[WorkspaceChange] | None  # since the contract start (None: unknown)
    require_discriminating: bool  # the project requires fail-to-pass ≥ 1 (rules §17.6)
    scanned: Sequence[WorkspaceChange] | None = None  # what the tamper scan reads (§17.5)
    # rules §17.2: since the session's reference, which the injected protected-paths check
    # judges (None: the session has none, and it judges `changes`)
    reference_changes: Sequence[WorkspaceChange] | None = None
    # rules §18: the current version of each held-out suite a profile names, by profile id
    suite_versions: Mapping[str, Mapping[str, str]] | None = None


def _file_exists(check: Check, ctx: _Context) -> tuple[bool, str]:
    path = check["path"]
    text = ctx.workspace.read_text(path, max_bytes=ctx.max_file_bytes)
    return True, f"{path} exists as a regular UTF-8 file of {len(text.encode('utf-8'))} bytes."


def _file_absent(check: Check, ctx: _Context) -> tuple[bool, str]:
    path = check["path"]
    if ctx.workspace.entry_present(path):
        return False, f"{path} is present."
    return True, f"{path} does not exist."


def _file_contains(check: Check, ctx: _Context) -> tuple[bool, str]:
    path, needle = check["path"], check["text"]
    found = needle in ctx.workspace.read_text(path, max_bytes=ctx.max_file_bytes)
    if found:
        return True, f"{path} contains {_snippet(needle)}."
    return False, f"{path} does not contain {_snippet(needle)}."


def _file_not_contains(check: Check, ctx: _Context) -> tuple[bool, str]:
    passed, evidence = _file_contains(check, ctx)
    return not passed, evidence


def _file_equals(check: Check, ctx: _Context) -> tuple[bool, str]:
    path, expected = check["path"], check["text"]
    actual = ctx.workspace.read_text(path, max_bytes=ctx.max_file_bytes)
    if actual == expected:
        return True, f"{path} equals the expected text ({len(expected)} characters)."
    prefix = 0
    for left, right in zip(actual, expected, strict=False):
        if left != right:
            break
        prefix += 1
    return False, (
        f"{path} differs from the expected text at character {prefix} "
        f"({len(actual)} characters, expected {len(expected)})."
    )


def _json_equals(check: Check, ctx: _Context) -> tuple[bool, str]:
    path, pointer, expected = check["path"], check["pointer"], check["value"]
    text = ctx.workspace.read_text(path, max_bytes=ctx.max_file_bytes)
    try:
        document = loads_strict(text)
    except JSONValueError as exc:
        return False, f"{path} is not valid JSON: {exc.reason}."
    found, actual = resolve_pointer(document, pointer)
    where = f"{path} at pointer {pointer!r}"
    if not found:
        return False, f"{where} resolves to nothing."
    if canonical_equal(actual, expected):
        return True, f"{where} equals {_snippet(expected)}."
    return False, f"{where} is {_snippet(actual)}, expected {_snippet(expected)}."


def _min_count(check: Check) -> int:
    value = check.get("minCount", 1)
    if type(value) is not int or value < 1:
        raise ValueError(f"minCount {value!r} is not a positive integer")
    return value


def _tool_succeeded(check: Check, ctx: _Context) -> tuple[bool, str]:
    tool, needle, need = check["tool"], check.get("argumentsContain"), _min_count(check)
    count = ctx.evidence.tool_success_count(tool, ctx.after_seq, needle, need)
    matching = f" with arguments containing {_snippet(needle)}" if needle is not None else ""
    if count >= need:
        return True, (f"Tool {tool!r}{matching} succeeded at least {_times(need)} after seq "
                      f"{ctx.after_seq}, as needed.")
    return False, (f"Tool {tool!r}{matching} succeeded {_times(count)} after seq "
                   f"{ctx.after_seq} (at least {need} needed).")


def _tool_not_called(check: Check, ctx: _Context) -> tuple[bool, str]:
    tool = check["tool"]
    count = ctx.evidence.tool_call_count(tool, ctx.after_seq)
    if count == 0:
        return True, f"Tool {tool!r} was not called after seq {ctx.after_seq}."
    return False, f"Tool {tool!r} was called {_times(count)} after seq {ctx.after_seq}."


def _no_tool_errors(check: Check, ctx: _Context) -> tuple[bool, str]:
    error = ctx.evidence.first_tool_error(ctx.after_seq)
    if error is None:
        return True, f"No tool result after seq {ctx.after_seq} is an error."
    seq, tool = error
    named = f" of tool {tool!r}" if tool is not None else ""
    return False, f"The tool result{named} at seq {seq} is an error."


class _Window(NamedTuple):
    runs: list[VerificationRecord]  # the runs that count, oldest first
    stale: int  # results of an edited profile
    other_tree: VerificationRecord | None  # the latest result that ran on another tree
    other_trees: int  # how many results ran on another tree
    other_environment: VerificationRecord | None  # the latest on this tree, another environment
    boundary: int
    older_suites: int = 0  # results of an earlier version of a held-out suite (rules §18)


def _counted_runs(
    check: Check, evidence: Evidence, after_seq: int, current: str,
    tree: TreeKey | None, environments: Mapping[str, str | None],
    suite_versions: Mapping[str, Mapping[str, str]] | None = None,
) -> _Window:
    """Rules 4.10 and 10.3: the last `minCount` fresh runs of the check's profile — started
    after the mutation boundary, of the profile's current receipt (and, for a profile judged by
    held-out suites, of their current versions: `suite_versions`, rules §18), on the tree
    judged and, for a profile with an environment, with the environment as it hashes now
    (`environments`: the digest by profile id, None when it could not be hashed; absent: the
    profile has none)."""
    profile, need = check["profile"], _min_count(check)
    boundary = evidence.mutation_boundary(after_seq, profile)
    # A run counts only if it STARTED after the boundary: one that was already running when
    # the workspace changed may have tested the old files, however late it finished.
    runs = [run for run in evidence.verifications_after(profile, boundary)
            if run.started_after_seq >= boundary and not run.baseline]
    suites = (suite_versions or {}).get(profile)
    of_receipt = [run for run in runs if run.profile_receipt == current]
    current_runs = [run for run in of_receipt
                    if suites is None or dict(run.suites) == dict(suites)]
    # §10.3: a result counts only for the tree it ran on — whatever the log says changed.
    on_tree = [run for run in current_runs if tree is not None and run.tree == tree]
    other = [run for run in current_runs if tree is None or run.tree != tree]
    environment = environments.get(profile)
    fresh = [run for run in on_tree if run.environment == environment
             and (environment is not None or profile not in environments)]
    elsewhere = [run for run in on_tree if run not in fresh]
    return _Window(fresh[-need:], len(runs) - len(of_receipt), other[-1] if other else None,
                   len(other), elsewhere[-1] if elsewhere else None, boundary,
                   len(of_receipt) - len(current_runs))


def _short_hex(text: str) -> str:
    return text.rsplit(":", 1)[-1][:SHORT_TREE_HEX] + "…"


def stale_tree_note(ran_on: TreeKey | None, now: TreeKey | None) -> str:
    """§10.3 evidence: "stale: ran on gittree:sha256:ab12…, the workspace is now cd34…"."""
    if now is None:
        return "stale: the workspace tree could not be hashed"
    if ran_on is None:
        return f"stale: ran on no recorded tree, the workspace is now {_short_hex(now[0])}"
    if ran_on[0] == now[0]:
        return (f"stale: ran with exclusions {_short_hex(ran_on[1])}, the project's are now "
                f"{_short_hex(now[1])}")
    return (f"stale: ran on {TREE_ID_PREFIX}{_short_hex(ran_on[0])}, the workspace is now "
            f"{_short_hex(now[0])}")


def stale_environment_note(ran_with: str | None, now: str | None) -> str:
    """Evidence for a result whose environment directories have changed since it ran."""
    if now is None:
        return "stale: the profile's environment could not be hashed"
    if ran_with is None:
        return f"stale: ran without the profile's environment, which is now {_short_hex(now)}"
    return (f"stale: ran with environment {_short_hex(ran_with)}, the environment is now "
            f"{_short_hex(now)}")


def operator_failure_text(run: VerificationRecord, *, baseline: bool = False) -> str:
    """Why a trusted run failed for the operator's reason, worded for who can act."""
    which = "its baseline run on the contract-start tree" if baseline else "the last run"
    reason = f": {run.failure_reason}" if run.failure_reason else ""
    return (f"{which} of profile {run.profile!r} could not run ({run.failure_kind}{reason}). "
            "This is the operator's to fix (the profile, the sandbox or the worker), not a "
            "fault of the work, and asking for another run does not help until they have: tell "
            "the user what the operator must fix, or abstain")


def _operator_failed(check: Check, ctx: _Context) -> VerificationRecord | None:
    """The latest run of the check's profile (current receipt, after the contract start; an
    agent's run only when it started after the last workspace change, so a workspace the agent
    has changed since gets a new run), or its latest baseline run, when it failed for the
    operator's reason and no later one of the same kind has finished since: what an operator
    must mend first."""
    profile = str(check.get("profile"))
    current = ctx.current_profile_receipts.get(profile)
    boundary = ctx.evidence.mutation_boundary(ctx.after_seq, profile)
    runs = [run for run in ctx.evidence.verifications_after(profile, ctx.after_seq)
            if run.profile_receipt == current
            and (run.baseline or run.started_after_seq >= boundary)]
    for baseline in (False, True):
        latest = [run for run in runs if run.baseline is baseline][-1:]
        if latest and not latest[0].passed and latest[0].failure_kind in OPERATOR_FAILURES:
            return latest[0]
    return None


def _code_verification_succeeded(check: Check, ctx: _Context) -> tuple[bool, str]:
    profile, need = check["profile"], _min_count(check)
    current = ctx.current_profile_receipts.get(profile)
    if current is None:
        return False, f"Profile {profile!r} is not configured in this project."
    blocked = _operator_failed(check, ctx)
    if blocked is not None:
        text = operator_failure_text(blocked, baseline=blocked.baseline)
        return False, f"{text[:1].upper()}{text[1:]}."
    window = _counted_runs(check, ctx.evidence, ctx.after_seq, current, ctx.tree,
                           ctx.environments, ctx.suite_versions)
    passed_count = sum(1 for run in window.runs if run.passed)
    stale = window.stale
    notes = (f"; {stale} stale result{'s' if stale != 1 else ''} of an edited profile ignored"
             if stale else "")
    if window.older_suites:
        count = window.older_suites
        notes += (f"; {count} result{'s' if count != 1 else ''} of an earlier version of its "
                  "held-out suite ignored")
    if window.other_tree is not None:
        count = window.other_trees
        notes += (f"; {count} result{'s' if count != 1 else ''} of another tree ignored "
                  f"({stale_tree_note(window.other_tree.tree, ctx.tree)})")
    if window.other_environment is not None:
        note = stale_environment_note(window.other_environment.environment,
                                      ctx.environments.get(profile))
        notes += f"; a result of another environment ignored ({note})"
    since = f"after seq {window.boundary}" + (
        " (the last workspace change)" if window.boundary > ctx.after_seq
        else " (the contract start)"
    )
    if not window.runs:
        return False, f"{NO_RUN} {profile!r} {since} on this tree{notes}."
    count = len(window.runs)
    summary = (
        f"{passed_count} of the last {count} run{'s' if count != 1 else ''} "
        f"of profile {profile!r} {since} on this tree passed (need {need}){notes}."
    )
    held = count == need and passed_count == need
    if not held and (why := _why_failed(window.runs[-1], ctx)):
        summary = summary[:-1] + f"; {why}."
    if held and (last := window.runs[-1]).oracle is not None:
        summary = summary[:-1] + f"; {oracle_evidence(last.oracle)}."
    if held and any(run.report is not None or run.oracle is not None for run in window.runs):
        held, against = _against_baseline(profile, window.runs, ctx)
        summary = summary[:-1] + f"; {against}."
    return held, summary


def _why_failed(run: VerificationRecord, ctx: _Context) -> str:
    """What the agent needs to repair after a failed run (§14.6): the failing, erroring or
    skipped tests of a report run, or whose fault a failure it cannot repair is."""
    kind = run.failure_kind
    if run.passed:
        return ""
    if kind in OPERATOR_FAILURES:
        return operator_failure_text(run)
    if kind == "environment-changed":
        paths = ", ".join(run.environment_changes) or "its directories"
        return (f"the last run did not start: the profile's environment differs from what the "
                f"session started with ({paths}). The environment is the operator's (rules "
                "§17.8): put it back exactly as it was — never change installed packages or "
                "start-up files to make a check pass — or, when the task truly needs another "
                "environment, tell the user: only the operator can change it")
    if kind == "bad-report" and run.stream_problem is not None:
        return (f"the last run's report does not agree with what pytest streamed as it ran "
                f"(bad-report: {run.stream_problem}): code in the runner's process ended it "
                "early or changed the report or the runner — remove that and make the real "
                "fix, or abstain")
    if run.oracle is not None and kind in ("bad-output", "outputs-differ", "exit", "timeout"):
        return oracle_evidence(run.oracle, inputs=True)
    if kind in ("no-report", "bad-report"):
        return (f"the last run left {'no' if kind == 'no-report' else 'no usable'} test report "
                f"({kind}): the test runner ended before it reported (code that exits the "
                "process, or breaks the runner, on import?)")
    outcomes = ctx.evidence.test_outcomes(run.verification_id) if run.report else None
    if outcomes:
        return "not passing: " + named(outcomes, ("failed", "error", "skipped"))
    return ""


def _against_baseline(profile: str, runs: Sequence[VerificationRecord],
                      ctx: _Context) -> tuple[bool, str]:
    """§14.7: each counted run of a report profile against the baseline run of the contract
    start tree; §17.6: fail-to-pass ≥ 1 too when the project requires discriminating
    evidence (while the baseline runs, the check fails as before)."""
    # The baseline of the profile as it is now: one of an edited profile ran another command
    # (a new one is queued when the profile is edited, or with the next run asked for).
    current = ctx.current_profile_receipts.get(profile)
    baselines = [run for run in ctx.evidence.verifications_after(profile, ctx.after_seq)
                 if run.baseline and run.profile_receipt == current]
    if not baselines:
        return False, ("its baseline run on the contract-start tree is still running: verify "
                       "again once it has finished")
    baseline = ctx.evidence.test_outcomes(baselines[-1].verification_id)
    if baseline is None:
        return False, ("its baseline run on the contract-start tree recorded no test report "
                       f"({baselines[-1].failure_kind}): the operator must fix the profile")
    texts = []
    for run in runs:
        outcomes = ctx.evidence.test_outcomes(run.verification_id)
        if outcomes is None:
            return False, "a counted run's test outcomes are not kept"
        held, text = against_baseline(baseline, outcomes,
                                      discriminating=ctx.require_discriminating)
        if not held:
            return False, text
        texts.append(text)
    return True, texts[-1]


def _scope(check: Check, ctx: _Context) -> tuple[bool, str]:
    if check.get("id") == PROTECTED_CHECK_ID and ctx.reference_changes is not None:
        return scope_result(check, ctx.reference_changes, since="the reference")
    if ctx.changes is None:
        return False, ("The changes since the contract start cannot be computed: its start "
                       "tree is not kept.")
    return scope_result(check, ctx.changes)


def _tamper_free(ctx: _Context) -> tuple[bool, str, list[dict[str, object]]]:
    """Rule 17.5: the tamper scan of the changed Python files, each read from the judged
    tree (one that cannot be read is a finding, never clean)."""
    if ctx.scanned is None:
        return False, ("The changed files cannot be computed: the tree they are judged "
                       "against is not kept."), []

    def read(path: str) -> bytes | str:
        try:
            return ctx.workspace.read_bytes(path, max_bytes=MAX_FILE_BYTES)
        except WorkspaceError as exc:
            return str(exc)

    paths = scanned_paths((change.path, change.kind) for change in ctx.scanned)
    found, more = scan(paths, read)
    findings = [finding.as_dict() for finding in found]
    files = f"{len(paths)} changed Python file{'s' if len(paths) != 1 else ''}"
    if not findings:
        return True, f"No tamper finding in the {files}.", []
    count = len(findings) + more
    return False, (f"{count} tamper finding{'s' if count != 1 else ''} in the {files}: "
                   f"{findings_text(findings, more)}."), findings


_EVALUATORS = {
    "file_exists": _file_exists,
    "file_absent": _file_absent,
    "file_contains": _file_contains,
    "file_not_contains": _file_not_contains,
    "file_equals": _file_equals,
    "json_equals": _json_equals,
    "tool_succeeded": _tool_succeeded,
    "tool_not_called": _tool_not_called,
    "no_tool_errors": _no_tool_errors,
    "code_verification_succeeded": _code_verification_succeeded,
    "changes_within": _scope,
    "unchanged": _scope,
}


def evaluate_check(
    check: Check,
    *,
    after_seq: int,
    evidence: Evidence,
    workspace: Workspace,
    tree: Mapping[str, str] | None,
    current_profile_receipts: Mapping[str, str],
    max_file_bytes: int,
    environments: Mapping[str, str | None] | None = None,
    changes: Sequence[WorkspaceChange] | None = None,
    require_discriminating: bool = False,
    scanned: Sequence[WorkspaceChange] | None = None,
    reference_changes: Sequence[WorkspaceChange] | None = None,
    suite_versions: Mapping[str, Mapping[str, str]] | None = None,
) -> CheckResult:
    """One stored check's result on the tree `workspace` was hashed to (`tree`, its
    reference; `environments`: the environment digests of the profiles that declare one, see
    `_counted_runs`; `require_discriminating`: the project's setting, rules §17.6; `scanned`:
    the changes the tamper scan reads, rules §17.5). Any exception is this check's failure,
    never a pass."""
    check_id, kind = str(check.get("id")), str(check.get("kind"))
    ctx = _Context(after_seq, evidence, workspace, tree_key(tree), current_profile_receipts,
                   max_file_bytes, environments or {}, changes, require_discriminating,
                   scanned, reference_changes, suite_versions)
    findings: list[dict[str, object]] | None = None
    try:
        evaluator = _EVALUATORS.get(kind)
        if kind == TAMPER_CHECK_KIND:
            passed, text, findings = _tamper_free(ctx)
        elif evaluator is None:
            raise ValueError(f"unknown check kind {kind!r}")
        else:
            passed, text = evaluator(check, ctx)
    except WorkspaceError as exc:
        passed, text = False, f"{check.get('path')}: {exc}."
    except Exception as exc:  # a crash inside one check is that check's failure (§4)
        passed, text = False, f"The check could not be evaluated: {type(exc).__name__}: {exc}"
    result: CheckResult = {"id": check_id, "kind": kind, "passed": passed is True,
                           "evidence": text}
    if findings:
        result["findings"] = findings
    if kind == "code_verification_succeeded" and not result["passed"]:
        blocked = _operator_failed(check, ctx)
        if blocked is not None:
            result["operatorFailure"] = {"kind": str(blocked.failure_kind),
                                         "reason": blocked.failure_reason or ""}
    return result


def runs_counted(
    contract: Mapping[str, Any],
    *,
    evidence: Evidence,
    current_profile_receipts: Mapping[str, str],
    tree: Mapping[str, str] | None,
    environments: Mapping[str, str | None] | None = None,
    suite_versions: Mapping[str, Mapping[str, str]] | None = None,
) -> list[VerificationRecord]:
    """The runs an attempt on `tree` evaluated now counts for the contract's code checks
    (rules 4.10 and 10.3), in check order: what a terminal's attestation lists."""
    after_seq = int(contract["startedAtSeq"])
    counted = []
    for check in contract["checks"]:
        current = current_profile_receipts.get(str(check.get("profile")))
        if check.get("kind") == "code_verification_succeeded" and current is not None:
            counted += _counted_runs(check, evidence, after_seq, current, tree_key(tree),
                                     environments or {}, suite_versions).runs
    return counted


def evaluate_checks(
    contract: Mapping[str, Any],
    *,
    evidence: Evidence,
    workspace: Workspace,
    tree: Mapping[str, str] | None,
    current_profile_receipts: Mapping[str, str],
    max_file_bytes: int,
    environments: Mapping[str, str | None] | None = None,
    changes: Sequence[WorkspaceChange] | None = None,
    require_discriminating: bool = False,
    scanned: Sequence[WorkspaceChange] | None = None,
    reference_changes: Sequence[WorkspaceChange] | None = None,
    suite_versions: Mapping[str, Mapping[str, str]] | None = None,
) -> list[CheckResult]:
    """Every check of a stored contract (any version), in declaration order, on `tree`
    (`changes`: since the contract start; `reference_changes`: since the session's reference,
    what the injected protected-paths check judges when there is one, rules §17.2)."""
    after_seq = int(contract["startedAtSeq"])
    return [
        evaluate_check(
            check,
            after_seq=after_seq,
            evidence=evidence,
            workspace=workspace,
            tree=tree,
            current_profile_receipts=current_profile_receipts,
            max_file_bytes=max_file_bytes,
            environments=environments,
            changes=changes,
            require_discriminating=require_discriminating,
            scanned=scanned,
            reference_changes=reference_changes,
            suite_versions=suite_versions,
        )
        for check in contract["checks"]
    ]


def unjudged_results(contract: Mapping[str, Any], reason: str) -> list[CheckResult]:
    """§10: a workspace that cannot be hashed completely is not judged at all: every check
    fails, with the reason as its evidence."""
    return [{"id": str(check.get("id")), "kind": str(check.get("kind")), "passed": False,
             "evidence": f"Nothing was judged: {reason}."}
            for check in contract["checks"]]

"""SEMANTICS §7: deciding an attempt, the attempt and terminal payloads with their receipts, and
the exact texts the agent receives (repair, terminals, review-pending).

Payloads (event data) and what their receipts cover:

    attempt   {contractId, attempt, trigger, passed, results, receipt}
              receipt = receipt("attempt", the payload without "receipt")
    terminal  {contractId, status, reason, attemptReceipt?, receipt}
              receipt = receipt("terminal", the payload without "receipt"); the signature the
              service adds later is over the receipt, so it is never part of the payload.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from governor.domain.canonical import receipt
from governor.domain.contracts import ContractError

Decision = Literal["certified", "exhausted", "repair"]
TRIGGERS = ("manual", "turn-stop")
MAX_ABSTAIN_REASON_CHARS = 2000


def _failed(results: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [result for result in results if result["passed"] is not True]


def _failure_list(failed: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(f"- {r['id']} ({r['kind']}): {r['evidence']}" for r in failed)


def decide_attempt(
    results: Sequence[Mapping[str, Any]], attempt_number: int, max_attempts: int
) -> tuple[Decision, str]:
    """All checks passed → certified; failed on the last allowed attempt → exhausted (the failed
    checks are the reason); otherwise repair."""
    if not results:
        raise ValueError("an attempt evaluates at least one check")
    failed = _failed(results)
    if not failed:
        return (
            "certified",
            f"All {len(results)} checks passed on attempt {attempt_number}/{max_attempts}.",
        )
    listing = "; ".join(f"{r['id']}: {r['evidence']}" for r in failed)
    summary = (
        f"{len(failed)} of {len(results)} checks failed on attempt {attempt_number}/{max_attempts}"
    )
    if attempt_number >= max_attempts:
        return "exhausted", f"{summary}, the last allowed attempt. Failed checks — {listing}"
    return "repair", f"{summary}. Failed checks — {listing}"


def attempt_payload(
    *, contract_id: str, attempt: int, trigger: str, results: Sequence[Mapping[str, Any]],
    tree: Mapping[str, str] | None,
) -> dict[str, Any]:
    """`reliability/attempt` data with its receipt. `tree` is the workspace tree its checks
    judged (SEMANTICS §10.2), None when it could not be hashed (then every check failed)."""
    if trigger not in TRIGGERS:
        raise ValueError(f"attempt trigger {trigger!r} is not one of {TRIGGERS}")
    payload: dict[str, Any] = {
        "contractId": contract_id,
        "attempt": attempt,
        "trigger": trigger,
        "passed": bool(results) and not _failed(results),
        "results": [dict(result) for result in results],
        "tree": dict(tree) if tree is not None else None,
    }
    payload["receipt"] = receipt("attempt", payload)
    return payload


def terminal_payload(
    *, contract_id: str, status: str, reason: str, attempt_receipt: str | None = None
) -> dict[str, Any]:
    """`reliability/terminal` data with its receipt (abstained terminals have no attempt)."""
    if status not in ("certified", "exhausted", "abstained"):
        raise ValueError(f"terminal status {status!r} is unknown")
    payload: dict[str, Any] = {"contractId": contract_id, "status": status, "reason": reason}
    if attempt_receipt is not None:
        payload["attemptReceipt"] = attempt_receipt
    payload["receipt"] = receipt("terminal", payload)
    return payload


def abstain_reason(raw: Any) -> str:
    """§7: an abstain reason, trimmed, 1..2000 characters."""
    if type(raw) is not str:
        raise ContractError([{"path": "reason", "message": "must be a string"}])
    reason = raw.strip()
    if not reason:
        raise ContractError([{"path": "reason", "message": "must not be empty or blank"}])
    if len(reason) > MAX_ABSTAIN_REASON_CHARS:
        raise ContractError(
            [
                {
                    "path": "reason",
                    "message": f"is longer than {MAX_ABSTAIN_REASON_CHARS} characters "
                    f"({len(reason)})",
                }
            ]
        )
    return reason


def repair_message(
    results: Sequence[Mapping[str, Any]], attempt_number: int, max_attempts: int
) -> str:
    failed = _failed(results)
    return (
        f"Completion is not verified yet: attempt {attempt_number}/{max_attempts} failed "
        f"{len(failed)} of {len(results)} checks.\n"
        f"Failed checks:\n{_failure_list(failed)}\n"
        "Repair only these failed checks; leave what already passes alone. Do not repeat actions "
        "whose outcome is unknown — inspect the current state first instead. Then verify again."
    )


def certified_message(terminal: Mapping[str, Any]) -> str:
    return (
        "The completion contract is certified: every check passed. Report the result to the user "
        "truthfully — say what was verified and nothing more — and cite the terminal receipt "
        f"{terminal['receipt']}."
    )


def exhausted_message(terminal: Mapping[str, Any], results: Sequence[Mapping[str, Any]]) -> str:
    failed = _failed(results)
    return (
        "The completion contract is exhausted: the last allowed attempt still failed. Do not "
        "claim the task is complete. Explain to the user which checks failed and why:\n"
        f"{_failure_list(failed)}\n"
        f"Cite the terminal receipt {terminal['receipt']}."
    )


def abstained_message(terminal: Mapping[str, Any]) -> str:
    return (
        f"You abstained: {terminal['reason']}\n"
        "Do not claim the task is complete. Tell the user why you stopped and cite the terminal "
        f"receipt {terminal['receipt']}."
    )


def terminal_message(terminal: Mapping[str, Any], results: Sequence[Mapping[str, Any]] = ()) -> str:
    """The text for a terminal; `results` are the final attempt's results (for exhausted)."""
    status = terminal["status"]
    if status == "certified":
        return certified_message(terminal)
    if status == "exhausted":
        return exhausted_message(terminal, results)
    if status == "abstained":
        return abstained_message(terminal)
    raise ValueError(f"terminal status {status!r} is unknown")


REVIEW_PENDING_ALLOW_MESSAGE = (
    "A contract review is still pending, so no completion contract is active yet. You may stop, "
    "but completion must not be claimed as verified: tell the user the work awaits review."
)

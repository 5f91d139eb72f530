"""rules §7: deciding an attempt and a turn-stop, and the attempt and terminal payloads with
their receipts. The texts the agent receives are in `governor/domain/messages.py`.

When a contract is certified is decided here and nowhere else: `decide_attempt` (every check
passed, and the project has no person review the delivery) and `decide_delivery` (a person
approved the delivered change). The services load the facts and write the verdict.

Payloads (event data) and what their receipts cover:

    attempt   {contractId, attempt, trigger, passed, results, tree, madeBy?, receipt}
              receipt = receipt("attempt", the payload without "receipt")
    terminal  {contractId, status, reason, attemptReceipt?, receipt}
              receipt = receipt("terminal", the payload without "receipt"); the signature the
              service adds later is over the receipt, so it is never part of the payload.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from governor.domain import messages
from governor.domain.canonical import receipt
from governor.domain.contracts import ContractError
from governor.domain.documents import AttemptDocument, TerminalDocument, TokenRef
from governor.domain.lifecycle import DEFAULT_MAX_ATTEMPTS

Decision = Literal["certified", "exhausted", "repair", "delivery-pending"]
TRIGGERS = ("manual", "turn-stop")
MAX_ABSTAIN_REASON_CHARS = 2000
# `Project.delivery_review`: a person reviews every delivered change before it is certified.
DELIVERY_REVIEW_REQUIRED = "required"


def reviews_deliveries(delivery_review: str) -> bool:
    """A project's `delivery_review` has a person review every delivered change."""
    return delivery_review == DELIVERY_REVIEW_REQUIRED


@dataclass(frozen=True)
class Budget:
    """A contract's repair budget as the pages show it (issue 40): `used` of `maximum`
    attempts; `ended`, the terminal status when the contract ended."""

    used: int
    maximum: int
    ended: str | None = None

    @property
    def left(self) -> int:
        return max(self.maximum - self.used, 0)


def max_attempts_of(contract: Mapping[str, Any]) -> int:
    """A contract's repair budget: its `maxAttempts` (contracts from before it was recorded:
    the default)."""
    return int(contract.get("maxAttempts", DEFAULT_MAX_ATTEMPTS))


def budget_of(contract: Mapping[str, Any] | None, attempts_made: int,
              terminal: Mapping[str, Any] | None = None) -> Budget | None:
    """The budget of `contract` (None without one) after `attempts_made` attempts."""
    if contract is None:
        return None
    return Budget(used=attempts_made,
                  maximum=max_attempts_of(contract),
                  ended=str(terminal["status"]) if terminal else None)


def decide_attempt(
    results: Sequence[Mapping[str, Any]], attempt_number: int, max_attempts: int, *,
    delivery_review: str,
) -> tuple[Decision, str]:
    """All checks passed → certified, or delivery-pending where the project's `delivery_review`
    is required (issue 28: a person reviews the delivered change first, and `decide_delivery`
    certifies); so too when only the tamper scan failed, on findings (rules §17.5: a person
    may accept them there, and nowhere else); failed on the last allowed attempt → exhausted
    (the failed checks are the reason); otherwise repair."""
    if not results:
        raise ValueError("an attempt evaluates at least one check")
    failed = messages.failed(results)
    if delivery_review == DELIVERY_REVIEW_REQUIRED and messages.tamper_only(results):
        return "delivery-pending", (f"Every check but the tamper scan passed on attempt "
                                    f"{attempt_number}/{max_attempts}; a person reviews its "
                                    f"findings.")
    if not failed:
        passed = f"All {len(results)} checks passed on attempt {attempt_number}/{max_attempts}."
        if delivery_review == DELIVERY_REVIEW_REQUIRED:
            return "delivery-pending", passed
        return "certified", passed
    listing = "; ".join(f"{r['id']}: {r['evidence']}" for r in failed)
    summary = (
        f"{len(failed)} of {len(results)} checks failed on attempt {attempt_number}/{max_attempts}"
    )
    if attempt_number >= max_attempts:
        return "exhausted", f"{summary}, the last allowed attempt. Failed checks — {listing}"
    return "repair", f"{summary}. Failed checks — {listing}"


def decide_delivery(*, decision: str, decision_receipt: str, contract_open: bool,
                    attempts_made: int, max_attempts: int, accepted_findings: int = 0,
                    ) -> tuple[Literal["certified", "exhausted"], str] | None:
    """A person's decision on a delivery review (issue 28), whose contract is still the open
    one (`contract_open`; else it decides nothing: the contract ended meanwhile): approved →
    certified; rejected → exhausted (the reviewer's reason reaches the agent with the review,
    never the log); a revision request or an expiry → exhausted when the repair budget is
    spent, otherwise None: the contract is active again."""
    if not contract_open:
        return None
    if decision == "approved" and accepted_findings:
        return "certified", (f"Every check passed but the tamper scan, and a person approved the "
                             f"delivered change accepting its {accepted_findings} "
                             f"finding{'s' if accepted_findings != 1 else ''} (decision "
                             f"{decision_receipt}).")
    if decision == "approved":
        return "certified", (f"Every check passed and a person approved the delivered change "
                             f"(decision {decision_receipt}).")
    if decision == "rejected":
        return "exhausted", (f"A person rejected the delivered change at review (decision "
                             f"{decision_receipt}); the reviewer's reason is given with the "
                             f"review.")
    if attempts_made >= max_attempts:
        return "exhausted", (f"The delivery review was {decision} (decision {decision_receipt}) "
                             f"and the repair budget of {max_attempts} attempts is spent.")
    return None


def written_by_decision(terminal: Mapping[str, Any], *, contract_id: object,
                        attempt_receipt: object, decision_receipt: str) -> bool:
    """Issue 40: whether `terminal` is the one a person's decision (`decision_receipt`) on a
    delivery of `contract_id` wrote (`decide_delivery`). Judged by what only such a terminal
    holds — the delivered attempt's receipt (that attempt passed, so it wrote no terminal of
    its own; an abstain cites none) and the decision's receipt in the words `decide_delivery`
    gives — never by a receipt anywhere in a reason an agent can write (an abstain's)."""
    return (bool(decision_receipt) and terminal.get("contractId") == contract_id
            and terminal.get("status") in ("certified", "exhausted")
            and attempt_receipt is not None
            and terminal.get("attemptReceipt") == attempt_receipt
            and f"(decision {decision_receipt})" in str(terminal.get("reason", "")))


def reviewed_already(reviewed: Sequence[tuple[Mapping[str, Any] | None,
                                               Mapping[str, Any] | None]],
                     tree: Mapping[str, str] | None,
                     environments: Mapping[str, str | None]) -> bool:
    """Issue 40: the workspace is a tree a person reviewed and asked to change — one of
    `reviewed` (each delivery's tree and the environments its attempt hashed, None when kept
    from before they were) is exactly `tree` in the same `environments` — so an attempt on it
    could only deliver again what they turned down."""
    return tree is not None and any(
        judged == tree and (kept is None or kept == environments)
        for judged, kept in reviewed)


def turn_stop_without_attempt(*, imported: bool, contract_open: bool,
                              review_pending: bool) -> dict[str, Any] | None:
    """§7, the agent wants to stop: allowed without an attempt when the session is imported
    history or no contract is open (saying so when a proposal still waits for review); None
    when an attempt must decide."""
    if imported:
        return {"action": "allow", "message": messages.IMPORTED}
    if not contract_open:
        return {"action": "allow",
                "message": messages.REVIEW_PENDING_ALLOW_MESSAGE if review_pending else ""}
    return None


def turn_stop_after_attempt(*, message: str, attempt: Mapping[str, Any] | None,
                            terminal: Mapping[str, Any] | None,
                            replayed: bool) -> dict[str, Any]:
    """§7: after the turn-stop's attempt the agent is steered with its message (and the terminal
    when the attempt ended the contract); a terminal written by another call in between allows."""
    if replayed:
        return {"action": "allow", "message": ""}
    answer: dict[str, Any] = {"action": "steer", "message": message, "attempt": attempt}
    if terminal is not None:
        answer["terminal"] = terminal
    return answer


def attempt_payload(
    *, contract_id: str, attempt: int, trigger: str, results: Sequence[Mapping[str, Any]],
    tree: Mapping[str, str] | None, made_by: TokenRef | None = None,
) -> AttemptDocument:
    """`reliability/attempt` data with its receipt. `tree` is the workspace tree its checks
    judged (rules §10.2), None when it could not be hashed (then every check failed);
    `made_by` the agent token whose call made it (rules §17.10: its owner may not approve the
    delivery)."""
    if trigger not in TRIGGERS:
        raise ValueError(f"attempt trigger {trigger!r} is not one of {TRIGGERS}")
    payload: dict[str, Any] = {
        "contractId": contract_id,
        "attempt": attempt,
        "trigger": trigger,
        "passed": bool(results) and not messages.failed(results),
        "results": [dict(result) for result in results],
        "tree": dict(tree) if tree is not None else None,
    }
    if made_by is not None:
        payload["madeBy"] = dict(made_by)
    payload["receipt"] = receipt("attempt", payload)
    return cast(AttemptDocument, payload)


def terminal_payload(
    *, contract_id: str, status: str, reason: str, attempt_receipt: str | None = None
) -> TerminalDocument:
    """`reliability/terminal` data with its receipt (abstained terminals have no attempt)."""
    if status not in ("certified", "exhausted", "abstained"):
        raise ValueError(f"terminal status {status!r} is unknown")
    payload: dict[str, Any] = {"contractId": contract_id, "status": status, "reason": reason}
    if attempt_receipt is not None:
        payload["attemptReceipt"] = attempt_receipt
    payload["receipt"] = receipt("terminal", payload)
    return cast(TerminalDocument, payload)


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

"""rules §3: the governor events of a session log folded into its lifecycle state.

`fold(events)` folds a whole log; `apply(state, event)` advances a state by one event, so the
database projection can move incrementally and `fold(log) == reduce(apply, log, initial_state())`.
Events are stored events `{"seq", "type", "origin", "data", "imported"?}`; non-governor events
leave the state unchanged.

The state is plain JSON. Each remembered event is a record `{"seq", "imported", "data"}`::

    {"contract": record | None,              # the current contract (any version 1–5)
     "attempts": [record],                   # attempts of the current contract, in order
     "terminal": record | None,              # the current contract's terminal
     "open": bool,                           # a current contract without a terminal
     "latestDraft": record | None,
     "latestIntentReview": record | None,
     "latestContractReview": record | None,
     "latestVerifications": {profile: record},
     "reference": record | None}             # the session's reference tree (rules §17.1)

A log that breaks the lifecycle (a second open contract, a second terminal, an attempt after the
terminal or out of sequence, an unreadable contract) raises `LifecycleError`: such a log cannot
have come from a conforming server, so import refuses it and a live append must not happen.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NotRequired, TypedDict, cast

from governor.domain.documents import AttemptDocument, ContractDocument, TerminalDocument

CONTRACT = "reliability/contract"
ATTEMPT = "reliability/attempt"
TERMINAL = "reliability/terminal"
CODE_VERIFICATION = "reliability/code-verification"
CONTRACT_DRAFT = "reliability/contract-draft"
INTENT_REVIEW = "reliability/intent-review"
CONTRACT_REVIEW = "reliability/contract-review"
DELIVERY_REVIEW = "reliability/delivery-review"
REFERENCE = "reliability/reference"  # rules §17.1: the tree the agent did not choose
# Outcome contracts (governor/domain/outcomes.py): not folded into the delivery lifecycle.
OUTCOME_CONTRACT = "reliability/outcome-contract"
OUTCOME_OBSERVATION = "reliability/outcome-observation"
OUTCOME_TERMINAL = "reliability/outcome-terminal"
GOVERNOR_EVENT_TYPES = frozenset(
    {CONTRACT, ATTEMPT, TERMINAL, CODE_VERIFICATION, CONTRACT_DRAFT, INTENT_REVIEW, CONTRACT_REVIEW,
     DELIVERY_REVIEW, REFERENCE}
)
READABLE_CONTRACT_VERSIONS = frozenset({1, 2, 3, 4, 5})
TERMINAL_STATUSES = ("certified", "exhausted", "abstained")
DEFAULT_MAX_ATTEMPTS = 3  # for old contract versions that did not record their budget

STATE_NAMES = ("idle", "review-pending", "active", "delivery-pending", "certified", "exhausted",
               "abstained")

_LATEST_OF_KIND = {
    CONTRACT_DRAFT: "latestDraft",
    INTENT_REVIEW: "latestIntentReview",
    CONTRACT_REVIEW: "latestContractReview",
    DELIVERY_REVIEW: "latestDeliveryReview",
}


class LifecycleError(ValueError):
    """A governor event that the lifecycle cannot accept at this point of the log."""

    def __init__(self, seq: object, message: str) -> None:
        super().__init__(f"seq {seq}: {message}")
        self.seq = seq
        self.message = message


class EventRecord(TypedDict):
    seq: int
    imported: bool
    data: dict[str, Any]


class ContractRecord(TypedDict):
    """The current contract's event: imported logs may hold older versions (1–5), whose
    missing fields `read_contract` fills in."""

    seq: int
    imported: bool
    data: ContractDocument


class AttemptRecord(TypedDict):
    seq: int
    imported: bool
    data: AttemptDocument


class TerminalRecord(TypedDict):
    seq: int
    imported: bool
    data: TerminalDocument


class LifecycleState(TypedDict):
    contract: ContractRecord | None
    attempts: list[AttemptRecord]
    terminal: TerminalRecord | None
    open: bool
    latestDraft: EventRecord | None
    latestIntentReview: EventRecord | None
    latestContractReview: EventRecord | None
    latestDeliveryReview: NotRequired[EventRecord | None]
    latestVerifications: dict[str, EventRecord]
    reference: NotRequired[EventRecord | None]


def initial_state() -> LifecycleState:
    return {
        "contract": None,
        "attempts": [],
        "terminal": None,
        "open": False,
        "latestDraft": None,
        "latestIntentReview": None,
        "latestContractReview": None,
        "latestDeliveryReview": None,
        "latestVerifications": {},
        "reference": None,
    }


class ContractSummary(TypedDict):
    """The fields every contract version 1–5 has (`read_contract`)."""

    contractId: str
    version: int
    startedAtSeq: int
    maxAttempts: int
    checks: list[object]
    claims: list[object]
    objective: str
    reviewed: bool


def read_contract(data: object, seq: object = None) -> ContractSummary:
    """The fields every contract version 1–5 has, normalised:
    {contractId, version, startedAtSeq, maxAttempts, checks, claims, objective, reviewed}."""
    if not isinstance(data, dict):
        raise LifecycleError(seq, "contract data is not an object")
    contract_id, version = data.get("contractId"), data.get("version")
    if not isinstance(contract_id, str) or not contract_id:
        raise LifecycleError(seq, "contract has no contractId")
    if type(version) is not int or version not in READABLE_CONTRACT_VERSIONS:
        raise LifecycleError(seq, f"contract version {version!r} is not one of 1–5")
    started, checks = data.get("startedAtSeq"), data.get("checks")
    if type(started) is not int:
        raise LifecycleError(seq, "contract has no integer startedAtSeq")
    if not isinstance(checks, list):
        raise LifecycleError(seq, "contract has no list of checks")
    max_attempts = data.get("maxAttempts", DEFAULT_MAX_ATTEMPTS)
    if type(max_attempts) is not int or max_attempts < 1:
        raise LifecycleError(
            seq, f"contract maxAttempts {max_attempts!r} is not a positive integer"
        )
    review = data.get("review")
    return {
        "contractId": contract_id,
        "version": version,
        "startedAtSeq": started,
        "maxAttempts": max_attempts,
        "checks": checks,
        "claims": data.get("claims", []),
        "objective": data.get("objective", ""),
        "reviewed": isinstance(review, dict) and review.get("reviewed") is True,
    }


def _record(event: Mapping[str, Any]) -> EventRecord:
    data = event.get("data")
    return {
        "seq": int(event["seq"]),
        "imported": event.get("imported") is True,
        "data": data if isinstance(data, dict) else {},
    }


def apply(state: LifecycleState, event: Mapping[str, Any]) -> LifecycleState:
    """The state after `event`. The given state is not modified."""
    kind = event.get("type")
    if kind not in GOVERNOR_EVENT_TYPES:
        return state
    seq = event.get("seq")
    record = _record(event)
    data = record["data"]
    new: LifecycleState = {**state}
    current = state["contract"]
    current_id = current["data"]["contractId"] if current else None

    if kind == CONTRACT:
        contract = read_contract(event.get("data"), seq)
        if state["open"]:
            raise LifecycleError(
                seq,
                f"contract {contract['contractId']!r} opened while contract "
                f"{current_id!r} has no terminal",
            )
        if contract["contractId"] == current_id:
            raise LifecycleError(seq, f"contract id {current_id!r} is used twice")
        new["contract"] = cast(ContractRecord, record)
        new["attempts"], new["terminal"], new["open"] = [], None, True
    elif kind == ATTEMPT:
        if data.get("contractId") != current_id or current_id is None:
            return state
        if state["terminal"] is not None:
            raise LifecycleError(seq, f"attempt after contract {current_id!r} ended")
        expected = len(state["attempts"]) + 1
        if type(data.get("attempt")) is not int or data.get("attempt") != expected:
            raise LifecycleError(
                seq, f"attempt number {data.get('attempt')!r}, expected {expected}"
            )
        new["attempts"] = [*state["attempts"], cast(AttemptRecord, record)]
    elif kind == TERMINAL:
        if data.get("contractId") != current_id or current_id is None:
            return state
        if state["terminal"] is not None:
            raise LifecycleError(seq, f"second terminal for contract {current_id!r}")
        if data.get("status") not in TERMINAL_STATUSES:
            raise LifecycleError(seq, f"terminal status {data.get('status')!r} is unknown")
        new["terminal"], new["open"] = cast(TerminalRecord, record), False
    elif kind == CODE_VERIFICATION:
        profile = data.get("profile")
        if not isinstance(profile, str):
            raise LifecycleError(seq, "code verification names no profile")
        new["latestVerifications"] = {**state["latestVerifications"], profile: record}
    elif kind == REFERENCE:
        if state.get("reference") is not None:
            raise LifecycleError(seq, "a second reference: a session has one, taken once")
        if state["contract"] is not None:
            raise LifecycleError(seq, "the reference comes after a contract began")
        new["reference"] = record
    else:
        new[_LATEST_OF_KIND[str(kind)]] = record  # type: ignore[literal-required]
    return new


def reference_of(state: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The session's `reliability/reference` data (rules §17.1), None before it is taken (and
    in a session older than it)."""
    record = (state or {}).get("reference")
    return record["data"] if record else None


def fold(events: Iterable[Mapping[str, Any]]) -> LifecycleState:
    """The lifecycle state of a log, folding its events in order."""
    state = initial_state()
    for event in events:
        state = apply(state, event)
    return state


def state_name(state: LifecycleState, *, review_pending: bool = False,
               delivery_pending: bool = False) -> str:
    """One of STATE_NAMES. A pending review is not an event (proposals live in the review
    table until decided), so the caller says whether one is pending, and whether it is the
    delivery review of the open contract."""
    if state["open"]:
        return "delivery-pending" if delivery_pending else "active"
    if review_pending:
        return "review-pending"
    terminal = state["terminal"]
    if terminal is not None:
        return str(terminal["data"]["status"])
    return "idle"

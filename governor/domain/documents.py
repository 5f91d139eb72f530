"""The shapes of the governor's event documents (the `data` of its events), as the functions that
build them return them. Each is JSON; `receipt` covers the document without itself. The API's
output schemas reuse them (pydantic reads `typing_extensions.TypedDict` on Python 3.11)."""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict


class TreeRef(TypedDict):
    """A workspace tree (rules §10.2): its id and the digest of the exclusions it used."""

    id: str
    exclusions: str


class ContractReview(TypedDict):
    mode: Literal["off", "required"]
    reviewed: bool
    intentProposalReceipt: NotRequired[str | None]
    intentReviewReceipt: NotRequired[str | None]
    contractProposalReceipt: NotRequired[str | None]
    contractReviewReceipt: NotRequired[str | None]


class ContractDocument(TypedDict):
    """`reliability/contract` (§4, §6): version 3 unreviewed, version 5 two-stage approved."""

    contractId: str
    version: int
    kind: str
    objective: str
    claims: list[dict[str, Any]]
    checks: list[dict[str, Any]]
    maxAttempts: int
    startedAtSeq: int
    review: ContractReview
    intent: NotRequired[dict[str, Any]]
    coverageReceipt: NotRequired[str]
    draftReceipt: NotRequired[str]
    authorship: NotRequired[dict[str, Any]]
    startTree: NotRequired[TreeRef | None]
    baselines: NotRequired[dict[str, str]]
    outcomeProfile: NotRequired[dict[str, Any]]  # the outcome profile bound at begin
    receipt: str


class AttemptDocument(TypedDict):
    """`reliability/attempt` (§7): every check's result, judged on `tree`."""

    contractId: str
    attempt: int
    trigger: str
    passed: bool
    results: list[dict[str, Any]]
    tree: TreeRef | None
    receipt: str


class TerminalDocument(TypedDict):
    """`reliability/terminal` (§7): how the contract ended (abstained ones have no attempt)."""

    contractId: str
    status: str
    reason: str
    attemptReceipt: NotRequired[str]
    receipt: str


class ReviewDecisionDocument(TypedDict):
    """`reliability/intent-review` and `reliability/contract-review` (§6): who decided what about
    which receipt; never the feedback itself."""

    proposalReceipt: str
    decision: str
    decidedBy: dict[str, Any]
    feedbackBytes: int
    feedbackReceipt: NotRequired[str]
    intentProposalReceipt: NotRequired[str]
    carriedFrom: NotRequired[list[str]]
    signatures: NotRequired[list[dict[str, Any]]]
    commentsCount: NotRequired[int]
    commentsReceipt: NotRequired[str]
    receipt: str

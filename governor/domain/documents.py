"""The shapes of the governor's event documents (the `data` of its events), as the functions that
build them return them. Each is JSON; `receipt` covers the document without itself. The API's
output schemas reuse them (pydantic reads `typing_extensions.TypedDict` on Python 3.11)."""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from governor.domain.canonical import JSONValue


class TreeRef(TypedDict):
    """A workspace tree (rules §10.2): its id and the digest of the exclusions it used."""

    id: str
    exclusions: str


class TokenRef(TypedDict):
    """An agent token as the log names it (rules §17.10): its id, and its name at the time."""

    id: int
    name: str


class Claim(TypedDict):
    """A claim (rules §5) in stored form."""

    id: str
    statement: str
    importance: str
    verification: str
    checkIds: list[str]
    minimumIndependentSources: int


class Check(TypedDict):
    """A check (rules §4) in stored form: its id, its kind and the kind's fields
    (`CHECK_FIELDS` in governor/domain/contracts.py; `allowed`, `sections` and `exempt` only on
    the injected protected paths check, §14.4 and §17.3)."""

    id: str
    kind: str
    path: NotRequired[str]
    text: NotRequired[str]
    pointer: NotRequired[str]
    value: NotRequired[JSONValue]
    tool: NotRequired[str]
    argumentsContain: NotRequired[str]
    minCount: NotRequired[int]
    profile: NotRequired[str]
    paths: NotRequired[list[str]]
    allowed: NotRequired[list[str]]
    sections: NotRequired[list[str]]
    exempt: NotRequired[list[dict[str, str]]]


class Intent(TypedDict):
    """What a reviewer approves first (§6), each list trimmed and distinct."""

    constraints: list[str]
    assumptions: list[str]
    nonGoals: list[str]
    ambiguities: list[str]


class Plan(TypedDict):
    """Objective, claims and checks: what §9 compares canonically with a draft."""

    objective: str
    claims: list[Claim]
    checks: list[Check]


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
    begunBy: NotRequired[TokenRef]  # the agent token whose begin this contract is (§17.10)
    environmentChanges: NotRequired[list[str]]  # environment paths a person opened (§17.8)
    receipt: str


class AttemptDocument(TypedDict):
    """`reliability/attempt` (§7): every check's result, judged on `tree`."""

    contractId: str
    attempt: int
    trigger: str
    passed: bool
    results: list[dict[str, Any]]
    tree: TreeRef | None
    madeBy: NotRequired[TokenRef]  # the agent token whose call made it (§17.10)
    receipt: str


class TerminalDocument(TypedDict):
    """`reliability/terminal` (§7): how the contract ended (abstained ones have no attempt)."""

    contractId: str
    status: str
    reason: str
    attemptReceipt: NotRequired[str]
    receipt: str


class DecidedBy(TypedDict):
    """Who decided a review: `system`, `agent`, a `reviewer` (`userId`) or the `reviewers`
    whose approvals decided it (`userIds`)."""

    kind: str
    userId: NotRequired[int]
    userIds: NotRequired[list[int]]


class EventSignature(TypedDict):
    """A reviewer's passkey signature as a decision event lists it (the assertion by digest)."""

    userId: int
    credentialId: str
    nonce: str
    assertion: str


class SentComment(TypedDict):
    """A reviewer's line comment as the agent receives it and a decision's receipt binds it."""

    path: str
    side: str
    line: int
    body: str
    userId: int


class ReviewDecisionDocument(TypedDict):
    """`reliability/intent-review` and `reliability/contract-review` (§6): who decided what about
    which receipt; never the feedback itself."""

    proposalReceipt: str
    decision: str
    decidedBy: DecidedBy
    feedbackBytes: int
    feedbackReceipt: NotRequired[str]
    intentProposalReceipt: NotRequired[str]
    carriedFrom: NotRequired[list[str]]
    signatures: NotRequired[list[EventSignature]]
    commentsCount: NotRequired[int]
    commentsReceipt: NotRequired[str]
    acceptedFindings: NotRequired[list[str]]
    receipt: str

"""Wire shapes of the agent API (docs/api.md). Request bodies are snake_case; stored contracts,
attempts and terminals come back camelCase, as the server keeps them."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

Kind = Literal["general", "code"]


class WorkspaceBinding(TypedDict):
    kind: Literal["path", "snapshot"]
    path: NotRequired[str]


class Claim(TypedDict):
    id: str
    statement: str
    importance: Literal["critical", "important", "minor"]
    verification: Literal["deterministic", "human-required", "unsupported"]
    check_ids: list[str]
    minimum_independent_sources: NotRequired[int]


class Check(TypedDict):
    """One deterministic check; which of the optional fields apply depends on `kind`."""

    id: str
    kind: str
    path: NotRequired[str]
    text: NotRequired[str]
    pointer: NotRequired[str]
    value: NotRequired[Any]
    tool: NotRequired[str]
    arguments_contain: NotRequired[str]
    min_count: NotRequired[int]
    profile: NotRequired[str]


class Intent(TypedDict):
    constraints: list[str]
    assumptions: list[str]
    non_goals: list[str]
    ambiguities: list[str]


class ContractBody(TypedDict):
    objective: str
    claims: list[Claim]
    checks: list[Check]
    max_attempts: NotRequired[int]
    intent: NotRequired[Intent]
    draft_receipt: NotRequired[str]


class DraftResult(TypedDict):
    """A contract drafted by the project's auxiliary model (SEMANTICS §9). `begin` is the body
    that begins a contract matching the draft exactly (it carries `draft_receipt`)."""

    draft: dict[str, Any]
    coverage: dict[str, Any]
    receipt: str
    begin: dict[str, Any]


class SessionInfo(TypedDict):
    id: str
    project: str
    external_id: str | None
    workspace: dict[str, Any]
    imported: bool
    next_seq: int
    head: str
    created_at: str


class Review(TypedDict):
    id: str
    stage: Literal["intent", "evidence"]
    status: str  # pending | approved | revision-requested | rejected | expired | cancelled
    proposal_receipt: str
    review_url: str
    expires_at: str
    decision: str | None
    decision_receipt: str | None
    feedback: NotRequired[str | None]


class Terminal(TypedDict):
    status: str  # certified | exhausted | abstained
    reason: str
    receipt: str
    contract_id: str
    seq: int
    imported: bool


class SessionStatus(SessionInfo):
    state: str  # idle | review-pending | active | certified | exhausted | abstained
    contract: dict[str, Any] | None
    attempts: list[dict[str, Any]]
    terminal: Terminal | None
    review: Review | None
    latest_draft: dict[str, Any] | None


class AppendResult(TypedDict):
    first_seq: int
    last_seq: int
    head: str


class LoggedEvent(TypedDict):
    seq: int
    type: str
    time: int
    origin: str  # agent | governor
    data: Any
    prev: str
    hash: str
    meta: dict[str, Any] | None


class EventPage(TypedDict):
    events: list[LoggedEvent]
    next_after: int | None


class AssessResult(TypedDict):
    status: Literal["ready", "not-ready"]
    assessment: dict[str, Any]


class BeginResult(TypedDict):
    status: Literal["active", "review-pending", "review-required"]
    assessment: dict[str, Any]
    contract: NotRequired[dict[str, Any]]
    review: NotRequired[Review]
    review_url: NotRequired[str]


class Outcome(TypedDict):
    """The answer of verify and abstain."""

    decision: str  # repair | certified | exhausted | abstained
    message: str
    attempt: dict[str, Any] | None
    terminal: dict[str, Any] | None


class TurnStop(TypedDict):
    action: Literal["allow", "steer"]
    message: str
    attempt: NotRequired[dict[str, Any]]
    terminal: NotRequired[dict[str, Any]]


class ReviewAnswer(TypedDict):
    review: Review | None


class Profile(TypedDict):
    id: str
    description: str
    required: bool
    timeout_ms: int
    sandbox_mode: Literal["read-only", "workspace-write"]
    receipt: str


class VerificationRun(TypedDict):
    id: str
    state: Literal["queued", "running", "finished"]
    profile: NotRequired[str]
    result: NotRequired[dict[str, Any] | None]


class PublicKey(TypedDict):
    keyid: str
    algorithm: str
    publicKey: str  # noqa: N815 - wire name
    active: bool

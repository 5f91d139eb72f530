"""Wire shapes of the agent API (docs/api.md). Request bodies are snake_case; stored contracts,
attempts and terminals come back camelCase, as the server keeps them.

The server's `openapi.json` is the source: tests/clients/test_client_types.py holds every type
here to it (keys, which are required, simple types), route by route."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

Kind = Literal["general", "code"]


class WorkspaceBinding(TypedDict):
    kind: Literal["path", "snapshot"]
    path: NotRequired[str | None]


class SessionCreate(TypedDict):
    """POST /sessions."""

    workspace: WorkspaceBinding
    external_id: NotRequired[str | None]
    header: NotRequired[dict[str, Any] | None]


class EventBatch(TypedDict):
    """POST /sessions/{id}/events: Harness envelopes, stored as the exact text sent."""

    events: list[dict[str, Any]]
    expected_seq: NotRequired[int]


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
    paths: NotRequired[list[str]]  # changes_within / unchanged: path patterns


class Intent(TypedDict):
    constraints: NotRequired[list[str]]
    assumptions: NotRequired[list[str]]
    non_goals: NotRequired[list[str]]
    ambiguities: NotRequired[list[str]]


class ContractBody(TypedDict):
    objective: str
    claims: list[Claim]
    checks: list[Check]
    max_attempts: NotRequired[int]
    intent: NotRequired[Intent | None]
    draft_receipt: NotRequired[str]
    protected_changes: NotRequired[list[str]]  # protected paths only a person's review opens
    environment_changes: NotRequired[list[str]]  # environment paths only a person's review opens
    outcome_profile: NotRequired[str]  # watched after delivery is certified


class BeginBody(ContractBody):
    """A contract to begin; a snapshot session names its latest snapshot."""

    tree: NotRequired[str | None]


class TreeBody(TypedDict):
    """verify and turn-stop of a snapshot session (a path session sends no body)."""

    tree: NotRequired[str | None]


class AbstainBody(TypedDict):
    reason: str


class DraftRequest(TypedDict):
    contract_kind: Kind
    objective: str
    context: NotRequired[str]


class DraftResult(TypedDict):
    """A contract drafted by the project's auxiliary model (rules §9). `begin` is the body
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


class LineComment(TypedDict):
    """A reviewer's comment on one line of the delivered change (a delivery revision)."""

    path: str
    side: Literal["old", "new"]
    line: int
    body: str
    userId: int  # noqa: N815 - wire name


class Review(TypedDict):
    id: str
    stage: Literal["intent", "evidence", "delivery"]
    status: str  # pending | approved | revision-requested | rejected | expired | cancelled
    proposal_receipt: str
    review_url: str
    expires_at: str
    decision: str | None
    decision_receipt: str | None
    feedback: str | None
    comments: NotRequired[list[LineComment]]


class TreeRef(TypedDict):
    id: str  # gittree:sha256:<hex>
    exclusions: str


class Terminal(TypedDict):
    """Null fields only in imported history that lacks them."""

    status: str | None  # certified | exhausted | abstained
    reason: str | None
    receipt: str | None
    contract_id: str | None
    seq: int
    imported: bool
    tree: TreeRef | None  # the tree the deciding attempt judged


class SessionStatus(SessionInfo):
    # idle | review-pending | active | delivery-pending | certified | exhausted | abstained
    state: str
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

    # repair | delivery-pending | revision-requested (no attempt: the tree a person asked to
    # change) | certified | exhausted | abstained
    decision: str
    message: str
    attempt: dict[str, Any] | None
    terminal: dict[str, Any] | None


class TurnStop(TypedDict):
    action: Literal["allow", "steer"]
    message: str
    attempt: NotRequired[dict[str, Any] | None]
    terminal: NotRequired[dict[str, Any]]


class ReviewAnswer(TypedDict):
    review: Review | None
    # while the contract is open: the newest revision request of its delivered change, whose
    # feedback and comments the agent must answer
    revision_request: Review | None
    terminal: dict[str, Any] | None  # the terminal a decision on the delivered change wrote
    message: str | None  # what to do about the revision request or the terminal


class HeldoutSuite(TypedDict):
    """All an agent is shown of a held-out suite: never a file, a case or an expected value."""

    name: str
    version: str  # the suite version's receipt
    files: int
    cases: int


class Profile(TypedDict):
    id: str
    description: str
    required: bool
    timeout_ms: int
    sandbox_mode: Literal["read-only", "workspace-write"]
    protected_paths: list[str]  # a contract naming the profile may not change these
    report: Literal["junit"] | None  # judged by its test report, against the baseline run
    heldout: HeldoutSuite | None  # held-out tests its runs read at /governor-heldout
    oracle: HeldoutSuite | None  # cases its runs answer; the server judges the outputs
    receipt: str


class ProfileList(TypedDict):
    profiles: list[Profile]


class OutcomeProfile(TypedDict):
    """An outcome profile as an agent sees it: never its command or environment."""

    id: str
    description: str
    metrics: list[dict[str, str]]
    target: dict[str, Any]
    guardrails: list[dict[str, Any]]
    minimumSampleSize: int | None
    windows: dict[str, int]
    attribution: Literal["direct", "correlational", "experiment"]
    causalClaimPermitted: bool
    receipt: str
    summary: str


class OutcomeProfileList(TypedDict):
    profiles: list[OutcomeProfile]


class OutcomeStatus(TypedDict):
    """GET /sessions/{id}/outcome: observing until a signed outcome terminal."""

    status: Literal["none", "bound", "dropped", "observing", "achieved", "missed",
                    "inconclusive", "expired"]
    contract: dict[str, Any] | None
    observations: list[dict[str, Any]]
    terminal: NotRequired[dict[str, Any] | None]
    profile: NotRequired[dict[str, Any] | None]
    message: NotRequired[str | None]
    pending: NotRequired[dict[str, Any] | None]  # {requestedAt}: an observation on its way


class RunRequest(TypedDict):
    """POST /sessions/{id}/code-verifications: a profile's name, never a command."""

    profile: str
    tree: NotRequired[str | None]


class RunQueued(TypedDict):
    id: str
    state: Literal["queued", "running", "finished"]


class VerificationRun(RunQueued):
    profile: str
    result: dict[str, Any] | None


class PublicKey(TypedDict):
    keyid: str
    algorithm: str
    publicKey: str  # noqa: N815 - wire name
    active: bool


class KeyList(TypedDict):
    keys: list[PublicKey]


class Certification(TypedDict):
    session: str
    seq: int
    tree: str
    exclusions: list[str]
    exclusionsDigest: str  # noqa: N815 - wire name
    terminalReceipt: str  # noqa: N815 - wire name
    envelope: dict[str, Any]
    entries: list[list[str]] | None  # the certified manifest, for a session's query


class CertificationList(TypedDict):
    certifications: list[Certification]


class ReceiptEvent(TypedDict):
    kind: Literal["event"]
    session: str
    seq: int
    type: str
    data: dict[str, Any]


class ReceiptReviewProposal(TypedDict):
    kind: Literal["review-proposal"]
    session: str
    stage: Literal["intent", "evidence", "delivery"]
    status: str
    proposal: dict[str, Any]


class ReceiptProfile(TypedDict):
    kind: Literal["code-verification-profile"]
    profile: str
    sandbox_mode: Literal["read-only", "workspace-write"]
    timeout_ms: int
    current: bool


Receipt = ReceiptEvent | ReceiptReviewProposal | ReceiptProfile


# --- snapshots (rules §11) --------------------------------------------------------------


class RunnerControlExemption(TypedDict):
    entry: str  # a built-in runner-control entry the project does not protect
    reason: str


class ProjectInfo(TypedDict):
    slug: str
    tree_exclusions: list[str]
    protected_paths: list[str]
    runner_control: list[str]  # built-in entries protected for contracts naming a profile
    runner_control_exempt: list[RunnerControlExemption]
    require_discriminating_evidence: bool
    unattended_evidence: Literal["any", "operator"]
    reference_ref: str  # the git ref whose tree is a path session's reference ("": HEAD)
    tree_max_files: int
    tree_max_bytes: int
    max_blob_bytes: int
    max_batch_bytes: int
    max_batch_blobs: int


class BlobIds(TypedDict):
    """POST /blobs/missing."""

    blobs: list[str]


class MissingBlobs(TypedDict):
    missing: list[str]


class BlobStored(TypedDict):
    blob: str


class BlobBatchStored(TypedDict):
    """POST /blobs: which blobs of the batch were stored, which were there already."""

    stored: list[str]
    present: list[str]


class SnapshotEntry(TypedDict):
    path: str
    mode: Literal["100644", "100755", "120000"]
    blob: str | None  # null: over a base, the path is deleted


class SnapshotBody(TypedDict):
    entries: list[SnapshotEntry]
    base: NotRequired[str | None]  # an earlier snapshot's tree id: `entries` are the changes


class ChangeTree(TypedDict):
    """One side of a gated change (rules §19.2): its commit, and its tree as snapshot entries,
    or (the head) the changes over the base, or (the base) the id of a tree the server keeps."""

    commit: str
    entries: NotRequired[list[SnapshotEntry] | None]
    changes: NotRequired[list[SnapshotEntry] | None]
    tree: NotRequired[str | None]


class ChangeBody(TypedDict):
    base: ChangeTree
    head: ChangeTree
    observe: NotRequired[bool]  # record and answer what the gate would do, never fail


class ChangeInfo(TypedDict):
    """A gated change (POST /changes, GET /changes/{id}): `receipt` and `envelope` once
    certified."""

    id: str
    status: Literal["running", "certified", "not-certified"]
    observe: bool
    url: str
    base: dict[str, str]
    head: dict[str, str]
    policy: dict[str, Any]
    policyReceipt: str  # noqa: N815 - wire name
    changed: int
    runs: list[dict[str, Any]]
    findings: list[dict[str, Any]]
    proofs: list[dict[str, Any]]
    receipt: str | None
    envelope: dict[str, Any] | None


class SnapshotInfo(TypedDict):
    tree: str
    exclusions: str
    files: int
    bytes: int
    number: int

"""The wire contract: every JSON body the agent API reads or writes, declared once.

django-ninja validates request bodies with these schemas and builds `openapi.json` from them;
`tests/clients/test_client_types.py` holds the client package's types to that document.

- **Requests** are `Strict`: strict types (`true` is never `1`, `"1"` never 1) and unknown fields
  refused, on top of the lossless JSON parsing (`StrictParser`). The schema checks the shape —
  which fields, which JSON types; the rules (lengths after trimming, per-kind check fields,
  project caps, cross-references) stay in the domain and the services, which name every failing
  field. Where a part's rules live in the domain (a proposal's claims, checks and intent; a
  snapshot's entries; the ids of a blob lookup), the field is `DescribedBy` a type built from
  the domain's own constants: documented here, checked there, once.
- **Responses** are TypedDicts where a key may be absent and schemas otherwise; the stored
  contract, attempt and terminal documents are the domain's TypedDicts
  (`governor/domain/documents.py`), returned as stored (a session may hold older versions).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, Union

from ninja import Schema
from pydantic import ConfigDict, Field, GetCoreSchemaHandler, create_model, with_config
from pydantic_core import CoreSchema, core_schema
from typing_extensions import TypedDict

from governor.domain import attempts
from governor.domain import contracts as contract_rules
from governor.domain import snapshots as snapshot_rules
from governor.domain.documents import (
    AttemptDocument,
    ContractDocument,
    TerminalDocument,
    TreeRef,
)
from governor.domain.drafting import DRAFT_KINDS
from governor.domain.fields import PROFILE_ID_RE
from governor.services import blobs as blob_rules


class DescribedBy:
    """A field whose value the domain validates: passed through exactly as parsed (and returned
    as given), described in `openapi.json` by `shape` (default: the annotated type)."""

    def __init__(self, shape: Any = None) -> None:
        self.shape = shape

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler
                                     ) -> CoreSchema:
        shape = handler.generate_schema(self.shape if self.shape is not None else source)
        return core_schema.no_info_wrap_validator_function(
            lambda value, _inner: value, shape,
            serialization=core_schema.plain_serializer_function_ser_schema(lambda value: value))


def omittable(documented: dict[str, Any] | None = None, **field: Any) -> Any:
    """An optional field that may be left out: absent stays absent (`sent(payload)`), the
    schema shows no default, and null is refused unless the type allows it. `documented`:
    JSON-schema keywords the domain enforces (the schema only states them)."""

    def schema_extra(schema: dict[str, Any]) -> None:
        schema.pop("default", None)
        schema.update(documented or {})

    return Field(default=None, json_schema_extra=schema_extra, **field)


def sent(payload: Schema) -> dict[str, Any]:
    """The fields the client sent, with their values as parsed (never re-serialised)."""
    return {name: getattr(payload, name) for name in payload.model_fields_set}


# --- requests -----------------------------------------------------------------------------------


class Strict(Schema):
    model_config = ConfigDict(extra="forbid", strict=True)


class WorkspaceIn(Strict):
    kind: Literal["path", "snapshot"]
    path: str | None = Field(default=None, max_length=4096)


class SessionCreateIn(Strict):
    external_id: str | None = Field(default=None, min_length=1, max_length=200)
    workspace: WorkspaceIn
    header: dict[str, Any] | None = None


class EventsIn(Strict):
    """A batch, all-or-nothing. Each event is a Harness envelope `{type, time, data, …}`,
    checked by the Harness rules (governor/domain/harness.py); its exact text is what is stored."""

    events: list[dict[str, Any]] = Field(
        json_schema_extra={"minItems": 1},
        description="1..GOVERNOR_MAX_BATCH (default 1000) events")
    expected_seq: int = omittable(ge=0)


class ClaimIn(Strict):
    """A claim (rules §5); `governor/domain/contracts.py` checks it."""

    id: str = Field(max_length=contract_rules.MAX_ID_CHARS, description="trimmed")
    statement: str = Field(max_length=contract_rules.MAX_STATEMENT_CHARS, description="trimmed")
    importance: str = Field(json_schema_extra={"enum": list(contract_rules.IMPORTANCES)})
    verification: str = Field(json_schema_extra={"enum": list(contract_rules.VERIFICATIONS)})
    check_ids: list[str]
    minimum_independent_sources: int = omittable(
        ge=contract_rules.INDEPENDENT_SOURCES_RANGE[0],
        le=contract_rules.INDEPENDENT_SOURCES_RANGE[1])


# The type and bounds of every field a check kind may carry; `CHECK_FIELDS` says which kind
# carries which. A field missing here fails at import.
_CHECK_FIELD_TYPES: dict[str, tuple[Any, dict[str, Any]]] = {
    "path": (str, {"max_length": contract_rules.MAX_PATH_CHARS}),
    "text": (str, {"max_length": contract_rules.MAX_TEXT_CHARS}),
    "pointer": (str, {"max_length": contract_rules.MAX_POINTER_CHARS}),
    "value": (Any, {"description": "any JSON value"}),
    "tool": (str, {"max_length": contract_rules.MAX_TOOL_CHARS}),
    "arguments_contain": (str, {"max_length": contract_rules.MAX_ARGUMENTS_CONTAIN_CHARS}),
    "min_count": (int, {"ge": contract_rules.MIN_COUNT_RANGE[0],
                        "le": contract_rules.MIN_COUNT_RANGE[1]}),
    "profile": (str, {"max_length": contract_rules.MAX_PROFILE_CHARS,
                      "pattern": PROFILE_ID_RE.pattern}),
    "paths": (list[str], {"min_length": 1, "max_length": contract_rules.MAX_PATTERNS,
                          "description": "path patterns in the exclusions' syntax (git pathspec "
                                         "globs: `tests/**`, `**/conftest.py`), each ≤ "
                                         f"{contract_rules.MAX_PATTERN_CHARS} characters"}),
}


def _check_schema(kind: str) -> type[Strict]:
    required, optional = contract_rules.CHECK_FIELDS[kind]
    fields: dict[str, Any] = {"id": (str, Field(max_length=contract_rules.MAX_ID_CHARS)),
                              "kind": (Literal.__getitem__(kind), ...)}
    for name in sorted(required):
        kind_of, constraints = _CHECK_FIELD_TYPES[name]
        fields[name] = (kind_of, Field(**constraints))
    for name in sorted(optional):
        kind_of, constraints = _CHECK_FIELD_TYPES[name]
        fields[name] = (kind_of, omittable(**constraints))
    title = "".join(part.capitalize() for part in kind.split("_")) + "Check"
    return create_model(title, __base__=Strict, **fields)


# One of the kinds, told apart by `kind`: what the domain accepts, kind by kind.
CHECK_SCHEMAS = tuple(_check_schema(kind) for kind in contract_rules.CHECK_KINDS)
CHECK_IN = Annotated[Union[CHECK_SCHEMAS], Field(discriminator="kind")]  # type: ignore[valid-type]  # noqa: UP007, E501


class IntentIn(Strict):
    """The intent a reviewer approves first (§6): lists of trimmed, distinct strings."""

    constraints: list[str] = omittable(max_length=contract_rules.MAX_INTENT_ITEMS)
    assumptions: list[str] = omittable(max_length=contract_rules.MAX_INTENT_ITEMS)
    non_goals: list[str] = omittable(max_length=contract_rules.MAX_INTENT_ITEMS)
    ambiguities: list[str] = omittable(max_length=contract_rules.MAX_INTENT_ITEMS)


class ProposalIn(Strict):
    """A contract proposal (rules §4–§6), to assess. Its claims, checks, intent and budget
    are checked by `governor/domain/contracts.py`, naming every failing field (`checks/2/path`);
    `max_attempts` is 1..the project's cap."""

    objective: str = Field(description="non-blank; at most "
                                       f"{contract_rules.MAX_OBJECTIVE_BYTES} UTF-8 bytes",
                           json_schema_extra={"maxLength": contract_rules.MAX_OBJECTIVE_BYTES})
    claims: Annotated[list[dict[str, Any]], DescribedBy(list[ClaimIn])] = Field(
        json_schema_extra={"maxItems": contract_rules.MAX_CLAIMS})
    checks: Annotated[list[dict[str, Any]], DescribedBy(list[CHECK_IN])]
    max_attempts: int = omittable(
        {"minimum": 1, "maximum": contract_rules.MAX_ATTEMPTS_CAP},
        description="the repair budget: 1..the project's cap (default "
                    f"{contract_rules.DEFAULT_ATTEMPTS_CAP}, never above "
                    f"{contract_rules.MAX_ATTEMPTS_CAP}); omitted: the cap")
    intent: Annotated[dict[str, Any] | None, DescribedBy(IntentIn | None)] = omittable()
    draft_receipt: str = omittable({"pattern": contract_rules.RECEIPT_RE.pattern},
                                   description="§9: the receipt of the session's latest draft")
    protected_changes: list[str] = omittable(
        {"minItems": 1, "maxItems": contract_rules.MAX_PATTERNS},
        description="the protected paths this task must change (patterns): shown first to the "
                    "reviewer and counted only once a person approved the evidence plan; "
                    "refused when review is off")
    environment_changes: list[str] = omittable(
        {"minItems": 1, "maxItems": contract_rules.MAX_PATTERNS},
        description="rules §17.8: the paths of a workspace environment directory this task "
                    "must change (patterns, e.g. '.venv/lib/**'): shown first to the reviewer; "
                    "a run's environment may then differ from the session's reference there, "
                    "once a person approved the evidence plan; refused when review is off")
    outcome_profile: str = omittable(
        description="an outcome profile id (GET /outcome-profiles): after delivery is "
                    "certified the server watches whether its goal is reached")


class BeginIn(ProposalIn):
    """A proposal to begin; a snapshot session names its latest snapshot (`tree`, §11.3)."""

    tree: str | None = omittable(
        description="gittree:sha256:<64 hex>: the session's latest snapshot")


class TreeIn(Strict):
    """A snapshot session's tree to judge (§11.3); a path session sends no body."""

    tree: str | None = omittable(
        description="gittree:sha256:<64 hex>: the session's latest snapshot")


class AbstainIn(Strict):
    reason: str = Field(description="not blank",
                        json_schema_extra={"minLength": 1,
                                           "maxLength": attempts.MAX_ABSTAIN_REASON_CHARS})


class RunIn(Strict):
    """Only a profile's name: an agent never sends a command. Any other field is ignored, not
    refused (pinned by tests/api/test_code_verification.py: a body with `argv` runs the profile
    and nothing else)."""

    model_config = ConfigDict(extra="ignore")
    profile: str = Field(min_length=1, description="a profile id (GET /code-profiles)")
    tree: str | None = omittable(
        description="gittree:sha256:<64 hex>: a snapshot session's latest snapshot")


class DraftIn(Strict):
    """What the auxiliary model is asked to draft (§9); checked by governor/domain/drafting.py."""

    contract_kind: str = Field(json_schema_extra={"enum": list(DRAFT_KINDS)})
    objective: str = Field(description="non-blank; at most "
                                       f"{contract_rules.MAX_OBJECTIVE_BYTES} UTF-8 bytes")
    context: str = omittable(description="Private background for the model; never stored. The "
                                         "whole user block is capped by the route's "
                                         "max_input_bytes.")


BLOB_ID = Annotated[str, Field(pattern=f"^{snapshot_rules.BLOB_ID.pattern}$",
                              description="a git blob id (SHA-256 object format)")]


class BlobIdsIn(Strict):
    """Ids to look up; each checked by the blob store (`blobs/3` names a malformed one)."""

    blobs: Annotated[list[Any], DescribedBy(list[BLOB_ID])] = Field(
        json_schema_extra={"maxItems": blob_rules.MAX_IDS_PER_QUERY})


class SnapshotEntryIn(Strict):
    """One file of a tree; over a `base`, a null `blob` deletes the path."""

    path: str = Field(json_schema_extra={"maxLength": snapshot_rules.MAX_PATH_BYTES},
                      description="as git names it, relative, '/'-separated (UTF-8 bytes)")
    mode: str = Field(json_schema_extra={"enum": list(snapshot_rules.MODES)})
    blob: BLOB_ID | None


class SnapshotIn(Strict):
    """A tree as its manifest, checked whole by governor/domain/snapshots.py (`entries/1/path`):
    git's name rules, the project's exclusions and caps, every blob present."""

    entries: Annotated[list[dict[str, Any]], DescribedBy(list[SnapshotEntryIn])]
    base: str | None = omittable(
        description="an earlier snapshot's tree id: `entries` are the changes")


class ChangeTreeIn(Strict):
    """One side of a gated change (rules §19.2): its commit and its tree as snapshot entries
    (rules §11.1), or for the head only the `changes` over the base (a null blob deletes)."""

    commit: str = Field(max_length=64)
    entries: Annotated[list[dict[str, Any]], DescribedBy(list[SnapshotEntryIn])] | None = \
        omittable()
    changes: Annotated[list[dict[str, Any]], DescribedBy(list[SnapshotEntryIn])] | None = \
        omittable()
    tree: str | None = omittable(description="the base only: the id of a tree the server keeps "
                                             "for the project, instead of its entries")


class ChangeIn(Strict):
    base: ChangeTreeIn
    head: ChangeTreeIn
    observe: bool = omittable(description="record and answer what the gate would do; a CI "
                                          "job in observe mode never fails")


# --- responses ----------------------------------------------------------------------------------


# A key the answer holds but the schema lacks is a server error, never silently dropped. (No
# field of an answer has a default: each is sent, or NotRequired in a TypedDict.)
OUT = ConfigDict(extra="forbid")


class Out(Schema):
    model_config = OUT


class SessionOut(Out):
    id: str
    project: str
    external_id: str | None
    workspace: dict[str, Any]
    imported: bool
    next_seq: int
    head: str
    created_at: str


class AppendOut(Out):
    first_seq: int
    last_seq: int
    head: str


class EventOut(Out):
    seq: int
    type: str
    time: int
    origin: str
    data: Any
    prev: str
    hash: str
    meta: dict[str, Any] | None


class EventPage(Out):
    events: list[EventOut]
    next_after: int | None


class KeyOut(Out):
    keyid: str
    algorithm: str
    publicKey: str  # noqa: N815 - wire name
    active: bool


class KeysOut(Out):
    keys: list[KeyOut]


class CertificationOut(Out):
    session: str
    seq: int
    tree: str
    exclusions: list[str]
    exclusionsDigest: str  # noqa: N815 - wire name
    terminalReceipt: str  # noqa: N815 - wire name
    envelope: dict[str, Any]
    entries: list[list[str]] | None  # [path, mode, blob id]: for a session's query


class ChangeOut(Out):
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


class CertificationsOut(Out):
    certifications: list[CertificationOut]


@with_config(OUT)
class LineCommentOut(TypedDict):
    """A reviewer's comment on one line of the delivered change: `side` "new" is a line of the
    delivered tree, "old" one of the contract-start tree."""

    path: str
    side: Literal["old", "new"]
    line: int
    body: str
    userId: int  # noqa: N815 - wire name


@with_config(OUT)
class ReviewOut(TypedDict):
    id: str
    stage: Literal["intent", "evidence", "delivery"]
    status: str
    proposal_receipt: str
    review_url: str
    expires_at: str
    decision: str | None
    decision_receipt: str | None
    feedback: str | None
    comments: NotRequired[list[LineCommentOut]]


class ReviewAnswer(Out):
    review: ReviewOut | None
    revision_request: ReviewOut | None = Field(
        description="while the contract is open: the newest revision request of its delivered "
                    "change, whose feedback and comments the agent must answer")
    terminal: Annotated[TerminalDocument | None, DescribedBy()] = Field(
        description="the terminal a person's decision on the delivered change (`review`) "
                    "wrote: certified, or exhausted")
    message: str | None = Field(description="what the agent is to do about the revision "
                                            "request or the terminal")


class StatusContract(ContractDocument):
    imported: bool


class StatusAttempt(AttemptDocument):
    seq: int
    imported: bool


class StatusTerminal(Out):
    """The terminal, with the tree its deciding attempt judged (§10.2; null without one)."""

    status: str | None
    reason: str | None
    receipt: str | None
    contract_id: str | None
    seq: int
    imported: bool
    tree: Annotated[TreeRef | None, DescribedBy()]


class SessionStatus(SessionOut):
    state: str
    contract: Annotated[StatusContract | None, DescribedBy()]
    attempts: Annotated[list[StatusAttempt], DescribedBy()]
    terminal: StatusTerminal | None
    review: ReviewOut | None
    latest_draft: dict[str, Any] | None


class AssessOut(Out):
    status: Literal["ready", "not-ready"]
    assessment: dict[str, Any]


@with_config(OUT)
class BeginOut(TypedDict):
    """200 review-required (nothing written), 201 active (`contract`), 202 review-pending
    (`review`, `review_url`)."""

    status: Literal["active", "review-pending", "review-required"]
    assessment: dict[str, Any]
    contract: NotRequired[Annotated[ContractDocument, DescribedBy()]]
    review: NotRequired[ReviewOut]
    review_url: NotRequired[str]


class Outcome(Out):
    decision: str
    message: str
    attempt: Annotated[AttemptDocument | None, DescribedBy()]
    terminal: Annotated[TerminalDocument | None, DescribedBy()]


@with_config(OUT)
class TurnStopOut(TypedDict):
    action: Literal["allow", "steer"]
    message: str
    attempt: NotRequired[Annotated[AttemptDocument | None, DescribedBy()]]
    terminal: NotRequired[Annotated[TerminalDocument, DescribedBy()]]


class HeldoutSuiteOut(Out):
    """All an agent is shown of a held-out suite (rules §18.1)."""

    name: str
    version: str = Field(description="the suite version's heldout-suite receipt")
    files: int
    cases: int


class ProfileOut(Out):
    id: str
    description: str
    required: bool
    timeout_ms: int
    sandbox_mode: Literal["read-only", "workspace-write"]
    protected_paths: list[str] = Field(description="patterns a contract naming it may not "
                                                   "change (rules §14.3)")
    report: Literal["junit"] | None = Field(description="junit: its runs are judged by their "
                                                        "test report and against the baseline")
    heldout: HeldoutSuiteOut | None = Field(
        description="the held-out suite its runs read at /governor-heldout "
                                  "(rules §18.2): never its files")
    oracle: HeldoutSuiteOut | None = Field(
        description="the held-out suite whose cases its runs answer (rules "
                                  "§18.3): never a case or an expected value")
    receipt: str


class ProfilesOut(Out):
    profiles: list[ProfileOut]


class OutcomeProfileOut(Out):
    """The agent's view of an outcome profile: never its command, environment or network."""

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


class OutcomeProfilesOut(Out):
    profiles: list[OutcomeProfileOut]


class OutcomeStatusOut(Out):
    status: Literal["none", "bound", "dropped", "observing", "achieved", "missed",
                    "inconclusive", "expired"]
    contract: dict[str, Any] | None = Field(
        description="the reliability/outcome-contract record (profile, baseline, window)")
    observations: list[dict[str, Any]]
    terminal: dict[str, Any] | None = None
    profile: dict[str, Any] | None = None
    message: str | None = None
    pending: dict[str, Any] | None = Field(
        None, description="{requestedAt}: an observation asked for that a worker has not "
                          "recorded yet")


class RunQueued(Out):
    id: str
    state: Literal["queued", "running", "finished"]


class RunOut(RunQueued):
    profile: str
    result: dict[str, Any] | None


class DraftOut(Out):
    """`begin` is the body that begins a contract matching the draft exactly."""

    draft: dict[str, Any]
    coverage: dict[str, Any]
    receipt: str
    begin: dict[str, Any]


class ReceiptEvent(Out):
    """A governor event's document (`data`) carries the receipt."""

    kind: Literal["event"]
    session: str
    seq: int
    type: str
    data: dict[str, Any]


class ReceiptReviewProposal(Out):
    kind: Literal["review-proposal"]
    session: str
    stage: Literal["intent", "evidence", "delivery"]
    status: str
    proposal: dict[str, Any]


class ReceiptProfile(Out):
    """A verifier profile version; never its command or environment."""

    kind: Literal["code-verification-profile"]
    profile: str
    sandbox_mode: Literal["read-only", "workspace-write"]
    timeout_ms: int
    current: bool


ReceiptOut = Annotated[ReceiptEvent | ReceiptReviewProposal | ReceiptProfile,
                       Field(discriminator="kind")]


class RunnerControlExemptionOut(Out):
    entry: str
    reason: str


class ProjectOut(Out):
    """What an agent needs to compute the tree the server computes (§10.1), and the caps."""

    slug: str
    tree_exclusions: list[str]
    protected_paths: list[str]
    runner_control: list[str] = Field(
        description="the built-in runner-control entries a contract naming a profile protects "
                    "(rules §17.3): path patterns, and file sections such as "
                    "'**/pyproject.toml [tool.pytest.ini_options]' judged by content")
    runner_control_exempt: list[RunnerControlExemptionOut] = Field(
        description="the built-in entries this project does not protect, each with its reason")
    require_discriminating_evidence: bool
    unattended_evidence: Literal["any", "operator"]
    reference_ref: str = Field(
        description="the git ref whose tree is a path session's reference (rules §17.1); "
                    "empty: the commit HEAD names when the session is created")
    tree_max_files: int
    tree_max_bytes: int
    max_blob_bytes: int
    max_batch_bytes: int
    max_batch_blobs: int


class MissingOut(Out):
    missing: list[str]


class BlobOut(Out):
    blob: str


class BatchOut(Out):
    stored: list[str]
    present: list[str]


class SnapshotOut(Out):
    tree: str
    exclusions: str
    files: int
    bytes: int
    number: int

"""docs/architecture.md: projects, people, tokens, sessions and their append-only logs."""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from governor.domain import contracts as contract_domain
from governor.domain.documents import TokenRef
from governor.domain.drafting import route_problems
from governor.domain.fields import FieldsInvalid
from governor.domain.runner_control import validate_exemptions
from governor.domain.tree import validate_exclusions


class JSONTextField(models.TextField[Any, Any]):
    """JSON kept as text. PostgreSQL's jsonb cannot hold U+0000, which real agent logs contain;
    JSON text escapes it, so every database stores every lossless JSON value."""

    _pyi_private_set_type: Any
    _pyi_private_get_type: Any

    def from_db_value(self, value: str | None, expression: Any, connection: Any) -> Any:
        return None if value is None else json.loads(value)

    def to_python(self, value: Any) -> Any:
        return value

    def get_prep_value(self, value: Any) -> str | None:
        if value is None:
            return None
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    def value_to_string(self, obj: models.Model) -> str:
        return self.get_prep_value(self.value_from_object(obj)) or ""


class ReviewMode(models.TextChoices):
    REQUIRED = "required"
    OFF = "off"


class AuthoringMode(models.TextChoices):
    CURRENT_AGENT = "current-agent"
    AUXILIARY_MODEL = "auxiliary-model"
    MANUAL = "manual"


class UnattendedEvidence(models.TextChoices):
    """rules §17.7: what a contract begun with review off may rest on."""

    ANY = "any"
    OPERATOR = "operator"


class Project(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    max_attempts = models.PositiveSmallIntegerField(
        default=contract_domain.DEFAULT_ATTEMPTS_CAP,
        validators=[MinValueValidator(1), MaxValueValidator(contract_domain.MAX_ATTEMPTS_CAP)],
    )
    max_checks = models.PositiveSmallIntegerField(
        default=20, validators=[MinValueValidator(1), MaxValueValidator(100)]
    )
    max_file_bytes = models.PositiveIntegerField(
        default=1024 * 1024, validators=[MinValueValidator(1), MaxValueValidator(10 * 1024 * 1024)]
    )
    review_mode = models.CharField(
        max_length=16, choices=ReviewMode.choices, default=ReviewMode.REQUIRED
    )
    authoring_mode = models.CharField(
        max_length=16, choices=AuthoringMode.choices, default=AuthoringMode.CURRENT_AGENT
    )
    review_ttl_seconds = models.PositiveIntegerField(
        default=24 * 3600, validators=[MinValueValidator(60), MaxValueValidator(30 * 24 * 3600)]
    )
    required_approvals = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(10)]
    )
    workspace_roots = models.JSONField(
        default=list, blank=True, help_text="Absolute directories agents may bind sessions under."
    )
    server_workspace_roots = models.BooleanField(
        default=False, help_text="Agents may also bind sessions under the server's "
                                 "GOVERNOR_WORKSPACE_ROOTS (on for the demo project).")
    extra_event_types = models.JSONField(
        default=list, blank=True, help_text="Event types beyond the Harness catalog to accept."
    )
    tree_max_files = models.PositiveIntegerField(
        default=100_000, validators=[MinValueValidator(1), MaxValueValidator(10_000_000)],
        help_text="The most files and symlinks a workspace tree may hold (rules §10): a "
                  "larger workspace is not hashed, and every evaluation of it fails, naming "
                  "this limit.")
    tree_max_bytes = models.PositiveBigIntegerField(
        default=1024 ** 3, validators=[MinValueValidator(1), MaxValueValidator(1024 ** 4)],
        help_text="The most bytes the files of a workspace tree may hold (rules §10), "
                  "refused likewise.")
    tree_exclusions = models.JSONField(
        default=list, blank=True,
        help_text='Paths left out of every workspace tree, as git pathspec globs anchored at '
                  'the workspace root, e.g. ["node_modules/**", "*.pyc"]. A digest of the list '
                  "is recorded beside every tree id: changing it makes earlier results stale.")
    protected_paths = models.JSONField(
        default=list, blank=True,
        help_text='Paths no contract may change unless a person opens them at review, as '
                  'patterns in the exclusions\' syntax, e.g. ["tests/**", "**/conftest.py", '
                  '"pytest.ini"]. Every contract gets a critical check that they are unchanged '
                  "since it started (with the verifier profiles' own protected paths).")
    runner_control_exempt = models.JSONField(
        default=list, blank=True,
        help_text='Built-in runner-control entries (rules §17.3) this project does not '
                  'protect, each with the reason, e.g. [{"entry": "**/setup.cfg", "reason": '
                  '"holds only flake8 settings; pytest reads pyproject.toml"}]. Every evidence '
                  "page shows them.")
    reference_ref = models.CharField(
        max_length=255, blank=True, default="",
        help_text="The git ref whose tree is every path session's reference (rules §17.1), "
                  "e.g. origin/main: protected paths are judged against it and every trusted "
                  "run takes them from it. Empty: the commit HEAD names when the session is "
                  "created (a workspace that is no git repository: its tree then). A ref that "
                  "does not resolve refuses the session.")
    require_discriminating_evidence = models.BooleanField(
        default=False, help_text="Refuse a contract whose critical claim has no check that "
                                 "fails before the work (its evidence could not tell done from "
                                 "not done); off: a warning the reviewer sees.")
    unattended_evidence = models.CharField(
        max_length=16, choices=UnattendedEvidence.choices, default=UnattendedEvidence.ANY,
        help_text="With review off (rules §17.7). operator: refuse a contract with a critical "
                  "claim whose every check is evidence the agent can author (a file check on a "
                  "path that is not protected, tool_succeeded, tool_not_called, "
                  "no_tool_errors): it must rest on a trusted profile or a protected path. "
                  "any: accept it. The careful choice is operator.")
    delivery_review = models.CharField(
        max_length=16, choices=[("off", "off"), ("required", "required")], default="off",
        help_text="required: once every check of a contract passes, a person reviews the "
                  "delivered change (the changes from the contract-start tree, the runs that "
                  "proved each claim) before it is certified; off: certified at once.")
    require_signed_approvals = models.BooleanField(
        default=False, help_text="Every approval must be signed with the reviewer's own passkey "
        "(WebAuthn); an unsigned approval is refused. Exports then prove who approved what.")
    webhook_url = models.URLField(blank=True, help_text="Receives a signed POST when a "
                                  "proposal starts waiting for review.")
    webhook_secret = models.CharField(max_length=200, blank=True,
                                      help_text="HMAC-SHA256 key for the webhook signature.")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.slug

    def clean(self) -> None:
        """Workspace roots are absolute paths: anything else would fail every session binding.
        Tree exclusions are patterns `governor.domain.tree` supports, each refusal naming its
        item and reason; each runner-control exemption names a built-in entry and its reason
        (stored trimmed)."""
        roots = self.workspace_roots
        if not isinstance(roots, list):
            raise ValidationError({"workspace_roots": "must be a list of absolute directory "
                                                      'paths, e.g. ["/srv/agents"]'})
        for index, root in enumerate(roots):
            if not isinstance(root, str) or not root.startswith("/") or "\x00" in root:
                raise ValidationError({"workspace_roots": f"item {index} ({json.dumps(root)}) is "
                                                          "not an absolute directory path"})
        for name in ("tree_exclusions", "protected_paths"):
            try:
                validate_exclusions(getattr(self, name), name)
            except FieldsInvalid as exc:
                raise ValidationError({name: [
                    f"{error['path']}: {error['message']}" for error in exc.errors]}) from None
        if self.reference_ref and (self.reference_ref.startswith("-")
                                   or any(c.isspace() or ord(c) < 32 for c in self.reference_ref)):
            raise ValidationError({"reference_ref": "must be a git ref such as origin/main: "
                                                    "no leading '-', spaces or control "
                                                    "characters"})
        try:
            self.runner_control_exempt = validate_exemptions(self.runner_control_exempt)
        except FieldsInvalid as exc:
            raise ValidationError({"runner_control_exempt": [
                f"{error['path']}: {error['message']}" for error in exc.errors]}) from None


class Role(models.TextChoices):
    REVIEWER = "reviewer"
    OPERATOR = "operator"


class Membership(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "project", "role"], name="membership_unique")
        ]

    def __str__(self) -> str:
        return f"{self.user} {self.role} of {self.project}"


class TokenKind(models.TextChoices):
    """What a project token may do: an `agent` token runs sessions and contracts; a `gate`
    token (rules §19.2) may only gate changes, upload their trees' blobs and read the
    project's certifications."""

    AGENT = "agent"
    GATE = "gate"


class AgentToken(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="tokens")
    name = models.CharField(max_length=100)
    kind = models.CharField(
        max_length=8, choices=TokenKind.choices, default=TokenKind.AGENT,
        help_text="agent: sessions, contracts and runs. gate: only gating changes at the pull "
                  "request (POST /api/v1/changes), uploading their blobs and reading the "
                  "project's certifications — for a CI job, never an agent.")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="agent_tokens",
        help_text="The person who runs this agent: they may not approve its proposals.")
    prefix = models.CharField(max_length=16, help_text="Identifies the token; not a secret.")
    digest = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    def as_ref(self) -> TokenRef:
        """The token as the log names what it did (rules §17.10)."""
        return {"id": self.pk, "name": self.name}


class WaitSlot(models.Model):
    """A long poll in progress: one of its token's GOVERNOR_MAX_WAITS_PER_TOKEN slots, or for a
    page's live part one of its signed-in user's GOVERNOR_MAX_WAITS_PER_USER slots, shared by
    every server thread and process through the unique constraints."""

    token = models.ForeignKey(AgentToken, on_delete=models.CASCADE, related_name="+",
                              null=True, blank=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                             related_name="+", null=True, blank=True)
    slot = models.PositiveSmallIntegerField()
    until = models.DateTimeField(help_text="When the wait answers at the latest.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["token", "slot"], name="one_wait_per_token_slot"),
            models.UniqueConstraint(fields=["user", "slot"], name="one_wait_per_user_slot"),
            models.CheckConstraint(
                condition=models.Q(token__isnull=False, user__isnull=True)
                | models.Q(token__isnull=True, user__isnull=False),
                name="wait_held_by_token_or_user"),
        ]

    def __str__(self) -> str:
        return f"wait {self.slot} of {self.token_id or self.user_id} until {self.until}"


class ImportSlot(models.Model):
    """One of an agent token's GOVERNOR_MAX_IMPORTS_PER_MINUTE import starts, taken for a
    minute (`until`): a token starts at most that many imports in any minute, counted alike by
    every server thread and process through the unique constraint."""

    token = models.ForeignKey(AgentToken, on_delete=models.CASCADE, related_name="+")
    slot = models.PositiveSmallIntegerField()
    until = models.DateTimeField(help_text="When the slot may start another import.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["token", "slot"], name="one_import_per_token_slot"),
        ]

    def __str__(self) -> str:
        return f"import slot {self.slot} of {self.token_id} until {self.until}"


class WorkspaceKind(models.TextChoices):
    PATH = "path"
    SNAPSHOT = "snapshot"


class VisibleSessions(models.Manager["Session"]):
    """Every session but an import still being written (`Session.importing`)."""

    def get_queryset(self) -> models.QuerySet[Session]:
        return super().get_queryset().filter(importing=False)


class Session(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="sessions")
    # NULL, not "", for sessions without one: the unique constraint ignores NULLs.
    external_id = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    workspace_kind = models.CharField(max_length=16, choices=WorkspaceKind.choices)
    workspace_path = models.CharField(max_length=4096, blank=True)
    # "device:inode" of the directory bound at creation: checks and runs use only that directory.
    workspace_identity = models.CharField(max_length=64, blank=True)
    header = JSONTextField(null=True, blank=True)
    # rules §17.1: the `reliability/reference` data, taken when the session was created (a
    # snapshot session: at its first snapshot); written into the log just before the
    # session's first governor event (governor/services/events.py).
    reference = JSONTextField(null=True, blank=True, editable=False)
    imported = models.BooleanField(default=False)
    # An import writes its events in chunks, each its own transaction (governor/services/
    # sessions.py `session_import`): until the last one commits the session is `importing`,
    # hidden from every read (`objects`), and a failed import deletes it with its events. Once
    # false it never turns true again, and its events can no longer be deleted (database
    # triggers, migration 0014).
    importing = models.BooleanField(default=False)
    created_by = models.ForeignKey(AgentToken, null=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = VisibleSessions()
    all_objects: models.Manager[Session] = models.Manager()  # imports in progress too

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "external_id"], name="session_external_id_unique"
            )
        ]

    def __str__(self) -> str:
        return str(self.id)


class WorkspaceTree(models.Model):
    """rules §10: the manifest of a workspace tree the governor hashed (for an attempt, a
    contract's start or a run), written once per (project, id, exclusions digest): what an
    export names file by file."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="trees")
    tree_id = models.CharField(max_length=80)  # gittree:sha256:<64 hex>
    exclusions_digest = models.CharField(max_length=80)  # sha256:<64 hex>
    exclusions = models.JSONField(default=list)  # the patterns, canonical (sorted, distinct)
    manifest = JSONTextField()  # [[path, mode, blob id], ...] in `git ls-tree -r` order
    files = models.PositiveIntegerField()
    bytes = models.PositiveBigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "tree_id", "exclusions_digest"],
                                    name="workspace_tree_unique")
        ]

    def __str__(self) -> str:
        return self.tree_id


class Origin(models.TextChoices):
    AGENT = "agent"
    GOVERNOR = "governor"


class Event(models.Model):
    """One entry of a session log. Never updated or deleted (a database trigger refuses it)."""

    session = models.ForeignKey(Session, on_delete=models.PROTECT, related_name="events")
    seq = models.PositiveIntegerField()
    type = models.CharField(max_length=128)
    time = models.BigIntegerField()
    origin = models.CharField(max_length=8, choices=Origin.choices)
    data = JSONTextField()
    meta = JSONTextField(null=True, blank=True)
    raw = models.TextField(null=True, blank=True)  # noqa: DJ001 - NULL for governor events
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)
    # Denormalised from `data` at append time so evidence questions are indexed lookups.
    tool_name = models.CharField(max_length=256, null=True, blank=True)  # noqa: DJ001
    call_id = models.CharField(max_length=256, null=True, blank=True)  # noqa: DJ001
    is_error = models.BooleanField(null=True)
    governor_tool = models.BooleanField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="event_session_seq_unique")
        ]
        indexes = [
            models.Index(fields=["session", "type", "seq"], name="event_session_type_seq"),
            models.Index(fields=["session", "tool_name", "seq"], name="event_session_tool_seq"),
            models.Index(fields=["session", "call_id"], name="event_session_call"),
            models.Index(fields=["session", "is_error", "seq"], name="event_session_error_seq"),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}#{self.seq} {self.type}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None:
            raise PermissionError("events are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        raise PermissionError("events are append-only")


class SessionState(models.Model):
    """Projection of the log, updated in the same transaction as every append."""

    session = models.OneToOneField(
        Session, primary_key=True, on_delete=models.PROTECT, related_name="state"
    )
    next_seq = models.PositiveIntegerField(default=0)
    head = models.CharField(max_length=64)
    trace = JSONTextField(default=dict)
    lifecycle = JSONTextField(default=dict)
    last_mutation_seq = models.IntegerField(default=-1)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"state of {self.session_id}"


class EventBatch(models.Model):
    """The answer to an appended batch, so a replay after a lost response stores nothing twice."""

    session = models.ForeignKey(Session, on_delete=models.PROTECT, related_name="batches")
    key = models.CharField(max_length=200)
    digest = models.CharField(max_length=64)
    first_seq = models.PositiveIntegerField()
    last_seq = models.PositiveIntegerField()
    head = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "key"], name="event_batch_key_unique")
        ]

    def __str__(self) -> str:
        return f"{self.session_id} batch {self.key}"


class SigningKey(models.Model):
    keyid = models.CharField(max_length=64, unique=True)
    public_key = models.CharField(max_length=64, help_text="Base64 of the raw Ed25519 key.")
    private_key = models.BinaryField(editable=False)
    active = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    retired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["active"], condition=models.Q(active=True), name="one_active_signing_key"
            )
        ]

    def __str__(self) -> str:
        return self.keyid


class Attestation(models.Model):
    """A signed DSSE envelope over one governor event (an activated contract or a terminal)."""

    event = models.OneToOneField(Event, on_delete=models.PROTECT, related_name="attestation")
    keyid = models.CharField(max_length=64)
    envelope = JSONTextField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"attestation of event {self.event_id}"


class DraftProvider(models.TextChoices):
    OPENAI_CHAT = "openai-chat", "OpenAI-compatible chat completions"
    ANTHROPIC_MESSAGES = "anthropic-messages", "Anthropic messages"


class DraftRoute(models.Model):
    """rules §9: the one exact provider route a project in `auxiliary-model` authoring mode
    drafts contracts through. The credential is never stored: only the name of the environment
    variable or the path of the file that holds it, read at call time."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="draft_route")
    provider = models.CharField(max_length=32, choices=DraftProvider.choices)
    base_url = models.URLField(
        max_length=2048,
        help_text="OpenAI-compatible: the API base including /v1 (the request goes to "
                  "{base}/chat/completions). Anthropic: https://api.anthropic.com (the request "
                  "goes to {base}/v1/messages). No credentials in the URL.")
    model = models.CharField(max_length=200)
    reasoning_effort = models.CharField(
        max_length=16, blank=True,
        help_text="Optional. OpenAI-compatible: sent as reasoning_effort (none, minimal, low, "
                  "medium, high, xhigh). Anthropic: sent as output_config.effort (low, medium, "
                  "high, xhigh, max).")
    max_output_tokens = models.PositiveIntegerField(
        default=4096, validators=[MinValueValidator(1), MaxValueValidator(128_000)])
    timeout_seconds = models.PositiveIntegerField(
        default=120, validators=[MinValueValidator(1), MaxValueValidator(600)],
        help_text="Wall-clock limit for the whole streamed answer.")
    max_input_bytes = models.PositiveIntegerField(
        default=32 * 1024, validators=[MinValueValidator(256), MaxValueValidator(1024 * 1024)],
        help_text="Largest user block (objective, context, profiles) sent; larger inputs are "
                  "refused before any call.")
    credential_env = models.CharField(
        max_length=128, blank=True,
        help_text="Name of the environment variable holding the API key (not the key).")
    credential_file = models.CharField(
        max_length=1024, blank=True,
        help_text="Absolute path of a file holding the API key (not the key).")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.provider} {self.model} for {self.project}"

    def clean(self) -> None:
        problems = route_problems(
            provider=self.provider, base_url=self.base_url, model=self.model,
            reasoning_effort=self.reasoning_effort, credential_env=self.credential_env,
            credential_file=self.credential_file)
        if problems:
            raise ValidationError({field: message for field, message in problems})


class Blob(models.Model):
    """rules §11.2: one blob in the store, in its project's namespace (another project's
    blob of the same id is missing to this one). The row is written only after the bytes are
    stored whole, so a row means a complete, verified blob; `touched_at` moves whenever an
    upload finds it present or a snapshot names it, and garbage collection spares the blobs
    touched within the grace period."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="blobs")
    blob_id = models.CharField(max_length=64)  # 64 lowercase hex (git blob id, SHA-256 format)
    size = models.PositiveBigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)
    touched_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "blob_id"], name="blob_unique")
        ]
        indexes = [models.Index(fields=["project", "touched_at"], name="blob_touched")]

    def __str__(self) -> str:
        return self.blob_id


class Snapshot(models.Model):
    """rules §11.1: a tree a snapshot session uploaded, immutable; the session's latest
    (highest `number`) is the one its turn-stops and runs must name."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="snapshots")
    number = models.PositiveIntegerField()
    tree = models.ForeignKey(WorkspaceTree, on_delete=models.PROTECT, related_name="snapshots")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "number"], name="snapshot_number_unique")
        ]

    def __str__(self) -> str:
        return f"{self.session_id} #{self.number}: {self.tree.tree_id}"


class ReliabilityFact(models.Model):
    """One thing the reliability page counts (governor.domain.reliability `event_facts`): a
    contract, a terminal, a failed check of an attempt, a trusted run, a review decision or a
    reported outcome, written in the transaction of the governor event it is read from and
    never changed. The page counts them through `ReliabilityDay`; it reads these rows only for
    the median time to decide (an index walk in value order) and for reports. Imported history
    yields none: this server did not decide it."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="+")
    token = models.ForeignKey(AgentToken, null=True, on_delete=models.SET_NULL, related_name="+",
                              help_text="The agent token that created the session.")
    event_seq = models.PositiveIntegerField()
    at = models.DateTimeField()
    kind = models.CharField(max_length=16)
    name = models.CharField(max_length=256, blank=True)
    status = models.CharField(max_length=32, blank=True)
    # terminal: its attempts; run: duration ms; review: ms to decide; report: when the
    # reported terminal was written (epoch ms), so a report counts in its terminal's period
    value = models.BigIntegerField(null=True)
    contract_id = models.CharField(max_length=128, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["project", "kind", "name", "value", "at"],
                         name="fact_project_kind_value"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.name} {self.status} of {self.session_id}#{self.event_seq}"


class ReliabilityDay(models.Model):
    """The facts of one UTC day counted per project, agent token, kind, name and status — and
    the sessions started — updated in the same transaction as each fact: the reliability page
    reads at most a row per day and group, whatever the number of sessions (benchmark B12)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    token_key = models.PositiveBigIntegerField(
        default=0, help_text="The agent token's id (0: none); not a foreign key, so a row "
                             "outlives its token and the unique constraint holds (no NULL).")
    kind = models.CharField(max_length=16)
    name = models.CharField(max_length=256, blank=True)
    status = models.CharField(max_length=32, blank=True)
    count = models.PositiveBigIntegerField(default=0)
    first = models.PositiveBigIntegerField(default=0, help_text="Of them, those whose value is 1 "
                                                                "(terminals at the first attempt).")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "day", "token_key", "kind", "name",
                                            "status"], name="reliability_day_unique")
        ]

    def __str__(self) -> str:
        return f"{self.project_id} {self.day} {self.kind} {self.name} {self.status}: {self.count}"


class ChangeState(models.TextChoices):
    RUNNING = "running"
    FINISHED = "finished"


class ChangeVerdict(models.TextChoices):
    PENDING = "", "pending"
    CERTIFIED = "certified"
    NOT_CERTIFIED = "not-certified"


class Change(models.Model):
    """rules §19: a change gated at the pull request, with no session — a base tree and a
    head tree (with their commits), the policy read from the base, the runs of its profiles
    (`verification.ChangeRun`), and once they finished the verdict with its findings, what
    proved each rule and, when certified, the signed attestation of the head tree."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="changes")
    token = models.ForeignKey(AgentToken, null=True, on_delete=models.SET_NULL,
                              related_name="+")
    base_commit = models.CharField(max_length=64)
    head_commit = models.CharField(max_length=64)
    base_tree = models.ForeignKey(WorkspaceTree, on_delete=models.PROTECT, related_name="+")
    head_tree = models.ForeignKey(WorkspaceTree, on_delete=models.PROTECT, related_name="+")
    observe = models.BooleanField(default=False, help_text="Observe mode: the verdict is "
                                  "recorded and answered, and the CI job never fails on it.")
    policy = JSONTextField(help_text="The gate policy in force: the project's settings with "
                                     "the base's .governor-gate.toml.")
    policy_receipt = models.CharField(max_length=71)
    changes = JSONTextField(help_text="[[path, kind, [sections]], ...] from base to head.")
    protected = JSONTextField(help_text="The protected paths the head changed.")
    tamper = JSONTextField(help_text="The tamper scan's findings in the changed files.")
    converted = JSONTextField(default=dict, help_text="Rules §17.9: what a checkout of the "
                                                      "head would convert, {text, paths}.")
    state = models.CharField(max_length=16, choices=ChangeState.choices,
                             default=ChangeState.RUNNING)
    verdict = models.CharField(max_length=16, choices=ChangeVerdict.choices, blank=True,
                               default=ChangeVerdict.PENDING)
    findings = JSONTextField(default=list)
    proofs = JSONTextField(default=list)
    rules = JSONTextField(default=list, help_text="The rules its findings name (counted).")
    receipt = models.CharField(max_length=71, blank=True)
    envelope = JSONTextField(null=True, blank=True, help_text="The DSSE envelope certifying "
                                                              "the head tree.")
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["project", "created_at"], name="change_project_time"),
                   models.Index(fields=["project", "head_tree"], name="change_project_head")]

    def __str__(self) -> str:
        return f"change {self.id} ({self.verdict or self.state})"

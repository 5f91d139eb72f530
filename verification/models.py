"""docs/architecture.md: operator-configured profiles of both kinds, verifier and outcome, kept
as one versioned store (`VersionedProfile`, `ProfileVersionBase`); verifier runs; the outcome
contracts' schedule."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from django.conf import settings
from django.db import models

from governor.domain.outcomes import STORED_FIELDS as OUTCOME_STORED_FIELDS
from governor.domain.outcomes import (
    OutcomeDefinition,
    outcome_definition,
    outcome_profile_receipt,
)
from governor.domain.profiles import (
    STORED_FIELDS,
    ProfileDefinition,
    profile_definition,
    profile_receipt,
)
from governor.models import Change, JSONTextField, Project, Session

if TYPE_CHECKING:
    from django.db.models.fields.related_descriptors import RelatedManager

Definition = TypeVar("Definition")


class VersionedProfile(models.Model, Generic[Definition]):
    """What both profile kinds share (docs/architecture.md, "Profiles"): an operator's profile,
    named in its project by `profile_id`, which an agent can only name. `receipt` is its current
    version's; every receipt it had stays readable with its definition in `versions`. Saved
    only by `governor.services.profiles.profile_store`; each kind says what it stores
    (`stored`)."""

    profile_id = models.CharField("id", max_length=128)
    description = models.CharField(max_length=500)
    receipt = models.CharField(max_length=71, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    # Each kind declares these: `project` with its own related name, `versions` by its version
    # table's foreign key; and the (project, profile_id) constraint, named in the migrations.
    project: models.ForeignKey[Any, Project]
    versions: RelatedManager[ProfileVersionBase]

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.project.slug}/{self.profile_id}"

    def definition(self) -> Definition:
        """The definition its current receipt covers, as validated when it was saved (never
        validated again)."""
        stored: Definition = self.versions.get(receipt=self.receipt).definition
        return stored

    @classmethod
    def stored(cls, validated: dict[str, Any]) -> tuple[dict[str, Any], Definition, str]:
        """What saving its validator's output stores: the columns, the definition and the
        definition's receipt."""
        raise NotImplementedError


class ProfileVersionBase(models.Model):
    """One receipt a profile has had, with the definition it covered: written once by
    `governor.services.profiles.profile_store`, never changed. Each kind names its `profile`."""

    receipt = models.CharField(max_length=71)
    definition = JSONTextField()
    created_at = models.DateTimeField(auto_now_add=True)

    profile: models.ForeignKey[Any, VersionedProfile[Any]]

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.profile} {self.receipt[:19]}"


class SandboxMode(models.TextChoices):
    READ_ONLY = "read-only"
    WORKSPACE_WRITE = "workspace-write"


class VerifierProfile(VersionedProfile[ProfileDefinition]):
    """A trusted command an agent may only name. `receipt` covers everything that changes how
    it runs; every receipt it ever had stays readable in `ProfileVersion`."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="profiles")
    argv = JSONTextField(help_text='Command and arguments, e.g. ["pytest", "-q"].')
    timeout_ms = models.PositiveIntegerField(default=120_000)
    sandbox_mode = models.CharField(max_length=16, choices=SandboxMode.choices,
                                    default=SandboxMode.READ_ONLY)
    required = models.BooleanField(default=True)
    env = JSONTextField(default=dict, blank=True, help_text="Fixed environment variables.")
    limits = JSONTextField(default=dict, blank=True,
                           help_text="memory_bytes, pids, file_bytes, cpu_seconds, "
                                     "output_bytes, open_files")
    rootfs = models.CharField(max_length=1024, blank=True,
                              help_text="Unpacked root filesystem to run in instead of the "
                                        "host's read-only system (absolute path).")
    environment = JSONTextField(
        default=list, blank=True,
        help_text='Directories the command needs that the project excludes from the tree, '
                  'e.g. [".venv"] or ["node_modules"]: hashed, recorded with every run and '
                  'materialised beside the tree; a change makes earlier results stale.')
    protected_paths = JSONTextField(
        default=list, blank=True,
        help_text='Paths this command reads that no contract naming it may change, e.g. '
                  '["tests/**", "**/conftest.py", "pytest.ini"]: added to the project\'s '
                  "protected paths for such contracts.")
    report = models.CharField(
        max_length=16, blank=True, choices=[("", "none"), ("junit", "junit")],
        help_text="junit: the command writes JUnit XML into $GOVERNOR_REPORT_DIR "
                  "(/governor-report), e.g. pytest --junitxml=/governor-report/junit.xml. A run "
                  "then passes only if a report shows no failure or error and at least one pass, "
                  "and every test of the baseline run on the contract-start tree passes.")
    plugin_autoload = models.BooleanField(
        default=False,
        help_text="A report profile runs with PYTEST_DISABLE_PLUGIN_AUTOLOAD=1: pytest loads "
                  "only the plugins its command names with -p, never one a package's metadata "
                  "in the workspace names (rules §17.3). On: pytest loads installed plugins "
                  "itself.")
    heldout = models.CharField(
        max_length=128, blank=True,
        help_text="A held-out suite of this project whose files the command reads, mounted "
                  "read-only at /governor-heldout (e.g. pytest /governor-heldout/tests); the "
                  "agent never sees them (rules §18.2).")
    oracle = models.CharField(
        max_length=128, blank=True,
        help_text="A held-out suite whose cases the command answers: it reads {id, input} JSON "
                  "lines on stdin and prints one {id, output} JSON line per case; the server "
                  "compares the outputs with the expected values, which never enter the "
                  "sandbox (rules §18.3).")
    show_output_to_reviewers = models.BooleanField(default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "profile_id"], name="profile_id_unique")
        ]

    def as_input(self) -> dict[str, Any]:
        """The profile as operator input (`validate_profile` reads it)."""
        stored = {name: getattr(self, name) for name in STORED_FIELDS
                  if name not in ("heldout", "oracle") or getattr(self, name)}
        return {**stored, "id": self.profile_id, "rootfs": self.rootfs or None}

    @classmethod
    def stored(cls, validated: dict[str, Any]
               ) -> tuple[dict[str, Any], ProfileDefinition, str]:
        """The columns hold "" where `validate_profile` says None (no rootfs, no report)."""
        definition = profile_definition(validated)
        columns = {**{name: validated[name] for name in STORED_FIELDS},
                   "rootfs": validated["rootfs"] or "", "report": validated["report"] or "",
                   "heldout": validated["heldout"] or "", "oracle": validated["oracle"] or ""}
        return columns, definition, profile_receipt(definition)


class ProfileVersion(ProfileVersionBase):
    """Every receipt a verifier profile has had, with the definition it covered."""

    profile = models.ForeignKey(VerifierProfile, on_delete=models.CASCADE,
                                related_name="versions")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["profile", "receipt"], name="profile_version_unique")
        ]


class HeldoutSuite(models.Model):
    """rules §18.1: an operator's held-out suite — files, and optionally cases with their
    expected values — named in its project. An agent can only name it in nothing: profiles name
    it (`heldout`, `oracle`), and agents see its name, version receipt and counts. `version` is
    its current version; every version it had stays readable. Saved only by
    `governor.services.heldout.suite_load`; its bytes live in the blob store under the project's
    held-out prefix, never the agent's."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE,
                                related_name="heldout_suites")
    name = models.CharField(max_length=128)
    version = models.ForeignKey("HeldoutSuiteVersion", on_delete=models.PROTECT, null=True,
                                related_name="+")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "held-out suite"
        constraints = [models.UniqueConstraint(fields=["project", "name"],
                                               name="heldout_suite_name_unique")]

    def __str__(self) -> str:
        return f"{self.project.slug}/{self.name}"


class HeldoutSuiteVersion(models.Model):
    """One version of a held-out suite: its `heldout-suite` receipt and the document it covers
    (file paths, modes, blob ids and sizes; the cases' blob id and count), written once."""

    suite = models.ForeignKey(HeldoutSuite, on_delete=models.CASCADE, related_name="versions")
    receipt = models.CharField(max_length=71)
    document = JSONTextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "held-out suite version"
        constraints = [models.UniqueConstraint(fields=["suite", "receipt"],
                                               name="heldout_suite_version_unique")]

    def __str__(self) -> str:
        return f"{self.suite} {self.receipt[:19]}"

    @property
    def file_count(self) -> int:
        return len(self.document["files"])

    @property
    def case_count(self) -> int:
        cases = self.document.get("cases")
        return int(cases["count"]) if cases else 0


class RunState(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"


class VerificationRun(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(Session, on_delete=models.PROTECT, related_name="runs",
                                null=True, blank=True,
                                help_text="None for a gated change's run (rules §19.2).")
    profile = models.ForeignKey(VerifierProfile, on_delete=models.PROTECT, related_name="runs")
    overlay = JSONTextField(null=True, blank=True,
                            help_text="A gated change's run: what it lays over its tree "
                                      "(rules §17.2), {reference: {id, exclusions}, check}.")
    profile_receipt = models.CharField(max_length=71)
    definition = JSONTextField(help_text="The profile definition this run executes.")
    tree = models.CharField(max_length=80, blank=True,
                            help_text="The tree the run runs on when it is named: a snapshot "
                                      "session's snapshot (§11.3), or a baseline run's "
                                      "contract-start tree.")
    baseline = models.BooleanField(
        default=False, help_text="A run on the contract-start tree, queued when the contract "
                                 "activated: what the tests did before the work (never evidence).")
    tree_exclusions = models.CharField(
        max_length=71, blank=True, help_text="The exclusions digest of a baseline run's tree.")
    tests = JSONTextField(null=True, blank=True,
                          help_text="A report profile's per-test outcomes: [[id, outcome], ...]; "
                                    "an oracle profile's per-case outcomes.")
    heldout = models.ForeignKey(
        HeldoutSuiteVersion, on_delete=models.PROTECT, null=True, blank=True, related_name="+",
        help_text="The version of the held-out suite mounted at /governor-heldout (§18.2).")
    oracle = models.ForeignKey(
        HeldoutSuiteVersion, on_delete=models.PROTECT, null=True, blank=True, related_name="+",
        help_text="The version of the suite whose cases the run answered (§18.3).")
    state = models.CharField(max_length=16, choices=RunState.choices, default=RunState.QUEUED)
    lease_owner = models.CharField(max_length=200, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    result = JSONTextField(null=True, blank=True)
    output_tail = models.TextField(blank=True)
    detail = models.TextField(blank=True, help_text="Why it failed, for operators (never shown "
                                                    "to agents or recorded in the log).")
    event_seq = models.IntegerField(null=True, blank=True)
    started_after_seq = models.IntegerField(
        null=True, blank=True, help_text="The last seq of the session log when it was claimed.")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["state", "lease_expires_at"], name="run_state_lease")]

    def __str__(self) -> str:
        return f"run {self.id} ({self.state})"

    def as_dict(self) -> dict[str, Any]:
        return {"id": str(self.id), "profile": self.profile.profile_id, "state": self.state,
                "result": self.result}

    def lost_at(self) -> datetime | None:
        """When `runs_expire_lost` ends the run if nothing else happens to it first: a running
        one when its lease runs out, a queued one at the queue timeout. None once finished."""
        if self.state == RunState.RUNNING:
            return self.lease_expires_at
        if self.state == RunState.QUEUED:
            return self.created_at + timedelta(
                seconds=settings.GOVERNOR_RUN_QUEUE_TIMEOUT_SECONDS)
        return None


class ProbeNetwork(models.TextChoices):
    NONE = "none", "none: no network (the default)"
    HOST = "host", "host: the probe shares the worker's network"


class OutcomeProfile(VersionedProfile[OutcomeDefinition]):
    """An operator's probe of a business metric, and how an outcome contract judges it. The
    agent can only name it; `receipt` covers everything that changes what it measures or how
    it is judged, and every receipt it had stays readable in `OutcomeProfileVersion`."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE,
                                related_name="outcome_profiles")
    argv = JSONTextField()
    env = JSONTextField(default=dict, blank=True)
    timeout_ms = models.PositiveIntegerField(default=120_000)
    metrics = JSONTextField()
    target = JSONTextField()
    guardrails = JSONTextField(default=list, blank=True)
    minimum_sample_size = models.PositiveIntegerField(null=True, blank=True)
    max_data_age_ms = models.BigIntegerField(default=24 * 3600 * 1000)
    not_before_ms = models.BigIntegerField(default=0)
    deadline_ms = models.BigIntegerField(default=7 * 24 * 3600 * 1000)
    observe_every_ms = models.BigIntegerField(default=3600 * 1000)
    attribution = models.CharField(max_length=16, default="correlational", choices=[
        ("direct", "direct"), ("correlational", "correlational"), ("experiment", "experiment")])
    network = models.CharField(max_length=8, choices=ProbeNetwork.choices,
                               default=ProbeNetwork.NONE)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "profile_id"],
                                               name="outcome_profile_id_unique")]

    def as_input(self) -> dict[str, Any]:
        """The profile as operator input (`validate_outcome_profile` reads it)."""
        stored = {name: getattr(self, name) for name in OUTCOME_STORED_FIELDS}
        if stored["minimum_sample_size"] is None:
            del stored["minimum_sample_size"]
        return {"id": self.profile_id, **stored}

    @classmethod
    def stored(cls, validated: dict[str, Any]) -> tuple[dict[str, Any], OutcomeDefinition, str]:
        definition = outcome_definition(validated)
        columns = {name: validated[name] for name in OUTCOME_STORED_FIELDS}
        return columns, definition, outcome_profile_receipt(definition)


class OutcomeProfileVersion(ProfileVersionBase):
    """Every receipt an outcome profile has had, with the definition it covered."""

    profile = models.ForeignKey(OutcomeProfile, on_delete=models.CASCADE,
                                related_name="versions")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["profile", "receipt"],
                                               name="outcome_profile_version_unique")]


class OutcomeContract(models.Model):
    """The schedule of one outcome contract (its record is the session's log): bound when its
    delivery contract activates, started when it is certified, observed until a terminal.
    `next_observe_at` is claimed with a compare-and-set update, so two schedulers or two
    workers never observe the same due time twice."""

    id = models.CharField(primary_key=True, max_length=80)
    session = models.ForeignKey(Session, on_delete=models.PROTECT,
                                related_name="outcome_contracts")
    profile = models.ForeignKey(OutcomeProfile, on_delete=models.PROTECT,
                                related_name="contracts")
    delivery_contract_id = models.CharField(max_length=80)
    binding = JSONTextField(help_text="The agent's view of the profile as bound, with its "
                                      "receipt.")
    definition = JSONTextField(help_text="The bound profile definition the probe runs.")
    baseline = JSONTextField(null=True, blank=True,
                             help_text="The probe result taken when the contract activated.")
    baseline_taken = models.BooleanField(default=False)
    started_at_ms = models.BigIntegerField(null=True, blank=True)
    deadline_at_ms = models.BigIntegerField(null=True, blank=True)
    next_observe_at_ms = models.BigIntegerField(null=True, blank=True, db_index=True)
    agent_observed_at_ms = models.BigIntegerField(default=0)
    requested_at_ms = models.BigIntegerField(
        null=True, blank=True, help_text="When an observation asked for by the agent or a "
        "reviewer was queued, until a worker records it.")
    status = models.CharField(max_length=16, default="bound")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.id} ({self.status})"


class ChangeRun(models.Model):
    """A run a gated change's verdict waits for (rules §19.2): of a profile on the base (the
    baseline; one run serves every change with the same base tree and profile receipt) or on
    the head."""

    change = models.ForeignKey(Change, on_delete=models.CASCADE, related_name="runs")
    run = models.ForeignKey(VerificationRun, on_delete=models.PROTECT, related_name="changes")
    role = models.CharField(max_length=8, choices=[("base", "base"), ("head", "head")])

    class Meta:
        constraints = [models.UniqueConstraint(fields=["change", "run", "role"],
                                               name="change_run_unique")]

    def __str__(self) -> str:
        return f"{self.change_id} {self.role} {self.run_id}"

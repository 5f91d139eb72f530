"""Operators manage their projects' verifier profiles here; every save is validated by the
rules of rules §8 and keeps the previous receipt readable."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from governor.domain.heldout import MAX_SUITE_BYTES, SuiteError, parse_suite, shown_input
from governor.domain.outcomes import STORED_FIELDS as OUTCOME_STORED_FIELDS
from governor.domain.outcomes import OutcomeProfileError, validate_outcome_profile
from governor.domain.profiles import TIMEOUT_MS_RANGE, ProfileError, validate_profile
from governor.lib.heldout import archive_entries
from governor.models import Project, Role
from governor.selectors.heldout import suite_version_cases, suites_unknown
from governor.services.heldout import suite_load
from governor.services.profiles import profile_environment_judged, profile_store
from verification.models import (
    HeldoutSuite,
    HeldoutSuiteVersion,
    OutcomeProfile,
    OutcomeProfileVersion,
    ProfileVersion,
    VerificationRun,
    VerifierProfile,
)


def operated_projects(request: HttpRequest) -> QuerySet[Project]:
    if request.user.is_superuser:
        return Project.objects.all()
    return Project.objects.filter(memberships__user_id=int(request.user.pk or 0),
                                  memberships__role=Role.OPERATOR)


class JSONFieldsForm(forms.ModelForm[Any]):
    """A profile form whose `JSON_FIELDS` are typed as JSON text: shown as JSON, parsed with the
    field's error, and whose profile rules' errors land on the fields they name."""

    JSON_FIELDS: dict[str, Any] = {}  # field -> its value when left empty
    validated: dict[str, Any] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in self.JSON_FIELDS:
            value = self.initial.get(name)
            if value is not None and not isinstance(value, str):
                self.initial[name] = json.dumps(value)

    def _json(self, name: str) -> Any:
        text = (self.cleaned_data.get(name) or "").strip()
        if not text:
            return self.JSON_FIELDS[name]
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"not valid JSON: {exc.msg}") from None

    def clean_argv(self) -> Any:
        return self._json("argv")

    def clean_env(self) -> Any:
        return self._json("env")

    def add_rule_errors(self, errors: list[dict[str, str]]) -> None:
        for error in errors:
            field = {"id": "profile_id"}.get(error["path"].split("/")[0],
                                             error["path"].split("/")[0])
            self.add_error(field if field in self.fields else None,
                           f"{error['path']}: {error['message']}")


class ProfileForm(JSONFieldsForm):
    JSON_FIELDS = {"argv": [], "env": {}, "limits": {}, "environment": [],
                   "protected_paths": []}
    argv = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}),
                           help_text='JSON array, e.g. ["pytest", "-q"]')
    env = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False,
                          help_text='JSON object, e.g. {"CI": "1"}')
    limits = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False,
                             help_text="JSON object: memory_bytes, pids, file_bytes, "
                                       "cpu_seconds, open_files, output_bytes")
    protected_paths = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), required=False,
        help_text='JSON array of patterns this command reads that no contract naming it may '
                  'change, e.g. ["tests/**", "**/conftest.py", "pytest.ini"]: tests, their '
                  "configuration, the scripts it runs. Added to the project's protected paths.")
    environment = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), required=False,
        help_text='JSON array of directories the command needs beside the tree. Best: an '
                  'operator directory, an absolute path outside every workspace root (e.g. '
                  '["/srv/governor/environments/py311"], a venv you built), mounted read-only '
                  'at the same path. Or a workspace directory the project excludes (e.g. '
                  '[".venv"]): hashed when the session starts and at every run; a run whose '
                  'copy differs from the start fails as environment-changed.')

    class Meta:
        model = VerifierProfile
        fields = ("project", "profile_id", "description", "argv", "timeout_ms", "sandbox_mode",
                  "required", "env", "limits", "rootfs", "environment", "protected_paths",
                  "report", "plugin_autoload", "heldout", "oracle", "show_output_to_reviewers")
        help_texts = {
            "profile_id": "The name agents use to ask for this command "
                          "(reliability_code_verify); they can never change what it runs.",
            "description": "What the command checks, as reviewers read it.",
            "timeout_ms": f"Milliseconds before the run is stopped and fails "
                          f"({TIMEOUT_MS_RANGE[0]:,}–{TIMEOUT_MS_RANGE[1]:,}).",
            "sandbox_mode": "Either way the command runs on a private copy of the workspace "
                            "tree, never the agent's directory. read-only: the copy is mounted "
                            "read-only. workspace-write: the run may write its copy; its "
                            "changes are applied to the workspace only when it passes.",
            "required": "Added to every code contract of this project: no code contract is "
                        "certified until this profile passes.",
            "show_output_to_reviewers": "Show the tail of the run's output on the session "
                                        "timeline (leave off if it may print secrets).",
        }

    def clean_limits(self) -> Any:
        return self._json("limits")

    def clean_environment(self) -> Any:
        return self._json("environment")

    def clean_protected_paths(self) -> Any:
        return self._json("protected_paths")

    def raw(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {"id": data["profile_id"], "description": data["description"],
                "argv": data["argv"], "timeout_ms": data["timeout_ms"],
                "sandbox_mode": data["sandbox_mode"], "required": data["required"],
                "env": data["env"], "limits": data["limits"], "rootfs": data["rootfs"] or None,
                "environment": data["environment"], "protected_paths": data["protected_paths"],
                "report": data["report"] or None, "plugin_autoload": data["plugin_autoload"],
                "heldout": data["heldout"] or None, "oracle": data["oracle"] or None,
                "show_output_to_reviewers": data["show_output_to_reviewers"]}

    environment_warnings: list[str] = []

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if not self.errors:
            try:
                self.validated = validate_profile(self.raw())
            except ProfileError as exc:
                self.add_rule_errors(exc.errors)
            project = cleaned.get("project")
            if self.validated is not None and project is not None and (
                    unknown := suites_unknown(project, self.validated)):
                self.add_rule_errors(unknown)
                self.validated = None
        if self.validated is not None and cleaned.get("project") is not None:
            # rules §17.8: where its environment lies, against the project
            judged = profile_environment_judged(cleaned["project"], self.validated)
            for field, message in judged.refused:
                self.add_error("environment", f"{field}: {message}")
            if judged.refused:
                self.validated = None
            self.environment_warnings = judged.warnings
        return cleaned


class VersionInline(admin.TabularInline[Any, Any]):
    """Every receipt a profile had, read-only."""

    extra = 0
    can_delete = False
    readonly_fields = ("receipt", "definition", "created_at")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ProfileVersionInline(VersionInline):
    model = ProfileVersion


class OperatedAdmin(admin.ModelAdmin[Any]):
    """A project's rows, for its operators only: another project's row, or its name, is never
    listed, and a new one is made only in a project the user operates."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).filter(project__in=operated_projects(request))

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest,
                                 **kwargs: Any) -> Any:
        if db_field.name == "project":
            kwargs["queryset"] = operated_projects(request)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_active and operated_projects(request).exists()

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    has_add_permission = has_view_permission
    has_change_permission = has_view_permission


class OperatedProfileAdmin(OperatedAdmin):
    """A project's profiles, of either kind, for its operators only. Saved by `profile_store`
    (the validated form's profile, and a new version when its receipt is new)."""

    readonly_fields = ("receipt",)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        assert form.validated is not None  # a valid form validated its profile in clean()
        obj.pk = profile_store(model=self.model, project=form.cleaned_data["project"],
                               validated=form.validated)[0].pk
        for warning in getattr(form, "environment_warnings", []):
            messages.warning(request, f"Saved with a warning: {warning}")


@admin.register(VerifierProfile)
class VerifierProfileAdmin(OperatedProfileAdmin):
    form = ProfileForm
    list_display = ("profile_id", "project", "required", "sandbox_mode", "timeout_ms", "receipt")
    list_filter = (("project", admin.RelatedOnlyFieldListFilter), "required", "sandbox_mode")
    inlines = [ProfileVersionInline]


@admin.register(VerificationRun)
class VerificationRunAdmin(admin.ModelAdmin[VerificationRun]):
    list_display = ("id", "profile", "session", "state", "created_at", "finished_at")
    list_filter = ("state",)
    readonly_fields = [f.name for f in VerificationRun._meta.fields]

    def get_queryset(self, request: HttpRequest) -> QuerySet[VerificationRun]:
        return super().get_queryset(request).filter(
            profile__project__in=operated_projects(request))

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class OutcomeProfileForm(JSONFieldsForm):
    JSON_FIELDS = {"argv": [], "env": {}, "metrics": [], "target": {}, "guardrails": []}
    argv = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}),
                           help_text='JSON array: the probe command and its arguments, e.g. '
                                     '["/usr/bin/python3", "/srv/probes/conversion.py"]. It must '
                                     'print exactly one JSON object: {"dataAsOf": <epoch ms>, '
                                     '"metrics": {<name>: <number>, …}, "sampleSize": <n>}.')
    env = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False,
                          help_text='JSON object of fixed variables, e.g. {"WINDOW": "7d"}. '
                                    "Names that look like credentials are refused.")
    metrics = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}),
                              help_text='JSON array of 1–20 {"name", "unit"}, e.g. '
                                        '[{"name": "conversion", "unit": "ratio"}]: exactly the '
                                        "names the probe prints.")
    target = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}),
                             help_text='JSON {"id", "metric", "operator", "value"}: operator '
                                       "gte, lte, eq, or delta-gte / delta-lte (compared with "
                                       "the baseline taken when the contract activated).")
    guardrails = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False,
                                 help_text="JSON array of up to 10 predicates shaped like the "
                                           "target, each of which must hold too.")

    class Meta:
        model = OutcomeProfile
        fields = ("project", "profile_id", "description", "argv", "env", "timeout_ms",
                  "metrics", "target", "guardrails", "minimum_sample_size", "max_data_age_ms",
                  "not_before_ms", "deadline_ms", "observe_every_ms", "attribution", "network")
        help_texts = {
            "profile_id": "The name an agent gives as outcome_profile when it begins a "
                          "contract; it never sees the command or its environment.",
            "description": "What the metric means, as agents and reviewers read it.",
            "timeout_ms": f"Milliseconds before the probe is stopped and fails "
                          f"({TIMEOUT_MS_RANGE[0]:,}–{TIMEOUT_MS_RANGE[1]:,}).",
            "minimum_sample_size": "Below this sampleSize an observation judges nothing "
                                   "(1–1,000,000,000; empty: no minimum).",
            "max_data_age_ms": "An observation whose dataAsOf is older than this is "
                               "invalid-output (default 24 h).",
            "not_before_ms": "Observations before this long after certification judge "
                             "nothing (default 0; at most the deadline).",
            "deadline_ms": "How long after certification the outcome must be reached "
                           "(default 7 days, at most 180).",
            "observe_every_ms": "How often the server observes, with no agent needed "
                                "(1 minute – 7 days; default 1 hour).",
            "attribution": "correlational (the default): a result is only said to be "
                           "correlated with the work. direct or experiment: the operator "
                           "vouches that the probe measures this work's effect.",
            "network": "none (the default): the probe has no network at all, like every "
                       "verifier. host: the probe shares the worker's network so it can reach "
                       "a metrics system — it can then reach anything the worker can.",
        }

    def clean_metrics(self) -> Any:
        return self._json("metrics")

    def clean_target(self) -> Any:
        return self._json("target")

    def clean_guardrails(self) -> Any:
        return self._json("guardrails")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.errors:
            return cleaned
        raw = {name: cleaned.get(name) for name in OUTCOME_STORED_FIELDS}
        raw["id"] = cleaned.get("profile_id")
        if raw.get("minimum_sample_size") is None:
            raw.pop("minimum_sample_size", None)
        try:
            self.validated = validate_outcome_profile(raw)
        except OutcomeProfileError as exc:
            self.add_rule_errors(exc.errors)
        return cleaned


class OutcomeProfileVersionInline(VersionInline):
    model = OutcomeProfileVersion


@admin.register(OutcomeProfile)
class OutcomeProfileAdmin(OperatedProfileAdmin):
    form = OutcomeProfileForm
    list_display = ("profile_id", "project", "attribution", "network", "deadline_ms", "receipt")
    list_filter = (("project", admin.RelatedOnlyFieldListFilter), "attribution", "network")
    inlines = [OutcomeProfileVersionInline]


class HeldoutSuiteForm(forms.ModelForm[Any]):
    """A new version of a held-out suite (rules §18.1): its directory as an archive (.tar,
    .tar.gz or .zip; cases in `cases.jsonl` at the top). Refused as a whole, naming every file,
    line and field, before anything is stored."""

    archive = forms.FileField(
        help_text="The suite's directory as a .tar, .tar.gz or .zip archive: its files are "
                  "mounted read-only at /governor-heldout for runs of a profile naming the "
                  "suite as heldout; cases.jsonl at the top holds the cases an oracle profile "
                  "answers ({id, input, expected, compare, tolerance?} per line). Agents never "
                  "see either.")
    entries: list[tuple[str, str, bytes]] | None = None

    class Meta:
        model = HeldoutSuite
        fields = ("project", "name")
        help_texts = {"name": "kebab-case; what profiles name as heldout or oracle, and all an "
                              "agent sees besides the version receipt and counts."}

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        upload, project = cleaned.get("archive"), cleaned.get("project")
        if self.instance.pk is not None:
            project, cleaned["name"] = self.instance.project, self.instance.name
        if upload is None or project is None or not cleaned.get("name"):
            return cleaned
        if upload.size > MAX_SUITE_BYTES:
            self.add_error("archive", f"is over {MAX_SUITE_BYTES:,} bytes")
            return cleaned
        try:
            entries = archive_entries(upload.name or "", upload.read())
            parse_suite(cleaned["name"], entries)  # refused here, on the field; stored on save
            self.entries = entries
        except SuiteError as exc:
            for error in exc.errors:
                self.add_error("archive", f"{error['path']}: {error['message']}")
        return cleaned

    def validate_unique(self) -> None:
        """A suite's name is unique in its project, and loading a new version of it is how it
        changes: `suite_load` keeps one row per name."""


class HeldoutSuiteVersionInline(admin.TabularInline[Any, Any]):
    """Every version a suite had, read-only."""

    model = HeldoutSuiteVersion
    extra = 0
    can_delete = False
    fields = ("receipt", "file_count", "case_count", "created_at")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(HeldoutSuite)
class HeldoutSuiteAdmin(OperatedAdmin):
    """A project's held-out suites, for its operators only: upload a directory as an archive
    (a new version when its receipt is new), list the current version's files and cases, and
    every version it had."""

    form = HeldoutSuiteForm
    list_display = ("name", "project", "current_receipt", "files", "cases", "updated_at")
    list_filter = (("project", admin.RelatedOnlyFieldListFilter),)
    readonly_fields = ("current_receipt", "contents")
    inlines = [HeldoutSuiteVersionInline]

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        if obj is None:
            return ("project", "name", "archive")
        return ("current_receipt", "archive", "contents")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).select_related("version", "project")

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        assert form.entries is not None  # a valid form read and judged its archive in clean()
        version, _created = suite_load(project=form.cleaned_data["project"] if not change
                                       else obj.project, name=form.cleaned_data["name"],
                                       entries=form.entries)
        obj.pk = version.suite_id
        obj.refresh_from_db()

    @admin.display(description="version")
    def current_receipt(self, obj: HeldoutSuite) -> str:
        return obj.version.receipt if obj.version else ""

    @admin.display(description="files")
    def files(self, obj: HeldoutSuite) -> int:
        return obj.version.file_count if obj.version else 0

    @admin.display(description="cases")
    def cases(self, obj: HeldoutSuite) -> int:
        return obj.version.case_count if obj.version else 0

    @admin.display(description="current version's files and cases")
    def contents(self, obj: HeldoutSuite) -> str:
        if obj.version is None:
            return ""
        files = format_html_join("", "<tr><td><code>{}</code></td><td>{}</td><td>{}</td>"
                                 "<td><code>{}</code></td></tr>",
                                 ((item["path"], item["mode"], item["size"], item["blob"][:16])
                                  for item in obj.version.document["files"]))
        cases = format_html_join("", "<tr><td><code>{}</code></td><td>{}</td><td><code>{}"
                                 "</code></td><td><code>{}</code></td></tr>",
                                 ((case.id, case.compare + (f" ±{case.tolerance}"
                                                            if case.tolerance else ""),
                                   shown_input(case.input), shown_input(case.expected))
                                  for case in suite_version_cases(obj.version)))
        return format_html(
            '<table><thead><tr><th>file</th><th>mode</th><th>bytes</th><th>blob</th></tr>'
            "</thead><tbody>{}</tbody></table>"
            '<table><thead><tr><th>case</th><th>compare</th><th>input</th><th>expected</th>'
            "</tr></thead><tbody>{}</tbody></table>", files, cases)


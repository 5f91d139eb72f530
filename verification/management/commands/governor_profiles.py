"""Profiles kept in a file under version control: `load` is idempotent, `dump` round-trips."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from governor.domain.fields import FieldsInvalid
from governor.domain.outcomes import validate_outcome_profile
from governor.domain.profiles import validate_profile
from governor.models import Project
from governor.services.profiles import profile_environment_judged, profile_store
from verification.models import OutcomeProfile, VerifierProfile, VersionedProfile

# Each list of the file: its key, its kind, and the rules that validate it (once, here).
KINDS: tuple[tuple[str, type[VersionedProfile[Any]], Callable[[Any], dict[str, Any]]], ...] = (
    ("profiles", VerifierProfile, validate_profile),
    ("outcome_profiles", OutcomeProfile, validate_outcome_profile),
)


class Command(BaseCommand):
    help = ('Load or dump a project\'s verifier and outcome profiles: {"profiles": [...], '
            '"outcome_profiles": [...]} (either list may be left out) as JSON or YAML.')

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["load", "dump"])
        parser.add_argument("file", nargs="?", help="load: the file; dump: default stdout")
        parser.add_argument("--project", required=True)
        parser.add_argument("--format", choices=["json", "yaml"], default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"no project {options['project']!r}")
        path = options["file"]
        fmt = options["format"] or ("yaml" if path and path.endswith((".yaml", ".yml"))
                                    else "json")
        if options["action"] == "dump":
            profiles = [p.as_input() for p in
                        VerifierProfile.objects.filter(project=project).order_by("profile_id")]
            document: dict[str, Any] = {"profiles": profiles}
            outcomes = [p.as_input() for p in
                        OutcomeProfile.objects.filter(project=project).order_by("profile_id")]
            if outcomes:
                document["outcome_profiles"] = outcomes
            text = (yaml.safe_dump(document, sort_keys=False) if fmt == "yaml"
                    else json.dumps(document, indent=2) + "\n")
            if path:
                Path(path).write_text(text)
            else:
                self.stdout.write(text, ending="")
            return
        if not path:
            raise CommandError("load needs a FILE")
        document = self._read(Path(path), fmt)
        if (not isinstance(document, dict) or not document
                or not set(document) <= {"profiles", "outcome_profiles"}
                or not all(isinstance(value, list) for value in document.values())):
            raise CommandError(f'{path}: expected {{"profiles": [...], "outcome_profiles": '
                               '[...]}} (either list may be left out)')
        changed = 0
        warnings: list[str] = []
        with transaction.atomic():  # all profiles or none
            for key, model, validate in KINDS:
                for index, raw in enumerate(document.get(key, [])):
                    try:
                        validated = validate(raw)
                    except FieldsInvalid as exc:  # ProfileError, OutcomeProfileError
                        raise CommandError(f"{path}: {key}/{index}: {exc}") from None
                    if model is VerifierProfile:  # rules §17.8: where its environment lies
                        judged = profile_environment_judged(project, validated)
                        if judged.refused:
                            field, message = judged.refused[0]
                            raise CommandError(f"{path}: {key}/{index}: {field}: {message}")
                        warnings += [f"{key}/{index} ({validated['id']}): {warning}"
                                     for warning in judged.warnings]
                    try:  # a held-out suite the project does not have (rules §18.2)
                        changed += profile_store(model=model, project=project,
                                                 validated=validated)[1]
                    except FieldsInvalid as exc:
                        raise CommandError(f"{path}: {key}/{index}: {exc}") from None
        count = len(document.get("profiles", [])) + len(document.get("outcome_profiles", []))
        for warning in warnings:
            self.stderr.write(f"warning: {warning}")
        self.stdout.write(f"{count} profile(s) in {path}, {changed} changed"
                          + (f", {len(warnings)} warning(s)" if warnings else ""))

    def _read(self, path: Path, fmt: str) -> Any:
        try:
            text = path.read_text()
        except OSError as exc:
            raise CommandError(f"{path}: {exc.strerror}") from None
        try:
            return yaml.safe_load(text) if fmt == "yaml" else json.loads(text)
        except (yaml.YAMLError, json.JSONDecodeError) as exc:
            raise CommandError(f"{path}: not valid {fmt.upper()}: {exc}") from None

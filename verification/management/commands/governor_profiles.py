"""Profiles kept in a file under version control: `load` is idempotent, `dump` round-trips."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from governor.domain.profiles import ProfileError
from governor.models import Project
from governor.services.profiles import profile_as_input, profile_save
from verification.models import VerifierProfile


class Command(BaseCommand):
    help = 'Load or dump a project\'s verifier profiles: {"profiles": [...]} as JSON or YAML.'

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
            profiles = [profile_as_input(p) for p in
                        VerifierProfile.objects.filter(project=project).order_by("profile_id")]
            text = (yaml.safe_dump({"profiles": profiles}, sort_keys=False) if fmt == "yaml"
                    else json.dumps({"profiles": profiles}, indent=2) + "\n")
            if path:
                Path(path).write_text(text)
            else:
                self.stdout.write(text, ending="")
            return
        if not path:
            raise CommandError("load needs a FILE")
        document = self._read(Path(path), fmt)
        if not isinstance(document, dict) or set(document) != {"profiles"} or not isinstance(
                document["profiles"], list):
            raise CommandError(f'{path}: expected exactly {{"profiles": [...]}}')
        changed = 0
        with transaction.atomic():  # all profiles or none
            for index, raw in enumerate(document["profiles"]):
                try:
                    _, did_change = profile_save(project=project, raw=raw)
                except ProfileError as exc:
                    raise CommandError(f"{path}: profiles/{index}: {exc}") from None
                changed += did_change
        self.stdout.write(f"{len(document['profiles'])} profile(s) in {path}, {changed} changed")

    def _read(self, path: Path, fmt: str) -> Any:
        try:
            text = path.read_text()
        except OSError as exc:
            raise CommandError(f"{path}: {exc.strerror}") from None
        try:
            return yaml.safe_load(text) if fmt == "yaml" else json.loads(text)
        except (yaml.YAMLError, json.JSONDecodeError) as exc:
            raise CommandError(f"{path}: not valid {fmt.upper()}: {exc}") from None

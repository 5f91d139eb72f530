"""Held-out suites kept in a directory under the operator's version control (rules §18.1):
`load` makes the directory the suite's current version (idempotent: the same bytes are the same
receipt), `dump` writes a version back as `load` reads it, `list` shows the project's suites."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governor.domain.heldout import CASES_FILE, SuiteError
from governor.models import Project
from governor.selectors.heldout import suite_version_cases_data, suite_version_files
from governor.services.heldout import suite_directory_load
from verification.models import HeldoutSuite, HeldoutSuiteVersion


def suite_dump(*, version: HeldoutSuiteVersion, directory: str | Path) -> int:
    """Write a suite version's files and its cases.jsonl into `directory` (empty or absent), as
    `load` reads them back: the number of files written."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise SuiteError([{"path": str(root), "message": "must be empty"}])
    written = 0
    for path, mode, data in suite_version_files(version):
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(0o755 if mode == "100755" else 0o644)
        written += 1
    if (cases := suite_version_cases_data(version)) is not None:
        (root / CASES_FILE).write_bytes(cases)
        written += 1
    return written


class Command(BaseCommand):
    help = ("Load a held-out suite from a directory (its files; cases in cases.jsonl at the "
            "top), dump one into an empty directory, or list a project's suites.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["load", "dump", "list"])
        parser.add_argument("directory", nargs="?")
        parser.add_argument("--project", required=True)
        parser.add_argument("--name", help="the suite's name (load, dump)")
        parser.add_argument("--receipt", help="dump: a version the suite had (default: current)")

    def handle(self, *args: Any, **options: Any) -> None:
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"no project {options['project']!r}")
        if options["action"] == "list":
            for suite in (HeldoutSuite.objects.filter(project=project).select_related("version")
                          .order_by("name")):
                version = suite.version
                if version is not None:
                    self.stdout.write(f"{suite.name} {version.receipt} {version.file_count} "
                                      f"file(s) {version.case_count} case(s)")
            return
        directory, name = options["directory"], options["name"]
        if not directory or not name:
            raise CommandError(f"{options['action']} needs a DIRECTORY and --name")
        if options["action"] == "load":
            try:
                version, created = suite_directory_load(project=project, name=name,
                                                        directory=directory)
            except SuiteError as exc:
                raise CommandError(f"{directory}: {exc}") from None
            self.stdout.write(f"{name} {version.receipt}: {version.file_count} file(s), "
                              f"{version.case_count} case(s), "
                              f"{'a new version' if created else 'unchanged'}")
            return
        version = self._version(project, name, options["receipt"])
        try:
            written = suite_dump(version=version, directory=directory)
        except SuiteError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{name} {version.receipt}: {written} file(s) written to {directory}")

    def _version(self, project: Project, name: str, receipt: str | None
                 ) -> HeldoutSuiteVersion:
        suite = HeldoutSuite.objects.filter(project=project, name=name).first()
        if suite is None or suite.version is None:
            raise CommandError(f"no held-out suite {name!r} in project {project.slug}")
        if receipt is None:
            return suite.version
        version = suite.versions.filter(receipt=receipt).first()
        if version is None:
            raise CommandError(f"suite {name!r} never had version {receipt}")
        return version

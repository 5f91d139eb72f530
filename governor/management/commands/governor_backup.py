from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governor.lib.backup import BackupError, backup_create


class Command(BaseCommand):
    help = ("Copy the database, the filesystem blob store and the secret key into a new "
            "directory, while the service runs (docs/operations.md, 'Backup and restore').")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("directory", type=Path, help="a directory that does not exist yet")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            made = backup_create(options["directory"])
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"backed up to {made.directory}: {made.database} database, "
                          f"{len(made.files)} files, blobs {made.blobs}")

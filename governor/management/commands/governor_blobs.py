from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from governor.services.blobs import blobs_collect
from governor.services.snapshots import snapshots_collect


class Command(BaseCommand):
    help = ("Collect the blob store's garbage: snapshots superseded for the grace period that "
            "nothing names, then blobs no kept workspace tree references and untouched for the "
            "grace period (GOVERNOR_BLOB_GRACE_SECONDS unless given).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["gc"])
        parser.add_argument("--grace-seconds", type=int, default=None,
                            help="spare blobs touched within this many seconds")

    def handle(self, *args: Any, **options: Any) -> None:
        grace = options["grace_seconds"]
        if grace is not None and grace < 0:
            self.stderr.write("--grace-seconds must be 0 or more")
            raise SystemExit(2)
        superseded = snapshots_collect(grace_seconds=grace)
        counts = blobs_collect(grace_seconds=grace)
        self.stdout.write(f"deleted {superseded['snapshots']} superseded snapshots "
                          f"({superseded['trees']} trees no longer named)")
        self.stdout.write(f"deleted {counts['deleted']} blobs ({counts['bytes']} bytes); "
                          f"kept {counts['kept']} referenced")

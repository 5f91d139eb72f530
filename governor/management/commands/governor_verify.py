from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governor import verify
from governor.selectors.keys import export_key_lines, public_keys


class Command(BaseCommand):
    help = ("Verify a session export offline (chain, receipts, signatures). With --server-keys, "
            "trust only this server's signing keys, not the keys the export carries.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("export")
        parser.add_argument("--server-keys", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        trusted = None
        if options["server_keys"]:
            key_lines = export_key_lines({key["keyid"] for key in public_keys()})
            trusted = dict(verify.parse_key_line(line) for line in key_lines)
        try:
            data = Path(options["export"]).read_bytes()
        except OSError as exc:
            raise CommandError(f"{options['export']}: {exc.strerror}") from None
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        report = verify.verify_export(lines, trusted)
        for warning in report.warnings:
            self.stderr.write(f"WARNING: {warning}")
        self.stdout.write(report.summary())
        if not report.ok:
            raise CommandError("verification failed")
        for decision in report.decisions:  # who decided what, passkey-signed or not
            self.stdout.write(f"  {decision}")

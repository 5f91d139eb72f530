from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from governor.selectors.keys import public_keys
from governor.services import keys


class Command(BaseCommand):
    help = "Show or rotate the server's Ed25519 signing keys."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["list", "rotate"])

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "rotate":
            key = keys.key_rotate()
            self.stdout.write(f"new active key {key.keyid}; older keys stay for verification")
            return
        keys.key_active()
        for public in public_keys():
            flag = "active" if public["active"] else "retired"
            self.stdout.write(f"{public['keyid']}\t{flag}\t{public['publicKey']}")

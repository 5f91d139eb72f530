from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from governor.models import AgentToken, Project
from governor.services.tokens import token_create, token_revoke


class Command(BaseCommand):
    help = "Create, list or revoke agent tokens."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="print a new token (shown once)")
        create.add_argument("--project", required=True)
        create.add_argument("--name", default="agent")
        create.add_argument("--kind", choices=["agent", "gate"], default="agent",
                            help="gate: a CI job's token that may only gate changes at the pull "
                                 "request (rules §19.2)")
        create.add_argument("--owner", required=True,
                            help="username of the person running the agent (required: they may "
                                 "not approve its proposals)")
        listing = sub.add_parser("list")
        listing.add_argument("--project", required=True)
        revoke = sub.add_parser("revoke")
        revoke.add_argument("prefix", help="the token's prefix as listed")

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "revoke":
            matches = list(AgentToken.objects.filter(prefix=options["prefix"]))
            if len(matches) != 1:
                raise CommandError(f"no single token with prefix {options['prefix']!r}")
            token_revoke(token=matches[0])
            self.stdout.write(f"revoked {matches[0]}")
            return
        project = Project.objects.filter(slug=options["project"]).first()
        if project is None:
            raise CommandError(f"no project {options['project']!r}")
        if action == "create":
            owner = get_user_model().objects.filter(username=options["owner"]).first()
            if owner is None:
                raise CommandError(f"--owner: no user {options['owner']!r} (every token has an "
                                   "owner: create the user first)")
            _, secret = token_create(project=project, name=options["name"], owner=owner,
                                     kind=options["kind"])
            self.stdout.write(secret)
        else:
            for token in project.tokens.order_by("created_at"):
                state = "revoked" if token.revoked_at else "active"
                self.stdout.write(f"{token.prefix}\t{token.name}\t{token.kind}\t{state}\t"
                                  f"{token.last_used_at}")

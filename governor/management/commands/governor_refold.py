from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governor.models import Session
from governor.selectors.projection import projection_differences
from governor.services.refold import session_refold


class Command(BaseCommand):
    help = "Compare (--check) or rebuild each session's projection from its event log."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--check", action="store_true", help="report differences only")
        parser.add_argument("--session", help="one session id (default: every session)")

    def handle(self, *args: Any, **options: Any) -> None:
        sessions = Session.objects.select_related("project").order_by("created_at")
        if options["session"]:
            sessions = sessions.filter(pk=options["session"])
        different = 0
        for session in sessions.iterator():
            wrong = projection_differences(session)
            if wrong and not options["check"] and not wrong[0].startswith("log"):
                wrong = session_refold(session=session)
            if wrong:
                different += 1
                verb = ("cannot fold" if wrong[0].startswith("log")
                        else "differs" if options["check"] else "rebuilt")
                self.stdout.write(f"{session.pk}: {verb}: {', '.join(wrong)}")
        self.stdout.write(f"{sessions.count()} session(s), {different} with differences")
        if options["check"] and different:
            raise CommandError("the projection differs from the fold of the log")

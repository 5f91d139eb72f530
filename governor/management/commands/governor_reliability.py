from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from governor.models import Project
from governor.services.facts import facts_rebuild


class Command(BaseCommand):
    help = ("Rebuild the reliability page's facts and day counts from the sessions and their "
            "logs (history older than them, or to check them). Stop the web and worker "
            "processes first: an event appended meanwhile could be counted twice.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("command", choices=["rebuild"])
        parser.add_argument("--project", help="one project's slug (default: every project)")

    def handle(self, *args: Any, **options: Any) -> None:
        projects = Project.objects.order_by("slug")
        if options["project"]:
            projects = projects.filter(slug=options["project"])
            if not projects.exists():
                raise CommandError(f"project: no project {options['project']!r}")
        for project in projects:
            sessions = facts_rebuild(project=project)
            self.stdout.write(f"{project.slug}: facts rebuilt from {sessions} session(s)")

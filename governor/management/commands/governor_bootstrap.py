from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from governor.services import keys
from governor.services.projects import bootstrap


class Command(BaseCommand):
    help = "First run only: create the demo project, an admin/reviewer login and an agent token."

    def handle(self, *args: Any, **options: Any) -> None:
        keys.key_active()
        created = bootstrap()
        if created is None:
            self.stdout.write("Bootstrap already done (demo project exists); nothing created.")
            return
        password = created.password or "(from GOVERNOR_ADMIN_PASSWORD)"
        rule = "=" * 78
        # A banner: the server's own log follows at once under `make run`, and these lines are
        # never shown again (the password and the token are stored only as hashes).
        self.stdout.write(self.style.WARNING(rule))
        self.stdout.write(self.style.WARNING("  SAVE THESE NOW: shown once, never again"))
        self.stdout.write(self.style.SUCCESS(f"  admin login:  {created.username} / {password}"))
        self.stdout.write(self.style.SUCCESS(
            f"  agent token:  {created.token}   (project {created.project.slug}, "
            f"owner {created.token_owner})"))
        self.stdout.write(f"  log in at {settings.PUBLIC_URL}/ (reviews) and "
                          f"{settings.PUBLIC_URL}/admin/")
        self.stdout.write(self.style.WARNING(rule))
        self.stdout.write(f"Agents of the demo project may bind workspaces under "
                          f"{created.workspace_root} (and GOVERNOR_WORKSPACE_ROOTS); review is "
                          f"required; a sample verifier profile 'readme-present' exists.")

from typing import Any

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
        self.stdout.write(self.style.SUCCESS("Bootstrap done. These secrets are shown once:"))
        self.stdout.write(f"  admin login:  {created.username} / {password}")
        self.stdout.write(f"  agent token:  {created.token}   (project {created.project.slug}, "
                          f"owner {created.token_owner})")
        self.stdout.write(f"Agents of the demo project may bind workspaces under "
                          f"{created.workspace_root} (and GOVERNOR_WORKSPACE_ROOTS); review is "
                          f"required; a sample verifier profile 'readme-present' exists.")

"""Projects, members and the one-time bootstrap of a fresh installation."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from governor.domain.profiles import validate_profile
from governor.models import Membership, Project, Role
from governor.services.profiles import profile_store
from governor.services.tokens import token_create
from verification.models import VerifierProfile

DEMO_SLUG = "demo"
DEMO_AGENT_USERNAME = "demo-agent"


def project_create(*, slug: str, name: str = "", review_mode: str = "required") -> Project:
    project = Project(slug=slug, name=name or slug, review_mode=review_mode)
    project.full_clean()
    project.save()
    return project


def project_set(*, project: Project, **changes: object) -> Project:
    for field, value in changes.items():
        setattr(project, field, value)
    project.full_clean()
    project.save(update_fields=list(changes))
    return project


SAMPLE_PROFILE = {
    "id": "readme-present",
    "description": "Sample profile: README.md exists in the workspace. Replace it with your "
                   "test suite in the admin.",
    "argv": ["/bin/sh", "-c", "test -f README.md"],
    "timeout_ms": 10_000,
}


@dataclass
class Bootstrap:
    project: Project
    username: str
    password: str | None  # None when it came from GOVERNOR_ADMIN_PASSWORD
    token: str
    workspace_root: str
    token_owner: str


def bootstrap() -> Bootstrap | None:
    """Once per installation: the demo project, an admin who reviews it, an agent token owned
    by a dedicated agent user.

    Returns None when the demo project already exists (nothing is created twice)."""
    if Project.objects.filter(slug=DEMO_SLUG).exists():
        return None
    given = os.environ.get("GOVERNOR_ADMIN_PASSWORD")
    password = given or secrets.token_urlsafe(12)
    # Without GOVERNOR_WORKSPACE_ROOTS the demo project still has somewhere to work: outside
    # var/, which holds the signing keys (governor.system_checks warns of a root inside it).
    root = settings.GOVERNOR_DEMO_WORKSPACE_ROOT
    root.mkdir(parents=True, exist_ok=True)
    with transaction.atomic():
        project = project_create(slug=DEMO_SLUG, name="Demo project")
        project_set(project=project, workspace_roots=[str(root)], server_workspace_roots=True)
        profile_store(model=VerifierProfile, project=project,
                      validated=validate_profile(SAMPLE_PROFILE))
        user_model = get_user_model()
        user = user_model.objects.filter(username="admin").first()
        if user is None:
            user = user_model.objects.create_superuser("admin", "admin@localhost", password)
        else:
            user.set_password(password)
            user.save(update_fields=["password"])
        for role in (Role.REVIEWER, Role.OPERATOR):
            Membership.objects.create(user=user, project=project, role=role)
        # The token's owner may not approve what it proposes: a user of its own (no password,
        # no login), so that the admin stays a reviewer of the demo agent.
        agent = (user_model.objects.filter(username=DEMO_AGENT_USERNAME).first()
                 or user_model.objects.create_user(DEMO_AGENT_USERNAME))
        _, secret = token_create(project=project, name="demo agent", owner=agent)
    return Bootstrap(project, "admin", None if given else password, secret, str(root),
                     DEMO_AGENT_USERNAME)

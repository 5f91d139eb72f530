"""Projects, members and the one-time bootstrap of a fresh installation."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction

from governor.models import Membership, Project, Role
from governor.services.tokens import token_create

DEMO_SLUG = "demo"


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


@dataclass
class Bootstrap:
    project: Project
    username: str
    password: str | None  # None when it came from GOVERNOR_ADMIN_PASSWORD
    token: str


def bootstrap() -> Bootstrap | None:
    """Once per installation: the demo project, an admin who reviews it, an agent token.

    Returns None when the demo project already exists (nothing is created twice)."""
    if Project.objects.filter(slug=DEMO_SLUG).exists():
        return None
    given = os.environ.get("GOVERNOR_ADMIN_PASSWORD")
    password = given or secrets.token_urlsafe(12)
    with transaction.atomic():
        project = project_create(slug=DEMO_SLUG, name="Demo project")
        user_model = get_user_model()
        user = user_model.objects.filter(username="admin").first()
        if user is None:
            user = user_model.objects.create_superuser("admin", "admin@localhost", password)
        else:
            user.set_password(password)
            user.save(update_fields=["password"])
        for role in (Role.REVIEWER, Role.OPERATOR):
            Membership.objects.create(user=user, project=project, role=role)
        _, secret = token_create(project=project, name="demo agent")
    return Bootstrap(project, "admin", None if given else password, secret)

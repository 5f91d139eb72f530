"""Who may read what: every object a caller names by id is loaded here, scoped to the caller.

One function per kind of object and caller. Anything the caller may not see is the same
`NotFound` as an id that does not exist (never a 403: an id outside the caller's projects must
not be told apart from a wrong one); pages answer it as 404, the API as its NOT_FOUND error."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from django.contrib.auth.models import User
from django.db.models import QuerySet

from governor.lib.errors import NotFound
from governor.models import AgentToken, Membership, Project, Role, Session
from reviews.models import Review
from verification.models import VerificationRun

MEMBER_ROLES = (Role.REVIEWER, Role.OPERATOR)


def _key(value: object, missing: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise NotFound(missing) from None


# --- agents (bearer token): their project's objects ---------------------------------------------

def session_for_token(token: AgentToken, session_id: object) -> Session:
    """The session if it belongs to the token's project."""
    missing = f"session {session_id} not found"
    session = Session.objects.filter(pk=_key(session_id, missing),
                                     project_id=token.project_id).first()
    if session is None:
        raise NotFound(missing)
    session.project = token.project  # the same row, read with the token: one query less
    return session


def run_for_token(token: AgentToken, run_id: object) -> VerificationRun:
    """The verification run if its session belongs to the token's project."""
    missing = f"verification {run_id} not found"
    run = (VerificationRun.objects.select_related("profile", "session")
           .filter(pk=_key(run_id, missing), session__project_id=token.project_id).first())
    if run is None:
        raise NotFound(missing)
    return run


# --- people (login): the projects they are members of --------------------------------------------

def member_projects(user: User) -> QuerySet[Project]:
    """The projects `user` reviews or operates."""
    return Project.objects.filter(memberships__user_id=user.pk,
                                  memberships__role__in=MEMBER_ROLES).distinct()


def project_for_member(user: User, slug: str) -> Project:
    """The project named `slug` if `user` reviews or operates it."""
    project = member_projects(user).filter(slug=slug).first()
    if project is None:
        raise NotFound(f"project {slug} not found")
    return project


def reviewed_projects(user: User) -> QuerySet[Membership, Mapping[str, object]]:
    """The ids of the projects `user` reviews (a subquery)."""
    return Membership.objects.filter(user_id=user.pk, role=Role.REVIEWER).values("project_id")


def is_reviewer(user: User, project_id: int) -> bool:
    return Membership.objects.filter(user_id=user.pk, project_id=project_id,
                                     role=Role.REVIEWER).exists()


def session_for_member(user: User, session_id: object) -> Session:
    """The session if `user` reviews or operates its project."""
    missing = "session not found"
    session = (Session.objects.select_related("project")
               .filter(pk=_key(session_id, missing), project__memberships__user_id=user.pk,
                       project__memberships__role__in=MEMBER_ROLES)
               .first())
    if session is None:
        raise NotFound(missing)
    return session


def review_for_reviewer(user: User, review_id: object) -> Review:
    """The review if `user` reviews its project."""
    missing = "review not found"
    review = (Review.objects.select_related("session__project")
              .filter(pk=_key(review_id, missing),
                      session__project__memberships__user_id=user.pk,
                      session__project__memberships__role=Role.REVIEWER).first())
    if review is None:
        raise NotFound(missing)
    return review

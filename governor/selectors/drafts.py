"""Drafting (rules §9), as the API and a begin read it: whether the project drafts, and which
contract a draft receipt already opened."""

from __future__ import annotations

from governor.domain import lifecycle
from governor.lib.errors import Conflict
from governor.models import AuthoringMode, Event, Project, Session


def drafting_required(project: Project) -> None:
    """Drafting is for projects in the auxiliary-model authoring mode; others answer 409."""
    if project.authoring_mode != AuthoringMode.AUXILIARY_MODEL:
        raise Conflict(f"this project's authoring mode is {project.authoring_mode!r} (claims "
                       "and checks are declared by the caller); drafting needs the mode "
                       "'auxiliary-model'")


def draft_receipt_used(session: Session, receipt: str) -> str | None:
    """The id of the contract this draft receipt already opened in the session, if any. A
    draft receipt names its session (the draft holds the session id and is only accepted as
    that session's latest draft), so the session's own contract events are the whole record."""
    for data in (Event.objects.filter(session=session, type=lifecycle.CONTRACT)
                 .values_list("data", flat=True)):
        if isinstance(data, dict) and data.get("draftReceipt") == receipt:
            return str(data.get("contractId"))
    return None

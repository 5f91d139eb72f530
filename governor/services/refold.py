"""Rebuilding a session's projection (`SessionState`) from its log (`manage.py governor_refold`)."""

from __future__ import annotations

from django.db import transaction

from governor.models import Session, SessionState
from governor.selectors.projection import projection_from_log, stored_projection


def session_refold(*, session: Session) -> list[str]:
    """Rebuild the projection from the log; returns the fields that were wrong."""
    with transaction.atomic():
        state = SessionState.objects.select_for_update().get(session=session)
        expected = projection_from_log(session)
        wrong = [name for name in expected if expected[name] != stored_projection(state)[name]]
        for name, value in expected.items():
            setattr(state, name, value)
        state.save(update_fields=[*expected, "updated_at"])
    return wrong

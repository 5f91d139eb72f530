"""Outcome contracts: the agent's view of the outcome profiles, observe now, the status."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router

from governor.api.auth import agent_token
from governor.api.errors import ERROR_RESPONSES
from governor.api.schemas import OutcomeProfilesOut, OutcomeStatusOut
from governor.selectors.access import session_for_token
from governor.selectors.outcomes import outcome_profiles_view, outcome_status
from governor.services import outcome_contracts as services

router = Router(tags=["outcomes"])


@router.get("/outcome-profiles", response={200: OutcomeProfilesOut, **ERROR_RESPONSES})
def outcome_profiles(request: HttpRequest) -> dict[str, Any]:
    return {"profiles": outcome_profiles_view(agent_token(request).project)}


@router.post("/sessions/{session_id}/outcome/observations",
             response={200: OutcomeStatusOut, **ERROR_RESPONSES})
def observe(request: HttpRequest, session_id: str) -> dict[str, Any]:
    """Observe now (at most once a minute: 429 with Retry-After)."""
    session = session_for_token(agent_token(request), session_id)
    return services.outcome_observe(session=session, trigger="agent")


@router.get("/sessions/{session_id}/outcome", response={200: OutcomeStatusOut, **ERROR_RESPONSES})
def outcome(request: HttpRequest, session_id: str) -> dict[str, Any]:
    session = session_for_token(agent_token(request), session_id)
    return outcome_status(session=session)

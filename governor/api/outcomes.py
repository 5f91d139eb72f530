"""Outcome contracts: the agent's view of the outcome profiles, observe now, the status."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Status

from governor.api.auth import AgentBearerAsync, agent_token
from governor.api.errors import ERROR_RESPONSES, WAIT_RESPONSES
from governor.api.schemas import OutcomeProfilesOut, OutcomeStatusOut
from governor.lib.errors import TooManyWaits
from governor.lib.notify import session_topic
from governor.lib.waits import long_poll, off_thread
from governor.models import Session
from governor.selectors.access import session_for_token
from governor.selectors.outcomes import outcome_profiles_view, outcome_status
from governor.services import outcome_contracts as services

router = Router(tags=["outcomes"])


@router.get("/outcome-profiles", response={200: OutcomeProfilesOut, **ERROR_RESPONSES})
def outcome_profiles(request: HttpRequest) -> dict[str, object]:
    return {"profiles": outcome_profiles_view(agent_token(request).project)}


@router.post("/sessions/{session_id}/outcome/observations",
             response={200: OutcomeStatusOut, 202: OutcomeStatusOut, **WAIT_RESPONSES},
             auth=AgentBearerAsync())
async def observe(request: HttpRequest, session_id: str,
                  wait: int = 0) -> Status[dict[str, object]]:
    """Ask for an observation now (at most once a minute: 429 with Retry-After); a worker runs
    the probe. 202 with `pending` while it has not answered; with `wait`, holds the request (at
    most 60 s, holding no server thread) until it has, and answers 200 with it. A token that
    holds all its waits already is answered at once (the observation is asked for all the
    same)."""
    token = agent_token(request)
    session = await off_thread(request, session_for_token, token, session_id)
    requested = await off_thread(request, _ask, session)

    def read() -> dict[str, Any]:
        return outcome_status(session=session)

    def settled(state: dict[str, Any]) -> bool:
        """Nothing on its way any more, or the agent's own observation recorded (a reviewer's
        request after it may still be pending)."""
        return "pending" not in state or any(
            o["trigger"] == "agent" and o["observedAt"] >= requested
            for o in state["observations"])

    state: dict[str, Any] | None = None
    if wait > 0:
        try:
            state = await long_poll(request, waiter=token, seconds=wait,
                                    topics=[session_topic(session.pk)], read=read,
                                    settled=settled)
        except TooManyWaits:  # asked for all the same: answered at once, the wait is not held
            state = None
    if state is None:
        state = await off_thread(request, read)
    return Status(200 if settled(state) else 202, state)


def _ask(session: Session) -> int:
    return services.outcome_observe(session=session, trigger="agent")


@router.get("/sessions/{session_id}/outcome", response={200: OutcomeStatusOut, **ERROR_RESPONSES})
def outcome(request: HttpRequest, session_id: str) -> dict[str, object]:
    session = session_for_token(agent_token(request), session_id)
    return outcome_status(session=session)

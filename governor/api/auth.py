"""Bearer-token authentication for agents, and the access helper for their sessions."""

from __future__ import annotations

import uuid

from django.http import HttpRequest
from ninja.security import HttpBearer

from governor.models import AgentToken, Session
from governor.services.errors import NotFound
from governor.services.tokens import token_authenticate


class AgentBearer(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> AgentToken | None:
        return token_authenticate(token)


def agent_token(request: HttpRequest) -> AgentToken:
    token = request.auth  # type: ignore[attr-defined]
    assert isinstance(token, AgentToken)
    return token


def session_for_token(token: AgentToken, session_id: str) -> Session:
    """The session if it belongs to the token's project; anything else is a 404, never a 403."""
    try:
        key = uuid.UUID(str(session_id))
    except ValueError:
        raise NotFound(f"session {session_id} not found") from None
    session = Session.objects.filter(pk=key, project_id=token.project_id).first()
    if session is None:
        raise NotFound(f"session {session_id} not found")
    return session

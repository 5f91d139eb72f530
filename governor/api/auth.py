"""Bearer-token authentication for agents."""

from __future__ import annotations

from django.http import HttpRequest
from ninja.security import HttpBearer

from governor.models import AgentToken
from governor.services.tokens import token_authenticate


class AgentBearer(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> AgentToken | None:
        return token_authenticate(token)


def agent_token(request: HttpRequest) -> AgentToken:
    token = getattr(request, "auth", None)  # set by AgentBearer
    assert isinstance(token, AgentToken)
    return token

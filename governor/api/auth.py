"""Bearer-token authentication for agents."""

from __future__ import annotations

from django.http import HttpRequest
from ninja.security import HttpBearer

from governor.models import AgentToken
from governor.services.tokens import token_authenticate
from governor.services.waits import off_thread


class AgentBearer(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> AgentToken | None:
        return token_authenticate(token)


class AgentBearerAsync(HttpBearer):
    """For the long polls' async views: the token is read off the request's thread
    (governor.services.waits.off_thread), so a waiting request holds no connection."""

    async def authenticate(self, request: HttpRequest, token: str) -> AgentToken | None:
        return await off_thread(request, token_authenticate, token)


def agent_token(request: HttpRequest) -> AgentToken:
    token = getattr(request, "auth", None)  # set by AgentBearer
    assert isinstance(token, AgentToken)
    return token

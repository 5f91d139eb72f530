"""Bearer-token authentication for agents."""

from __future__ import annotations

from django.http import HttpRequest
from ninja.security import HttpBearer

from governor.domain.canonical import loads_strict
from governor.lib.waits import off_thread
from governor.models import AgentToken
from governor.services.drafts import drafting_required
from governor.services.tokens import token_authenticate


class AgentBearer(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> AgentToken | None:
        return token_authenticate(token)


class AgentBearerAsync(HttpBearer):
    """For the long polls' async views: the token is read off the request's thread
    (governor.lib.waits.off_thread), so a waiting request holds no connection."""

    async def authenticate(self, request: HttpRequest, token: str) -> AgentToken | None:
        return await off_thread(request, token_authenticate, token)


class DraftingBearer(AgentBearer):
    """The drafting route's caller: an agent of a project that drafts with an auxiliary model.
    Any other project is answered 409 once the body parses as JSON (a body that does not is
    INVALID_JSON on every route) and before the schema checks it: a client's probe with an
    empty object tells whether the project drafts (governor_client `drafting_available`)."""

    def authenticate(self, request: HttpRequest, token: str) -> AgentToken | None:
        agent = token_authenticate(token)
        if agent is not None:
            loads_strict(request.body)
            drafting_required(agent.project)
        return agent


def agent_token(request: HttpRequest) -> AgentToken:
    token = getattr(request, "auth", None)  # set by AgentBearer
    assert isinstance(token, AgentToken)
    return token

"""Bearer-token authentication for agents."""

from __future__ import annotations

import structlog
from django.http import HttpRequest
from ninja.security import HttpBearer

from governor.domain.canonical import loads_strict
from governor.lib.waits import off_thread
from governor.models import AgentToken
from governor.selectors.drafts import drafting_required
from governor.services.tokens import token_authenticate


def _known(agent: AgentToken | None) -> AgentToken | None:
    """The request's log lines name the token's project and prefix (never the token)."""
    if agent is not None:
        structlog.contextvars.bind_contextvars(project=agent.project.slug,
                                               token_prefix=agent.prefix)
    return agent


class AgentBearer(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> AgentToken | None:
        return _known(token_authenticate(token))


class AgentBearerAsync(HttpBearer):
    """For the long polls' async views: the token is read off the request's thread
    (governor.lib.waits.off_thread), so a waiting request holds no connection."""

    async def authenticate(self, request: HttpRequest, token: str) -> AgentToken | None:
        return _known(await off_thread(request, token_authenticate, token))


class DraftingBearer(AgentBearer):
    """The drafting route's caller: an agent of a project that drafts with an auxiliary model.
    Any other project is answered 409 once the body parses as JSON (a body that does not is
    INVALID_JSON on every route) and before the schema checks it: a client's probe with an
    empty object tells whether the project drafts (governor_client `drafting_available`)."""

    def authenticate(self, request: HttpRequest, token: str) -> AgentToken | None:
        agent = _known(token_authenticate(token))
        if agent is not None:
            loads_strict(request.body)
            drafting_required(agent.project)
        return agent


def agent_token(request: HttpRequest) -> AgentToken:
    token = getattr(request, "auth", None)  # set by AgentBearer
    assert isinstance(token, AgentToken)
    return token

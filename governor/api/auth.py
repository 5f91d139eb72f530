"""Bearer-token authentication for agents."""

from __future__ import annotations

import structlog
from django.http import HttpRequest
from ninja.security import HttpBearer

from governor.domain.canonical import loads_strict
from governor.lib.errors import Forbidden
from governor.lib.waits import off_thread
from governor.models import AgentToken, TokenKind
from governor.selectors.drafts import drafting_required
from governor.services.tokens import token_authenticate


def _known(agent: AgentToken | None) -> AgentToken | None:
    """The request's log lines name the token's project and prefix (never the token)."""
    if agent is not None:
        structlog.contextvars.bind_contextvars(project=agent.project.slug,
                                               token_prefix=agent.prefix)
    return agent


GATE_ONLY = ("a gate token may only gate changes (POST /api/v1/changes), upload their blobs "
             "and read the project's certifications; this route takes an agent token")
AGENT_NOT_GATE = ("gating a change takes a gate token (rules §19.2): an agent's token cannot "
                  "gate its own work")


def _of_kind(agent: AgentToken | None, kinds: tuple[str, ...], refusal: str
             ) -> AgentToken | None:
    """The token when its kind is one of `kinds`; a valid token of another kind is refused
    (403), naming what it may do."""
    if agent is not None and agent.kind not in kinds:
        raise Forbidden(refusal, details=[{"path": "Authorization",
                                           "message": f"a {agent.kind} token"}])
    return agent


class AgentBearer(HttpBearer):
    """Every route's default: an agent token (a gate token is refused, 403)."""

    kinds: tuple[str, ...] = (TokenKind.AGENT,)
    refusal = GATE_ONLY

    def authenticate(self, request: HttpRequest, token: str) -> AgentToken | None:
        return _of_kind(_known(token_authenticate(token)), self.kinds, self.refusal)


class AgentOrGateBearer(AgentBearer):
    """Routes a gate token shares with agents: the project's settings, the blob store, the
    certifications (rules §19.2)."""

    kinds = (TokenKind.AGENT, TokenKind.GATE)


class GateBearer(AgentBearer):
    """The gate's routes (rules §19.2): a gate token only."""

    kinds = (TokenKind.GATE,)
    refusal = AGENT_NOT_GATE


class AgentBearerAsync(HttpBearer):
    """For the long polls' async views: the token is read off the request's thread
    (governor.lib.waits.off_thread), so a waiting request holds no connection."""

    kinds: tuple[str, ...] = (TokenKind.AGENT,)
    refusal = GATE_ONLY

    async def authenticate(self, request: HttpRequest, token: str) -> AgentToken | None:
        return _of_kind(_known(await off_thread(request, token_authenticate, token)),
                        self.kinds, self.refusal)


class GateBearerAsync(AgentBearerAsync):
    kinds = (TokenKind.GATE,)
    refusal = AGENT_NOT_GATE


class DraftingBearer(AgentBearer):
    """The drafting route's caller: an agent of a project that drafts with an auxiliary model.
    Any other project is answered 409 once the body parses as JSON (a body that does not is
    INVALID_JSON on every route) and before the schema checks it: a client's probe with an
    empty object tells whether the project drafts (governor_client `drafting_available`)."""

    def authenticate(self, request: HttpRequest, token: str) -> AgentToken | None:
        agent = _of_kind(_known(token_authenticate(token)), self.kinds, self.refusal)
        if agent is not None:
            loads_strict(request.body)
            drafting_required(agent.project)
        return agent


def agent_token(request: HttpRequest) -> AgentToken:
    token = getattr(request, "auth", None)  # set by AgentBearer
    assert isinstance(token, AgentToken)
    return token

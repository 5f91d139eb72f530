"""The agent API (django-ninja), mounted at /api/v1."""

from __future__ import annotations

from typing import Any, cast

from django.http import HttpRequest
from ninja import NinjaAPI
from ninja.parser import Parser

from governor.api import (
    blobs,
    certifications,
    changes,
    contracts,
    drafts,
    errors,
    keys,
    outcomes,
    sessions,
    verification,
)
from governor.api.auth import AgentBearer
from governor.domain.canonical import loads_strict


class StrictParser(Parser):
    """Bodies are lossless JSON (rules §1.2) before any schema sees them."""

    def parse_body(self, request: HttpRequest) -> dict[str, Any]:
        return cast(dict[str, Any], loads_strict(request.body))


api = NinjaAPI(
    title="Reliability Governor",
    version="1",
    description="Completion contracts for AI agents: evidence decides when the agent is done.",
    auth=AgentBearer(),
    parser=StrictParser(),
    urls_namespace="api",
)
errors.install(api)
api.add_router("", sessions.router)
api.add_router("", keys.router)
api.add_router("", contracts.router)
api.add_router("", verification.router)
api.add_router("", outcomes.router)
api.add_router("", drafts.router)
api.add_router("", blobs.router)
api.add_router("", certifications.router)
api.add_router("", changes.router)

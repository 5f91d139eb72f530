"""Auxiliary-model drafting (SEMANTICS §9): POST /sessions/{id}/drafts."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Status

from governor.api.auth import agent_token
from governor.api.bodies import json_body
from governor.api.errors import ERROR_RESPONSES, ErrorOut
from governor.services import drafts
from governor.services.access import session_for_token

router = Router(tags=["drafts"])

DRAFT_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {
            "type": "object",
            "required": ["contract_kind", "objective"],
            "properties": {
                "contract_kind": {"type": "string", "enum": ["general", "code"]},
                "objective": {"type": "string", "maxLength": 4096},
                "context": {"type": "string", "description": "Private background for the model; "
                            "never stored. The whole user block is capped by the route's "
                            "max_input_bytes."},
            },
            "additionalProperties": False,
        }}},
    }
}


@router.post("/sessions/{session_id}/drafts",
             response={201: dict, **ERROR_RESPONSES, 502: ErrorOut, 504: ErrorOut},
             openapi_extra=DRAFT_BODY)
def create_draft(request: HttpRequest, session_id: str) -> Status[dict[str, Any]]:
    """One streamed request to the project's drafting route. 201 `{draft, coverage, receipt,
    begin}`: `begin` is the wire body (with `draft_receipt`) that begins a contract matching the
    draft exactly; POST it to `/contracts` (general) or `/code-contracts` (code), adding `intent`
    when review is required."""
    session = session_for_token(agent_token(request), session_id)
    body, _ = json_body(request)
    return Status(201, drafts.draft_create(session=session, body=body))

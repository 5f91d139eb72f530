"""Auxiliary-model drafting (rules §9): POST /sessions/{id}/drafts."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Router, Status

from governor.api.auth import DraftingBearer, agent_token
from governor.api.errors import ERROR_RESPONSES, ErrorOut
from governor.api.schemas import DraftIn, DraftOut, sent
from governor.selectors.access import session_for_token
from governor.services import drafts

router = Router(tags=["drafts"])

@router.post("/sessions/{session_id}/drafts",
             response={201: DraftOut, **ERROR_RESPONSES, 502: ErrorOut, 504: ErrorOut},
             auth=DraftingBearer())
def create_draft(request: HttpRequest, session_id: str,
                 payload: DraftIn) -> Status[drafts.DraftCreated]:
    """One streamed request to the project's drafting route. 201 `{draft, coverage, receipt,
    begin}`: `begin` is the wire body (with `draft_receipt`) that begins a contract matching the
    draft exactly; POST it to `/contracts` (general) or `/code-contracts` (code), adding `intent`
    when review is required."""
    session = session_for_token(agent_token(request), session_id)
    return Status(201, drafts.draft_create(session=session, body=sent(payload)))

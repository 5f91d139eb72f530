"""Sessions and their logs: create, read, append, import, export."""

from __future__ import annotations

from typing import Annotated

from django.conf import settings
from django.http import HttpRequest, StreamingHttpResponse
from ninja import Router, Status
from ninja.params import functions as param_functions

from governor.api.auth import agent_token
from governor.api.bodies import event_texts
from governor.api.compressed import MAGIC, zstd_decompressed
from governor.api.errors import ERROR_RESPONSES, IMPORT_RESPONSES
from governor.api.schemas import AppendOut, EventPage, EventsIn, SessionCreateIn, SessionOut
from governor.domain.export import export_filename
from governor.lib.downloads import NDJSON, attachment
from governor.lib.errors import Invalid
from governor.selectors import sessions as selectors
from governor.selectors.access import session_for_token
from governor.services import sessions as session_services
from governor.services.events import events_append
from governor.services.exports import export_bytes

router = Router(tags=["sessions"])

@router.post("/sessions", response={201: SessionOut, 200: SessionOut, **ERROR_RESPONSES})
def create_session(request: HttpRequest, payload: SessionCreateIn) -> Status[dict[str, object]]:
    session, created = session_services.session_create(
        token=agent_token(request),
        workspace=payload.workspace.model_dump(),
        external_id=payload.external_id,
        header=payload.header,
    )
    return Status(201 if created else 200, selectors.session_out(session))


@router.post("/sessions/{session_id}/events", response={200: AppendOut, **ERROR_RESPONSES})
def append_events(
    request: HttpRequest, session_id: str, payload: EventsIn,
    idempotency_key: Annotated[str | None, param_functions.Header(
        alias="Idempotency-Key", max_length=200,
        description="the same batch under the same key returns the first answer, storing "
                    "nothing")] = None,
) -> dict[str, object]:
    """Each event is stored as the exact text it was sent as (its hash covers those bytes)."""
    token = agent_token(request)
    session = session_for_token(token, session_id)
    result = events_append(
        session=session, envelopes=payload.events, raws=event_texts(request, payload.events),
        expected_seq=payload.expected_seq, idempotency_key=idempotency_key or None,
        extra_types=frozenset(session.project.extra_event_types),
    )
    return result.as_dict()


@router.get("/sessions/{session_id}/events", response={200: EventPage, **ERROR_RESPONSES})
def read_events(
    request: HttpRequest, session_id: str, after: int = -1, limit: int = 500
) -> dict[str, object]:
    session = session_for_token(agent_token(request), session_id)
    return selectors.events_page(session, after=after, limit=limit)


def _import_text(request: HttpRequest) -> str:
    # Read the stream directly: a whole log may exceed the general body cap, not this one.
    raw = request.read(settings.GOVERNOR_MAX_IMPORT_BYTES + 1)
    if len(raw) > settings.GOVERNOR_MAX_IMPORT_BYTES:
        raise Invalid("log is larger than the import cap",
                      details=[{"path": "", "message": "body over the import cap"}])
    if raw[:4] == MAGIC or "zstd" in request.headers.get("Content-Encoding", ""):
        # The Harness ends a frame only after a whole line, and every line but the header
        # holds an event at least: a log within the event cap has at most that many frames.
        raw = zstd_decompressed(raw, cap=settings.GOVERNOR_MAX_IMPORT_BYTES,
                                max_frames=settings.GOVERNOR_MAX_IMPORT_EVENTS + 1)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Invalid("log is not valid UTF-8",
                      details=[{"path": "", "message": f"invalid UTF-8 ({exc.reason})"}]) from None


IMPORT_BODY = {"requestBody": {"required": True, "content": {
    "application/x-ndjson": {"schema": {"type": "string"}},
    "application/zstd": {"schema": {"type": "string", "format": "binary"}}}}}


@router.post("/sessions/import", response={201: SessionOut, **IMPORT_RESPONSES},
             openapi_extra=IMPORT_BODY)
def import_session(
    request: HttpRequest, external_id: str | None = None,
    workspace: Annotated[str | None, param_functions.Query(
        description="absolute workspace path under an allowed root")] = None,
) -> Status[dict[str, object]]:
    """A whole Harness log (NDJSON, plain or zstd) as a new session."""
    token = agent_token(request)
    external_id = external_id or None
    if external_id is not None and len(external_id) > 200:
        raise Invalid("external_id is longer than 200 characters",
                      details=[{"path": "external_id", "message": "at most 200 characters"}])
    session_services.import_slot_claim(token=token)  # before the body is read
    text = _import_text(request)
    session, _ = session_services.session_import(
        token=token, text=text,
        workspace={"kind": "path", "path": workspace} if workspace else None,
        external_id=external_id,
    )
    return Status(201, selectors.session_out(session))


@router.get("/sessions/{session_id}/export", response={200: None, **ERROR_RESPONSES})
def export_session(request: HttpRequest, session_id: str) -> StreamingHttpResponse:
    session = session_for_token(agent_token(request), session_id)
    return attachment(export_bytes(session), export_filename(str(session.id)), NDJSON)

"""rules §19: gate a change at the pull request (a `gate` token), and read (long-poll) it."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Status

from governor.api.auth import GateBearer, GateBearerAsync, agent_token
from governor.api.errors import ERROR_RESPONSES, WAIT_RESPONSES
from governor.api.schemas import ChangeIn, ChangeOut, sent
from governor.lib.notify import change_topic
from governor.lib.waits import long_poll, off_thread
from governor.models import ChangeState
from governor.selectors.changes import change_for_project, change_out
from governor.services.changes import change_create

router = Router(tags=["gate"])


@router.post("/changes", response={201: ChangeOut, **ERROR_RESPONSES}, auth=GateBearer())
def create(request: HttpRequest, payload: ChangeIn) -> Status[dict[str, Any]]:
    """A change to certify (rules §19.2): the base and head trees as snapshot entries (upload
    the blobs first: `POST /blobs/missing`, `PUT /blobs/{id}`), with their commits; the head
    may list only its `changes` over the base. The runs are queued; read the answer with
    `GET /changes/{id}?wait=`."""
    body: dict[str, Any] = {"base": sent(payload.base), "head": sent(payload.head)}
    if "observe" in payload.model_fields_set:
        body["observe"] = payload.observe
    change = change_create(token=agent_token(request), body=body)
    return Status(201, change_out(change))


@router.get("/changes/{change_id}", response={200: ChangeOut, **WAIT_RESPONSES},
            auth=GateBearerAsync())
async def read(request: HttpRequest, change_id: str, wait: int = 0) -> dict[str, Any]:
    """The change. With `wait`, holds the request (at most 60 s, holding no server thread)
    until it is decided."""
    token = agent_token(request)
    if wait > 0:
        return await long_poll(
            request, waiter=token, seconds=wait, topics=[change_topic(change_id)],
            read=lambda: change_for_project(token.project_id, change_id),
            settled=lambda now: now.state == ChangeState.FINISHED, answer=change_out)
    return await off_thread(request, lambda: change_out(
        change_for_project(token.project_id, change_id)))

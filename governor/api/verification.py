"""Trusted verification: list profiles, queue a run, read (long-poll) its result."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Status

from governor.api.auth import agent_token
from governor.api.bodies import json_body
from governor.api.errors import ERROR_RESPONSES, WAIT_RESPONSES
from governor.services import selectors
from governor.services.access import run_for_token, session_for_token
from governor.services.errors import Invalid
from governor.services.waits import long_poll
from verification import services
from verification.models import RunState, VerificationRun

router = Router(tags=["verification"])


@router.get("/code-profiles", response={200: dict, **ERROR_RESPONSES})
def code_profiles(request: HttpRequest) -> dict[str, Any]:
    return {"profiles": selectors.code_profiles(agent_token(request).project)}


RUN_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "required": ["profile"],
    "properties": {"profile": {"type": "string", "description": "a profile id"},
                   "tree": {"type": "string",
                            "description": "a snapshot session's latest snapshot"}}}}}}}


@router.post("/sessions/{session_id}/code-verifications",
             response={202: dict, **ERROR_RESPONSES}, openapi_extra=RUN_BODY)
def request_run(request: HttpRequest, session_id: str) -> Status[dict[str, Any]]:
    session = session_for_token(agent_token(request), session_id)
    # Any field but `profile` and a snapshot session's `tree` is ignored: no commands, options.
    body, _ = json_body(request)
    profile = body.get("profile")
    if not isinstance(profile, str) or not profile:
        raise Invalid("profile: required, the id of one of the project's verifier profiles",
                      details=[{"path": "profile", "message": "required"}])
    run = services.run_request(session=session, profile_id=profile, tree=body.get("tree"))
    return Status(202, {"id": str(run.pk), "state": run.state})


@router.get("/code-verifications/{run_id}", response={200: dict, **WAIT_RESPONSES})
def read_run(request: HttpRequest, run_id: str, wait: int = 0) -> dict[str, Any]:
    token = agent_token(request)
    run = run_for_token(token, run_id)

    def read() -> VerificationRun:
        if run.state != RunState.FINISHED:
            services.runs_expire_lost(run_id=run.pk)
            run.refresh_from_db()
        return run

    return long_poll(token, wait, read, lambda current: current.state == RunState.FINISHED
                     ).as_dict()

"""Trusted verification: list profiles, queue a run, read (long-poll) its result."""

from __future__ import annotations

from django.http import HttpRequest
from django.utils import timezone
from ninja import Router, Status

from governor.api.auth import AgentBearerAsync, agent_token
from governor.api.errors import ERROR_RESPONSES, WAIT_RESPONSES
from governor.api.schemas import ProfilesOut, RunIn, RunOut, RunQueued
from governor.lib.notify import run_topic
from governor.lib.waits import long_poll, off_thread
from governor.models import AgentToken
from governor.selectors import sessions as selectors
from governor.selectors.access import run_for_token, session_for_token
from governor.services import runs as services
from verification.models import RunState, VerificationRun

router = Router(tags=["verification"])


@router.get("/code-profiles", response={200: ProfilesOut, **ERROR_RESPONSES})
def code_profiles(request: HttpRequest) -> dict[str, object]:
    return {"profiles": selectors.code_profiles(agent_token(request).project)}


@router.post("/sessions/{session_id}/code-verifications",
             response={202: RunQueued, **ERROR_RESPONSES})
def request_run(request: HttpRequest, session_id: str, payload: RunIn) -> Status[dict[str, object]]:
    session = session_for_token(agent_token(request), session_id)
    run = services.run_request(session=session, profile_id=payload.profile, tree=payload.tree)
    return Status(202, {"id": str(run.pk), "state": run.state})


def _run_now(token: AgentToken, run_id: str) -> VerificationRun:
    """The run as it stands, after ending it if it was lost (the read that needs it; the
    periodic task does the same for every run)."""
    run = run_for_token(token, run_id)
    if run.state != RunState.FINISHED and services.runs_expire_lost(run_id=run.pk):
        run.refresh_from_db()
    return run


@router.get("/code-verifications/{run_id}", response={200: RunOut, **WAIT_RESPONSES},
            auth=AgentBearerAsync())
async def read_run(request: HttpRequest, run_id: str, wait: int = 0) -> dict[str, object]:
    """The run. With `wait`, holds the request (at most 60 s, holding no server thread) until
    it has finished."""
    token = agent_token(request)
    run = await off_thread(request, _run_now, token, run_id)
    if wait > 0:  # a slot even when it has finished: the cap counts every `wait`
        # A lost run ends when its lease or queue time runs out, which nobody announces: the
        # wait re-reads at that moment, and the read after it ends the run.
        def lost_in(now: VerificationRun) -> float | None:
            at = now.lost_at()
            return None if at is None else (at - timezone.now()).total_seconds()

        def settled(now: VerificationRun) -> bool:
            due = lost_in(now)
            return now.state == RunState.FINISHED or (due is not None and due <= 0)

        # Each read is the whole run: a wake-up's trip answers with what it read.
        return await long_poll(
            request, waiter=token, seconds=wait, topics=[run_topic(run.pk)],
            read=lambda: run_for_token(token, run_id), settled=settled, changes_in=lost_in,
            answer=lambda now: (now if now.state == RunState.FINISHED
                                else _run_now(token, run_id)).as_dict())
    return await off_thread(request, run.as_dict)

"""Contracts and their outcomes: assess, begin, verify, turn-stop, abstain, status, review."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils import timezone
from ninja import Router, Status

from governor.api.auth import AgentBearerAsync, agent_token
from governor.api.bodies import json_body
from governor.api.errors import ERROR_RESPONSES, WAIT_RESPONSES
from governor.domain import attempts
from governor.domain import contracts as contract_domain
from governor.models import Session
from governor.services import contracts, reviews, selectors
from governor.services.access import session_for_token
from governor.services.errors import Invalid
from governor.services.notify import review_topic
from governor.services.waits import long_poll, off_thread

router = Router(tags=["contracts"])

PROPOSAL_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {
            "type": "object",
            "required": ["objective", "claims", "checks"],
            "properties": {
                "objective": {"type": "string", "maxLength": contract_domain.MAX_OBJECTIVE_BYTES,
                              "description": "non-blank; at most "
                                             f"{contract_domain.MAX_OBJECTIVE_BYTES} UTF-8 bytes"},
                "claims": {"type": "array", "items": {"type": "object"}},
                "checks": {"type": "array", "items": {"type": "object"}},
                "max_attempts": {
                    "type": "integer", "minimum": 1, "maximum": contract_domain.MAX_ATTEMPTS_CAP,
                    "description": "the repair budget: 1..the project's cap (default "
                                   f"{contract_domain.DEFAULT_ATTEMPTS_CAP}, never above "
                                   f"{contract_domain.MAX_ATTEMPTS_CAP}); omitted: the cap"},
                "intent": {"type": "object"},
                "draft_receipt": {"type": "string"},
            },
            "additionalProperties": False,
        }}},
    }
}


def _session(request: HttpRequest, session_id: str) -> Session:
    return session_for_token(agent_token(request), session_id)


@router.get("/sessions/{session_id}", response={200: dict, **ERROR_RESPONSES})
def get_session(request: HttpRequest, session_id: str) -> dict[str, Any]:
    return selectors.session_status(_session(request, session_id))


@router.post("/sessions/{session_id}/assess", response={200: dict, **ERROR_RESPONSES},
             openapi_extra=PROPOSAL_BODY)
def assess(request: HttpRequest, session_id: str) -> dict[str, Any]:
    session = _session(request, session_id)
    body, _ = json_body(request)
    kind = "code" if request.GET.get("kind") == "code" else "general"
    return contracts.contract_assess(session=session, body=body, kind=kind)


def _begin(request: HttpRequest, session_id: str, kind: str) -> Status[dict[str, Any]]:
    token = agent_token(request)
    session = session_for_token(token, session_id)
    body, _ = json_body(request)
    tree = body.pop("tree", None)  # a snapshot session's start tree (§11.3)
    result = contracts.contract_begin(session=session, token=token, body=body, kind=kind,
                                      tree=tree)
    answer: dict[str, Any] = {"status": result.status, "assessment": result.assessment}
    if result.status == "review-required":
        return Status(200, answer)
    if result.status == "review-pending":
        assert result.review is not None
        answer["review"] = result.review
        answer["review_url"] = result.review["review_url"]
        return Status(202, answer)
    answer["contract"] = result.contract
    return Status(201, answer)


@router.post("/sessions/{session_id}/contracts",
             response={200: dict, 201: dict, 202: dict, **ERROR_RESPONSES},
             openapi_extra=PROPOSAL_BODY)
def begin(request: HttpRequest, session_id: str) -> Status[dict[str, Any]]:
    return _begin(request, session_id, "general")


@router.post("/sessions/{session_id}/code-contracts",
             response={200: dict, 201: dict, 202: dict, **ERROR_RESPONSES},
             openapi_extra=PROPOSAL_BODY)
def begin_code(request: HttpRequest, session_id: str) -> Status[dict[str, Any]]:
    return _begin(request, session_id, "code")


def _outcome(result: contracts.AttemptResult) -> dict[str, Any]:
    return {"decision": result.decision, "message": result.message, "attempt": result.attempt,
            "terminal": result.terminal}


@router.post("/sessions/{session_id}/verify", response={200: dict, **ERROR_RESPONSES})
def verify(request: HttpRequest, session_id: str) -> dict[str, Any]:
    session = _session(request, session_id)
    return _outcome(contracts.attempt_record(session=session, trigger="manual",
                                             tree=_tree_named(request)))


def _tree_named(request: HttpRequest) -> Any:
    """A snapshot session's `{"tree": …}` (§11.3); path sessions send no body."""
    if not request.body:
        return None
    body, _ = json_body(request)
    unknown = sorted(set(body) - {"tree"})
    if unknown:
        raise Invalid("; ".join(f"{key}: unknown field" for key in unknown),
                      details=[{"path": key, "message": "unknown field"} for key in unknown])
    return body.get("tree")


@router.post("/sessions/{session_id}/turn-stop", response={200: dict, **ERROR_RESPONSES})
def turn_stop(request: HttpRequest, session_id: str) -> dict[str, Any]:
    return contracts.turn_stop(session=_session(request, session_id), tree=_tree_named(request))


ABSTAIN_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "type": "object", "required": ["reason"], "additionalProperties": False,
    "properties": {"reason": {"type": "string", "minLength": 1,
                              "maxLength": attempts.MAX_ABSTAIN_REASON_CHARS}}}}}}}


@router.post("/sessions/{session_id}/abstain", response={200: dict, **ERROR_RESPONSES},
             openapi_extra=ABSTAIN_BODY)
def abstain(request: HttpRequest, session_id: str) -> dict[str, Any]:
    session = _session(request, session_id)
    body, _ = json_body(request)
    unknown = sorted(set(body) - {"reason"})
    if unknown:
        raise Invalid(f"unknown field(s) {unknown}",
                      details=[{"path": key, "message": "unknown field"} for key in unknown])
    return _outcome(contracts.contract_abstain(session=session, reason=body.get("reason")))


@router.get("/sessions/{session_id}/review", response={200: dict, **WAIT_RESPONSES},
            auth=AgentBearerAsync())
async def review_state(request: HttpRequest, session_id: str, wait: int = 0) -> dict[str, Any]:
    """The latest review of the session. With `wait`, holds the request (at most 60 s, holding
    no server thread) until the pending proposal is decided, expires or is replaced by the next
    stage's."""
    token = agent_token(request)
    session = await off_thread(request, session_for_token, token, session_id)
    review = await off_thread(request, reviews.review_latest, session)  # expires a due one
    if wait > 0:  # a slot even when nothing is pending: the cap counts every `wait`
        pending = review if review is not None and review.status == "pending" else None
        seen = (pending.pk, pending.status) if pending else None
        await long_poll(
            request, waiter=token, seconds=wait, topics=[review_topic(session.pk)],
            read=lambda: reviews.review_newest(session),
            settled=lambda latest: (pending is None or latest is None
                                    or (latest.pk, latest.status) != seen
                                    or timezone.now() >= pending.expires_at))
        if pending is not None:
            review = await off_thread(request, reviews.review_latest, session)
    return {"review": reviews.review_status(review) if review else None}


@router.delete("/sessions/{session_id}/review", response={200: dict, **ERROR_RESPONSES})
def withdraw_review(request: HttpRequest, session_id: str) -> dict[str, Any]:
    review = reviews.review_cancel(session=_session(request, session_id))
    return {"review": reviews.review_status(review)}

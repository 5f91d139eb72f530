"""Contracts and their outcomes: assess, begin, verify, turn-stop, abstain, status, review."""

from __future__ import annotations

from django.http import HttpRequest
from django.utils import timezone
from ninja import Router, Status
from ninja.params import functions as param_functions

from governor.api.auth import AgentBearerAsync, agent_token
from governor.api.errors import ERROR_RESPONSES, WAIT_RESPONSES
from governor.api.schemas import (
    AbstainIn,
    AssessOut,
    BeginIn,
    BeginOut,
    Outcome,
    ProposalIn,
    ReviewAnswer,
    SessionStatus,
    TreeIn,
    TurnStopOut,
    sent,
)
from governor.lib.notify import review_topic
from governor.lib.waits import long_poll, off_thread
from governor.models import AgentToken, Session
from governor.selectors import sessions as selectors
from governor.selectors.access import session_for_token
from governor.selectors.reviews import review_newest
from governor.services import contracts, reviews
from reviews.models import Review

router = Router(tags=["contracts"])


def _session(request: HttpRequest, session_id: str) -> Session:
    return session_for_token(agent_token(request), session_id)


@router.get("/sessions/{session_id}", response={200: SessionStatus, **ERROR_RESPONSES})
def get_session(request: HttpRequest, session_id: str) -> dict[str, object]:
    return selectors.session_status(_session(request, session_id))


@router.post("/sessions/{session_id}/assess", response={200: AssessOut, **ERROR_RESPONSES})
def assess(request: HttpRequest, session_id: str, payload: ProposalIn,
           kind: str = "general") -> dict[str, object]:
    """`?kind=code` assesses as a code contract (the required profiles' checks injected)."""
    session = _session(request, session_id)
    return contracts.contract_assess(session=session, body=sent(payload),
                                     kind="code" if kind == "code" else "general")


def _begin(request: HttpRequest, session_id: str, payload: BeginIn,
           kind: str) -> Status[dict[str, object]]:
    token = agent_token(request)
    session = session_for_token(token, session_id)
    body = sent(payload)
    tree = body.pop("tree", None)  # a snapshot session's start tree (§11.3)
    result = contracts.contract_begin(session=session, token=token, body=body, kind=kind,
                                      tree=tree)
    answer: dict[str, object] = {"status": result.status, "assessment": result.assessment}
    if result.status == "review-required":
        return Status(200, answer)
    if result.status == "review-pending":
        assert result.review is not None
        answer["review"] = result.review
        answer["review_url"] = result.review["review_url"]
        return Status(202, answer)
    answer["contract"] = result.contract
    return Status(201, answer)


BEGIN_RESPONSES = {200: BeginOut, 201: BeginOut, 202: BeginOut, **ERROR_RESPONSES}


@router.post("/sessions/{session_id}/contracts", response=BEGIN_RESPONSES)
def begin(request: HttpRequest, session_id: str, payload: BeginIn) -> Status[dict[str, object]]:
    return _begin(request, session_id, payload, "general")


@router.post("/sessions/{session_id}/code-contracts", response=BEGIN_RESPONSES)
def begin_code(request: HttpRequest, session_id: str,
               payload: BeginIn) -> Status[dict[str, object]]:
    return _begin(request, session_id, payload, "code")


def _outcome(result: contracts.AttemptResult) -> dict[str, object]:
    return {"decision": result.decision, "message": result.message, "attempt": result.attempt,
            "terminal": result.terminal}


@router.post("/sessions/{session_id}/verify", response={200: Outcome, **ERROR_RESPONSES})
def verify(request: HttpRequest, session_id: str,
           payload: TreeIn = param_functions.Body(None)) -> dict[str, object]:  # noqa: B008
    """A manual attempt. A snapshot session names its latest snapshot (`{"tree": …}`, §11.3);
    a path session sends no body."""
    token = agent_token(request)
    return _outcome(contracts.attempt_record(session=session_for_token(token, session_id),
                                             token=token, trigger="manual",
                                             tree=payload.tree if payload else None))


@router.post("/sessions/{session_id}/turn-stop", response={200: TurnStopOut, **ERROR_RESPONSES})
def turn_stop(request: HttpRequest, session_id: str,
              payload: TreeIn = param_functions.Body(None)) -> dict[str, object]:  # noqa: B008
    token = agent_token(request)
    return contracts.turn_stop(session=session_for_token(token, session_id), token=token,
                               tree=payload.tree if payload else None)


@router.post("/sessions/{session_id}/abstain", response={200: Outcome, **ERROR_RESPONSES})
def abstain(request: HttpRequest, session_id: str, payload: AbstainIn) -> dict[str, object]:
    session = _session(request, session_id)
    return _outcome(contracts.contract_abstain(session=session, reason=payload.reason))


def _session_and_review(token: AgentToken, session_id: str) -> tuple[Session, Review | None]:
    """The session and its latest review (as read: a due one is expired), in one trip off the
    event loop."""
    session = session_for_token(token, session_id)
    return session, review_newest(session)


def _review_answer(session: Session) -> dict[str, object]:
    """The review route's answer on the session's newest review. A review whose time passed
    is recorded as expired first, as verify does (issue 40): a delivery's expiry may end the
    contract, and the answer must say so — never the earlier revision request with "the
    contract is active again"."""
    reviews.review_expire_due(session)
    return selectors.review_answer(session, review_newest(session))


@router.get("/sessions/{session_id}/review", response={200: ReviewAnswer, **WAIT_RESPONSES},
            auth=AgentBearerAsync())
async def review_state(request: HttpRequest, session_id: str, wait: int = 0) -> dict[str, object]:
    """The latest review of the session. With `wait`, holds the request (at most 60 s, holding
    no server thread) until the pending proposal is decided, expires or is replaced by the next
    stage's."""
    token = agent_token(request)
    session, review = await off_thread(request, _session_and_review, token, session_id)
    if wait > 0:  # a slot even when nothing is pending: the cap counts every `wait`
        pending = review if review is not None and review.status == "pending" else None
        seen = (pending.pk, pending.status) if pending else None
        await long_poll(
            request, waiter=token, seconds=wait, topics=[review_topic(session.pk)],
            read=lambda: review_newest(session),
            settled=lambda latest: (pending is None or latest is None
                                    or (latest.pk, latest.status) != seen
                                    or timezone.now() >= pending.expires_at),
            answer=lambda latest: latest)
    # A due expiry recorded, then the review with its line comments, the contract and the
    # revision request read from the database: off the event loop.
    return await off_thread(request, _review_answer, session)


@router.delete("/sessions/{session_id}/review", response={200: ReviewAnswer, **ERROR_RESPONSES})
def withdraw_review(request: HttpRequest, session_id: str) -> dict[str, object]:
    session = _session(request, session_id)
    return selectors.review_answer(session, reviews.review_cancel(session=session))

"""Reads of sessions, one place each: the API and the pages answer from these and never from
each other. Nothing here writes."""

from __future__ import annotations

from typing import Any

from governor.domain import attempts, lifecycle
from governor.models import Event, Project, Session, SessionState
from governor.selectors.heldout import suite_agent_view
from governor.selectors.reviews import (
    decision_message,
    request_message,
    review_newest,
    review_pending,
    review_status,
    revision_to_answer,
    terminal_decision,
)
from reviews.models import Review, Stage, Status
from verification.models import HeldoutSuite, VerifierProfile

EVENTS_MAX_LIMIT = 5000


def lifecycle_of(state: SessionState) -> lifecycle.LifecycleState:
    """The session's folded lifecycle (rules §3), as its projection holds it."""
    return state.lifecycle or lifecycle.initial_state()


def session_out(session: Session) -> dict[str, object]:
    state = SessionState.objects.get(session=session)
    return {
        "id": str(session.id),
        "project": session.project.slug,
        "external_id": session.external_id,
        "workspace": {"kind": session.workspace_kind, "path": session.workspace_path},
        "imported": session.imported,
        "next_seq": state.next_seq,
        "head": state.head,
        "created_at": session.created_at.isoformat(),
    }


def _terminal(record: Any, attempts: list[Any]) -> dict[str, Any] | None:
    """The terminal, with `tree`: the tree its deciding attempt judged (§10.2; null when it has
    no attempt or the attempt recorded none)."""
    if record is None:
        return None
    data = record["data"]  # imported history may lack fields this server always writes
    deciding: dict[str, Any] = next(
        (attempt["data"] for attempt in attempts
         if attempt["data"].get("receipt") == data.get("attemptReceipt")), {})
    return {"status": data.get("status"), "reason": data.get("reason"),
            "receipt": data.get("receipt"), "contract_id": data.get("contractId"),
            "seq": record["seq"], "imported": record["imported"],
            "tree": deciding.get("tree")}


def session_status(session: Session) -> dict[str, Any]:
    """The session, its state, contract, attempts, terminal, latest review and draft."""
    state = SessionState.objects.defer("trace").get(session=session)
    folded = state.lifecycle or lifecycle.initial_state()
    pending = review_pending(session)
    latest = review_newest(session)
    contract = folded["contract"]
    return {
        **session_out(session),
        "state": lifecycle.state_name(folded, review_pending=pending is not None,
                                      delivery_pending=pending is not None
                                      and pending.stage == "delivery"),
        "contract": {**contract["data"], "imported": contract["imported"]} if contract else None,
        "attempts": [{**record["data"], "seq": record["seq"], "imported": record["imported"]}
                     for record in folded["attempts"]],
        "terminal": _terminal(folded["terminal"], folded["attempts"]),
        "review": review_status(latest) if latest else None,
        "latest_draft": folded["latestDraft"]["data"] if folded["latestDraft"] else None,
    }


def review_answer(session: Session, review: Review | None) -> dict[str, Any]:
    """The agent's review route (issue 40): the newest `review`; while the contract is open,
    the revision request of its delivered change the agent must answer (feedback and line
    comments); once a person's decision on the delivered change ended it, the terminal; and
    `message`, what the agent is to do about either."""
    answer: dict[str, Any] = {"review": review_status(review) if review else None,
                              "revision_request": None, "terminal": None, "message": None}
    folded = lifecycle_of(SessionState.objects.only("lifecycle").get(session=session))
    record, ended = folded["contract"], folded["terminal"]
    if record is None:
        return answer
    contract = record["data"]
    maximum = attempts.max_attempts_of(contract)
    if ended is None:
        request = revision_to_answer(session, contract["contractId"])
        if request is not None:
            answer["revision_request"] = review_status(request)
            if review is None or review.status != Status.PENDING:
                answer["message"] = request_message(request, used=len(folded["attempts"]),
                                                    maximum=maximum, unchanged=False)
        return answer
    terminal = ended["data"]
    decided = terminal_decision(terminal, [review]) if review is not None \
        and review.stage == Stage.DELIVERY else None
    if decided is not None:
        answer["terminal"] = terminal
        answer["message"] = decision_message(terminal, decided, maximum)
    return answer


def events_page(session: Session, *, after: int, limit: int) -> dict[str, object]:
    """Up to `limit` (1..5000) events after seq `after`, and where the next page starts."""
    limit = max(1, min(limit, EVENTS_MAX_LIMIT))
    rows = list(Event.objects.filter(session=session, seq__gt=after).order_by("seq")[:limit])
    events = [{"seq": e.seq, "type": e.type, "time": e.time, "origin": e.origin, "data": e.data,
               "prev": e.prev_hash, "hash": e.hash, "meta": e.meta} for e in rows]
    return {"events": events, "next_after": rows[-1].seq if len(rows) == limit else None}


def code_profiles(project: Project) -> list[dict[str, object]]:
    """What an agent may run, by name. Never the command or its environment; of a held-out
    suite it names (rules §18.1), only the suite's name, version receipt and counts."""
    suites = {suite.name: suite_agent_view(suite.version) for suite in
              HeldoutSuite.objects.filter(project=project, version__isnull=False)
              .select_related("version")
              if suite.version is not None}
    return [{"id": p.profile_id, "description": p.description, "required": p.required,
             "timeout_ms": p.timeout_ms, "sandbox_mode": p.sandbox_mode,
             "protected_paths": list(p.protected_paths), "report": p.report or None,
             "heldout": suites.get(p.heldout) if p.heldout else None,
             "oracle": suites.get(p.oracle) if p.oracle else None,
             "receipt": p.receipt}
            for p in VerifierProfile.objects.filter(project=project).order_by("profile_id")]

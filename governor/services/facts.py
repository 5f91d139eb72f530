"""The reliability page's facts (governor.domain.reliability), written with the governor event
each is read from, inside that event's transaction (`governor_event_append`)."""

from __future__ import annotations

import datetime
from typing import Any

from governor.domain import lifecycle, reliability
from governor.models import Event, ReliabilityFact, Session
from reviews.models import Review


def facts_record(*, session: Session, event: Event, attempts: int) -> None:
    """Write the facts of `event`, just appended to `session` (`attempts`: the current
    contract's attempts after it)."""
    proposed_ms = None
    if event.type in reliability.REVIEW_STAGES:
        proposed = (Review.objects.filter(session=session, receipt=event.data.get(
            "proposalReceipt")).order_by("-created_at").values_list("created_at", flat=True)
            .first())
        proposed_ms = None if proposed is None else int(proposed.timestamp() * 1000)
    facts = reliability.event_facts(event.type, event.data, attempts=attempts,
                                    proposed_ms=proposed_ms, at_ms=event.time)
    if not facts:
        return
    at = datetime.datetime.fromtimestamp(event.time / 1000, tz=datetime.UTC)
    ReliabilityFact.objects.bulk_create([
        ReliabilityFact(project_id=session.project_id, session=session,
                        token_id=session.created_by_id, event_seq=event.seq, at=at,
                        kind=fact.kind, name=fact.name[:256], status=fact.status[:32],
                        value=fact.value, contract_id=fact.contract_id[:128])
        for fact in facts])


def facts_rebuild(session: Session) -> int:
    """Write the facts of every governor event `session`'s log holds that has none yet (a
    session older than the facts, or after a restore): the same rows appending them wrote.
    Returns how many were written."""
    done = set(ReliabilityFact.objects.filter(session=session).values_list("event_seq",
                                                                            flat=True))
    folded: Any = lifecycle.initial_state()
    before = ReliabilityFact.objects.filter(session=session).count()
    for event in Event.objects.filter(session=session, origin="governor").order_by("seq"):
        folded = lifecycle.apply(folded, {"seq": event.seq, "type": event.type,
                                          "data": event.data})
        if event.seq not in done:
            facts_record(session=session, event=event, attempts=len(folded["attempts"]))
    return ReliabilityFact.objects.filter(session=session).count() - before

"""The reliability page's facts (governor.domain.reliability), written with the governor event
each is read from, inside that event's transaction (`governor_event_append`), and counted per
day (`ReliabilityDay`) in the same transaction."""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Iterable

from django.db import IntegrityError, transaction
from django.db.models import F

from governor.domain import lifecycle, reliability
from governor.models import Event, Origin, Project, ReliabilityDay, ReliabilityFact, Session
from reviews.models import Review

# Facts the page reads only through their day counts: everything but reports, which count in
# the period of the terminal they are about.
COUNTED = frozenset({"contract", "terminal", "check", "run", "review"})


def days_count(session: Session, day: datetime.date,
               groups: Iterable[tuple[str, str, str, bool]]) -> None:
    """Add one to the day's counter of each (kind, name, status, value is 1) group. Counters
    are updated in a fixed order (so two transactions never wait on each other's rows in a
    cycle); a counter that does not exist yet is created, and when a concurrent transaction
    created it first, updated."""
    counted = Counter(groups)
    for (kind, name, status, first), n in sorted(counted.items()):
        key = {"project_id": session.project_id, "day": day,
               "token_key": session.created_by_id or 0, "kind": kind, "name": name[:256],
               "status": status[:32]}
        if ReliabilityDay.objects.filter(**key).update(
                count=F("count") + n, first=F("first") + (n if first else 0)):
            continue
        try:
            with transaction.atomic():
                ReliabilityDay.objects.create(**key, count=n, first=n if first else 0)
        except IntegrityError:
            ReliabilityDay.objects.filter(**key).update(
                count=F("count") + n, first=F("first") + (n if first else 0))


def facts_session_started(session: Session) -> None:
    """Count a new session on the day it started (inside its creating transaction)."""
    days_count(session, session.created_at.astimezone(datetime.UTC).date(),
               [("session", "", "", False)])


def facts_record(*, session: Session, event: Event, attempts: int,
                 terminal_seq: int | None) -> None:
    """Write the facts of `event`, just appended to `session` (`attempts`: the current
    contract's attempts after it; `terminal_seq`: the seq of its terminal, if it has one)."""
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
    if event.type == reliability.OUTCOME_REPORT and terminal_seq is not None:
        ended_ms = (Event.objects.filter(session=session, seq=terminal_seq)
                    .values_list("time", flat=True).first())
        facts = [reliability.Fact(**{**vars(fact), "value": ended_ms}) for fact in facts]
    at = datetime.datetime.fromtimestamp(event.time / 1000, tz=datetime.UTC)
    ReliabilityFact.objects.bulk_create([
        ReliabilityFact(project_id=session.project_id, session=session,
                        token_id=session.created_by_id, event_seq=event.seq, at=at,
                        kind=fact.kind, name=fact.name[:256], status=fact.status[:32],
                        value=fact.value, contract_id=fact.contract_id[:128])
        for fact in facts])
    days_count(session, at.date(), [(fact.kind, fact.name, fact.status, fact.value == 1)
                                    for fact in facts if fact.kind in COUNTED])


def facts_rebuild(*, project: Project) -> int:
    """Write `project`'s facts and day counts again from its sessions and their logs, in one
    transaction: what appending every event wrote, for history older than the facts (or to
    prove the counters right). Run it with the service stopped: an event appended meanwhile
    could be counted twice. Returns the number of sessions read."""
    with transaction.atomic():
        ReliabilityFact.objects.filter(project=project).delete()
        ReliabilityDay.objects.filter(project=project).delete()
        sessions = Session.objects.filter(project=project, imported=False).order_by("created_at")
        for session in sessions.iterator():
            facts_session_started(session)
            folded = lifecycle.initial_state()
            for event in (Event.objects.filter(session=session, origin=Origin.GOVERNOR)
                          .order_by("seq").iterator()):
                folded = lifecycle.apply(folded, {"seq": event.seq, "type": event.type,
                                                  "data": event.data})
                terminal = folded["terminal"]
                facts_record(session=session, event=event, attempts=len(folded["attempts"]),
                             terminal_seq=None if terminal is None else terminal["seq"])
        return sessions.count()

"""Concurrent appends on PostgreSQL: contiguous seqs, one valid chain, nothing lost or doubled."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, connections

from governor.domain.chain import GENESIS, event_hash
from governor.models import Event, Project, Session
from governor.services.events import events_append
from governor.services.sessions import session_create
from governor.services.tokens import token_create

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

THREADS, PER_THREAD, BATCH = 8, 500, 10


def test_runs_on_postgresql() -> None:
    assert connection.vendor == "postgresql", "the postgres suite must run with DATABASE_URL set"


def test_eight_threads_appending_500_events_each_keep_one_contiguous_chain(
    tmp_path: Path, agent_owner: Any
) -> None:
    project = Project.objects.create(slug="load", name="Load", review_mode="off",
                                     workspace_roots=[str(tmp_path)])
    token, _ = token_create(project=project, name="load", owner=agent_owner)
    session, _ = session_create(token=token, workspace={"kind": "path", "path": str(tmp_path)})
    errors: list[BaseException] = []

    def worker(thread: int) -> None:
        try:
            own = Session.objects.get(pk=session.pk)
            for start in range(0, PER_THREAD, BATCH):
                batch: list[dict[str, Any]] = [
                    {"type": "x/load", "time": 0, "ignorable": True,
                     "data": {"thread": thread, "n": n}}
                    for n in range(start, start + BATCH)
                ]
                events_append(session=own, envelopes=batch)
        except BaseException as exc:  # noqa: BLE001 - reported to the main thread
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors

    rows = list(Event.objects.filter(session=session).order_by("seq"))
    assert [row.seq for row in rows] == list(range(THREADS * PER_THREAD))
    seen = {(row.data["thread"], row.data["n"]) for row in rows}
    assert seen == {(t, n) for t in range(THREADS) for n in range(PER_THREAD)}
    prev = GENESIS
    for row in rows:
        assert row.prev_hash == prev
        assert row.hash == event_hash(session=str(session.pk), seq=row.seq, type=row.type,
                                      time=row.time, origin=row.origin, data=row.data,
                                      prev=prev, meta=row.meta)
        prev = row.hash
    # Within one thread, its own events keep their order.
    for t in range(THREADS):
        mine = [row.data["n"] for row in rows if row.data["thread"] == t]
        assert mine == sorted(mine)


def test_database_trigger_fires_on_postgresql(tmp_path: Path, agent_owner: Any) -> None:
    from django.db import DatabaseError, transaction

    project = Project.objects.create(slug="trig", name="T", review_mode="off",
                                     workspace_roots=[str(tmp_path)])
    token, _ = token_create(project=project, name="t", owner=agent_owner)
    session, _ = session_create(token=token, workspace={"kind": "path", "path": str(tmp_path)})
    events_append(session=session, envelopes=[{"type": "x/a", "time": 0, "ignorable": True,
                                               "data": {}}])
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        Event.objects.filter(session=session).update(time=5)
    with (pytest.raises(DatabaseError, match="append-only"), transaction.atomic(),
          connection.cursor() as cursor):
        cursor.execute("DELETE FROM governor_event")

"""Issue 25 finding 5: an import held the database's one writer (SQLite) for its whole log — 200,000
events in one transaction while another project's session creation waited 11.9 s. It now writes
its events in chunks, each its own transaction, with the session hidden (`Session.importing`)
until the last one commits, and deleted with its events when the import fails."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import DatabaseError, connection, connections, transaction
from django.utils import timezone

from governor.models import Event, Project, Session, SessionState
from governor.services import events as event_services
from governor.services import sessions as session_services
from governor.services.sessions import session_create, session_import
from governor.services.tokens import token_create
from tests.api.test_import_caps import turns_log
from tests.conftest import AgentClient

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("flushable")]
CHUNK = 100
TRIGGERS = importlib.import_module("governor.migrations.0014_session_importing_and_import_slots")


@pytest.fixture
def flushable() -> Iterator[None]:
    """After the test its rows are flushed; SQLite's flush is a DELETE, which the append-only
    trigger refuses for a finished session's events (PostgreSQL's TRUNCATE fires no trigger):
    the events go first, with the trigger lifted for the moment."""
    yield
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER governor_event_no_delete")
            cursor.execute("DELETE FROM governor_event")
            cursor.execute(TRIGGERS.SQLITE[1])


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(event_services, "IMPORT_CHUNK", CHUNK, raising=False)
    return CHUNK


@pytest.fixture
def token(project: Project, agent_owner: Any) -> Any:
    return token_create(project=project, name="importer", owner=agent_owner)[0]


def do_import(token: Any, turns: int) -> Session:
    return session_import(token=token, text=turns_log(turns).decode(), workspace=None,
                          external_id="imported")[0]


def insert_calls(monkeypatch: pytest.MonkeyPatch, each: Callable[[int], None]) -> list[int]:
    """Every `_insert` of the import (the rows it writes), calling `each(call number)` first."""
    calls: list[int] = []
    insert = event_services._insert

    def counted(rows: list[dict[str, Any]]) -> None:
        calls.append(len(rows))
        each(len(calls))
        insert(rows)

    monkeypatch.setattr(event_services, "_insert", counted)
    return calls


def test_an_import_commits_its_events_in_bounded_chunks_and_appears_only_whole(
        token: Any, small_chunks: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each chunk is a transaction of its own, committed before the next chunk is written, and
    the session stays invisible to every read until the last one."""
    committed: list[int] = []
    seen: list[tuple[int, bool]] = []

    def look(call: int) -> None:
        seen.append((len(committed), Session.objects.exists()))
        transaction.on_commit(lambda: committed.append(call))

    calls = insert_calls(monkeypatch, look)
    session = do_import(token, turns=250)  # 500 events
    assert calls == [CHUNK] * 5
    assert seen == [(0, False), (1, False), (2, False), (3, False), (4, False)]
    assert committed == [1, 2, 3, 4, 5]
    assert Session.objects.get() == session and session.external_id == "imported"
    assert SessionState.objects.get(session=session).next_seq == 500


def test_another_projects_session_is_created_while_an_import_is_still_writing(
        token: Any, small_chunks: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
        agent_owner: Any) -> None:
    """Between two chunks of the import (two committed, the third's rows about to be made)
    another project's session is created at once; before, the import wrote every event in one
    transaction, and such a write waited for all of it (11.9 s for 200,000 events)."""
    other = Project.objects.create(slug="other", name="Other", review_mode="off",
                                   workspace_roots=[str(tmp_path)])
    other_token = token_create(project=other, name="other", owner=agent_owner)[0]
    between_chunks, created = threading.Event(), threading.Event()
    chain_rows, calls = event_services._chain_rows, []

    def pausing(*args: Any, **kwargs: Any) -> Any:
        calls.append(len(calls) + 1)
        if len(calls) == 3 and Event.objects.count() == 2 * CHUNK:
            between_chunks.set()
            created.wait(timeout=10)
        return chain_rows(*args, **kwargs)

    monkeypatch.setattr(event_services, "_chain_rows", pausing)
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(do_import(token, turns=250))
        except BaseException as exc:  # noqa: BLE001 - reported below
            outcome.append(exc)
        finally:
            connections.close_all()

    importer = threading.Thread(target=run)
    importer.start()
    try:
        while not between_chunks.wait(timeout=0.05) and importer.is_alive():
            pass
        assert between_chunks.is_set(), "the import never paused with chunks committed"
        try:
            session, _ = session_create(token=other_token, workspace={"kind": "snapshot"})
        except DatabaseError as exc:
            pytest.fail(f"the other project's write was blocked by the import: {exc}")
        finally:
            created.set()
        assert not outcome, "the import finished before the other session was created"
    finally:
        created.set()
        importer.join(timeout=60)
    assert isinstance(outcome[0], Session), outcome
    assert Session.objects.count() == 2 and session.project == other


def test_an_import_failing_after_two_committed_chunks_leaves_nothing(
        token: Any, small_chunks: int, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(call: int) -> None:
        if call == 3:
            raise DatabaseError("the disk is full")

    insert_calls(monkeypatch, fail)
    with pytest.raises(DatabaseError, match="the disk is full"):
        do_import(token, turns=250)
    assert not Session.all_objects.exists()
    assert not Event.objects.exists()
    assert not SessionState.objects.exists()


def test_an_import_whose_process_died_is_never_visible_and_is_purged_an_hour_later(
        token: Any, agent: AgentClient, small_chunks: int,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash mid-import (here: the clean-up never runs) leaves a session nobody can read,
    list or find by its external id; the periodic job deletes it once it is abandoned."""
    def die(call: int) -> None:
        if call == 3:
            raise SystemExit("killed")

    insert_calls(monkeypatch, die)
    monkeypatch.setattr(session_services, "sessions_discard_import", lambda session: None)
    with pytest.raises(SystemExit):
        do_import(token, turns=250)
    [half] = Session.all_objects.all()
    assert half.importing and half.external_id is None
    assert Event.objects.filter(session=half).count() == 2 * CHUNK
    assert not Session.objects.exists()
    assert agent.get(f"/sessions/{half.pk}").status_code == 404
    assert agent.get(f"/sessions/{half.pk}/export").status_code == 404
    monkeypatch.undo()
    assert session_services.sessions_purge_abandoned_imports() == 0  # it may still be running
    later = timezone.now() + timedelta(hours=1, seconds=1)
    assert session_services.sessions_purge_abandoned_imports(now=later) == 1
    assert not Session.all_objects.exists() and not Event.objects.exists()


@pytest.fixture
def finished(token: Any) -> Iterator[Session]:
    yield do_import(token, turns=2)


def test_the_database_keeps_a_finished_imports_events_and_never_reopens_it(
        finished: Session) -> None:
    """The append-only trigger lets only an unfinished import's events be deleted, and a
    finished import can never be made unfinished again (SQLite and PostgreSQL)."""
    with pytest.raises(DatabaseError, match="append-only"), connection.cursor() as cursor:
        cursor.execute("DELETE FROM governor_event")
    with pytest.raises(DatabaseError, match="cannot be reopened"):
        Session.all_objects.filter(pk=finished.pk).update(importing=True)
    assert Event.objects.filter(session=finished).count() == 4

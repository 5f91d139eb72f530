"""Recording a run's result (reliability items 8 and 10): output that a text column refuses, an
error while recording, and runs that will never report — each ends the run with its true
reason, never a pass. Runs on SQLite and, in `make test`'s second pass, on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from governor.models import Event, Project
from governor.services.runs import run_claim, runs_expire_lost
from tests.api.test_code_verification import add_profile
from tests.conftest import AgentClient
from verification.models import RunState, VerificationRun

pytestmark = pytest.mark.sandbox


def run_and_wait(agent: AgentClient, session_id: str, profile: str) -> dict[str, Any]:
    response = agent.post(f"/sessions/{session_id}/code-verifications", {"profile": profile})
    assert response.status_code == 202, response.content
    return agent.get(f"/code-verifications/{response.json()['id']}", wait=5).json()


def queued_run(project: Project, session_id: str) -> VerificationRun:
    """A run whose task message never reached a worker: the row exists, nothing runs it."""
    profile = add_profile(project, "unit-tests", ["/bin/true"])
    return VerificationRun.objects.create(session_id=session_id, profile=profile,
                                          profile_receipt=profile.receipt,
                                          definition=profile.definition())


def test_a_passing_run_whose_output_holds_a_nul_byte_is_recorded_as_a_pass(
    agent: AgentClient, project: Project, session: dict[str, Any]
) -> None:
    add_profile(project, "nul", ["/bin/sh", "-c", r"printf 'before\000after'"],
                show_output_to_reviewers=True)
    answer = run_and_wait(agent, session["id"], "nul")
    assert answer["state"] == "finished", answer
    assert answer["result"]["passed"] is True, answer
    stored = VerificationRun.objects.get(pk=answer["id"])
    assert stored.output_tail == "before\ufffdafter"  # as undecodable bytes are shown
    assert stored.detail == ""


@pytest.fixture
def output_tail_refused() -> Iterator[None]:
    """A real database fault while the result is recorded: a trigger refuses any output tail."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "CREATE FUNCTION refuse_output_tail() RETURNS trigger AS $$ BEGIN "
                "IF NEW.output_tail <> '' THEN RAISE EXCEPTION 'output tail refused'; END IF; "
                "RETURN NEW; END $$ LANGUAGE plpgsql")
            cursor.execute(
                "CREATE TRIGGER refuse_output_tail BEFORE UPDATE ON verification_verificationrun"
                " FOR EACH ROW EXECUTE FUNCTION refuse_output_tail()")
        else:
            cursor.execute(
                "CREATE TRIGGER refuse_output_tail BEFORE UPDATE ON verification_verificationrun"
                " WHEN NEW.output_tail <> '' BEGIN SELECT RAISE(ABORT, 'output tail refused');"
                " END")
    yield  # the test's transaction is rolled back afterwards, trigger included


def test_an_error_while_recording_ends_the_run_as_infrastructure_with_that_reason(
    agent: AgentClient, project: Project, session: dict[str, Any], output_tail_refused: None
) -> None:
    add_profile(project, "passes", ["/bin/sh", "-c", "echo all good"],
                show_output_to_reviewers=True)
    answer = run_and_wait(agent, session["id"], "passes")
    assert answer["state"] == "finished", answer
    assert (answer["result"]["passed"], answer["result"]["failureKind"]) == (
        False, "infrastructure")
    stored = VerificationRun.objects.get(pk=answer["id"])
    assert "could not be recorded" in stored.detail
    assert "output tail refused" in stored.detail
    assert "lost" not in stored.detail
    events = Event.objects.filter(session_id=session["id"], type="reliability/code-verification")
    assert [e.data["passed"] for e in events] == [False]  # the pass was never half-written


def test_a_queued_run_no_worker_took_ends_as_infrastructure_after_the_queue_timeout(
    agent: AgentClient, project: Project, session: dict[str, Any], settings: Any
) -> None:
    settings.GOVERNOR_RUN_QUEUE_TIMEOUT_SECONDS = 60
    run = queued_run(project, session["id"])
    assert runs_expire_lost() == 0  # young enough: a worker may still take it
    VerificationRun.objects.filter(pk=run.pk).update(
        created_at=timezone.now() - timedelta(seconds=61))
    answer = agent.get(f"/code-verifications/{run.pk}").json()  # reading it is enough
    assert answer["state"] == "finished"
    assert (answer["result"]["passed"], answer["result"]["failureKind"]) == (
        False, "infrastructure")
    run.refresh_from_db()
    assert "no worker took" in run.detail
    assert run_claim(str(run.pk)) is None  # a message that turns up late runs nothing


def test_a_running_run_whose_lease_lapsed_ends_as_infrastructure(
    project: Project, session: dict[str, Any]
) -> None:
    claimed = run_claim(str(queued_run(project, session["id"]).pk))
    assert claimed is not None and claimed.lease_expires_at is not None
    assert runs_expire_lost() == 0
    VerificationRun.objects.filter(pk=claimed.pk).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert runs_expire_lost() == 1
    claimed.refresh_from_db()
    assert claimed.state == RunState.FINISHED
    assert claimed.result is not None and claimed.result["failureKind"] == "infrastructure"
    assert "stopped renewing its lease" in claimed.detail


"""Tasks are queued by name once the transaction that wrote their row commits
(governor/lib/queue.py): a worker never looks for a run that is not there, and a rolled-back
request queues nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.db import transaction

from governor.domain.profiles import validate_profile
from governor.lib import queue
from governor.models import Session
from governor.services.profiles import profile_store
from governor.services.runs import run_request
from tests.conftest import AgentClient
from verification.models import VerificationRun, VerifierProfile

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[str, ...], bool]]:
    """Each task sent: its name, arguments, and whether its run row was committed by then."""
    calls: list[tuple[str, tuple[str, ...], bool]] = []

    def record(name: str, *args: str) -> None:
        committed = VerificationRun.objects.filter(pk=args[0]).exists()
        calls.append((name, args, committed))

    monkeypatch.setattr(queue, "task_send", record)
    return calls


def test_a_run_is_queued_only_once_its_row_is_committed(
        agent: AgentClient, workspace: Path, project: Any, sent: list[Any]) -> None:
    profile_store(model=VerifierProfile, project=project, validated=validate_profile(
        {"id": "unit-tests", "description": "t", "argv": ["/bin/true"]}))
    session = Session.objects.get(pk=agent.create_session(workspace)["id"])
    with transaction.atomic():
        run = run_request(session=session, profile_id="unit-tests")
        assert sent == []  # not before the commit
    assert sent == [("verification.tasks.run_verification", (str(run.pk),), True)]


def test_a_run_request_rolled_back_queues_nothing(
        agent: AgentClient, workspace: Path, project: Any, sent: list[Any]) -> None:
    profile_store(model=VerifierProfile, project=project, validated=validate_profile(
        {"id": "unit-tests", "description": "t", "argv": ["/bin/true"]}))
    session = Session.objects.get(pk=agent.create_session(workspace)["id"])
    with pytest.raises(RuntimeError), transaction.atomic():
        run_request(session=session, profile_id="unit-tests")
        raise RuntimeError("the request failed after queueing")
    assert sent == [] and not VerificationRun.objects.exists()

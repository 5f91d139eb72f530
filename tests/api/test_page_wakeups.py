"""The live parts of the pages wait on the same wake-ups as the API's long polls: the page's
request returns as soon as the transaction that changes what it shows commits (a proposal opened
or decided for the inbox, a run finishing for the timeline), and a lost wake-up costs at most
the re-check interval. Beside tests/api/test_wakeups.py, on PostgreSQL, as a second thread
commits while the request waits. (tests/pages/test_live_parts.py: access, refusals, the cap.)"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from governor.domain.verification import infrastructure_record
from governor.lib import notify
from governor.models import Project
from governor.services.reviews import review_cancel
from governor.services.runs import run_claim, run_finish
from reviews.models import Review
from tests.api.test_wakeups import later
from tests.conftest import AgentClient
from tests.pages import propose, reviewer_client
from verification.models import RunState, VerificationRun, VerifierProfile

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


@pytest.fixture
def rita(reviewer: Any, project: Project) -> Client:
    project.review_mode = "required"
    project.save(update_fields=["review_mode"])
    return reviewer_client("rita", "rita-password-1")


def live_url(client: Client, page: str, part: str) -> str:
    html = client.get(page).content.decode()
    found = re.search(rf'<section id="{part}"[^>]*hx-get="([^"]+)"', html)
    assert found, html
    return found.group(1).replace("&amp;", "&").replace("wait=30", "wait=10")


def timed(client: Client, address: str) -> tuple[Any, float]:
    started = time.monotonic()
    response = client.get(address, headers={"HX-Request": "true"})
    return response, time.monotonic() - started


def test_the_inbox_wakes_when_a_proposal_is_opened(
    rita: Client, agent: AgentClient, workspace: Path, settings: Any
) -> None:
    settings.GOVERNOR_WAIT_RECHECK_MS = 20_000  # only the wake-up can end this wait early
    address = live_url(rita, "/reviews/", "inbox-list")
    opened = later(0.3, lambda: propose(agent, workspace))
    response, seconds = timed(rita, address)
    opened.join()
    assert response.status_code == 200
    [review] = Review.objects.all()
    assert f'id="open-{review.pk}"' in response.content.decode()
    assert seconds < 3, seconds


def test_the_inbox_wakes_when_a_proposal_is_decided(
    rita: Client, agent: AgentClient, workspace: Path, settings: Any
) -> None:
    settings.GOVERNOR_WAIT_RECHECK_MS = 20_000
    session_id, review = propose(agent, workspace)
    address = live_url(rita, "/reviews/", "inbox-list")
    withdrawn = later(0.3, lambda: review_cancel(session=review.session))
    response, seconds = timed(rita, address)
    withdrawn.join()
    assert response.status_code == 200
    html = response.content.decode()
    assert f'id="open-{review.pk}"' not in html and "0 proposals waiting" in html
    assert seconds < 3, seconds


def test_a_lost_wakeup_costs_the_page_at_most_the_recheck_interval(
    rita: Client, agent: AgentClient, workspace: Path, settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings.GOVERNOR_WAIT_RECHECK_MS = 400
    monkeypatch.setattr(notify, "announce", lambda topic: None)  # every wake-up is lost
    address = live_url(rita, "/reviews/", "inbox-list")
    opened = later(0.3, lambda: propose(agent, workspace))
    response, seconds = timed(rita, address)
    opened.join()
    assert response.status_code == 200 and "1 proposal waiting" in response.content.decode()
    assert seconds < 0.3 + 0.4 + 1.5, seconds  # the proposal, one re-check, slack


def test_the_timeline_wakes_when_a_run_finishes(
    rita: Client, agent: AgentClient, workspace: Path, project: Project, settings: Any
) -> None:
    settings.GOVERNOR_WAIT_RECHECK_MS = 20_000
    session_id = agent.create_session(workspace)["id"]
    profile = VerifierProfile.objects.create(
        project=project, profile_id="unit-tests", description="pytest -q", argv=["pytest"],
        receipt="sha256:" + "3" * 64)
    run = VerificationRun.objects.create(session_id=session_id, profile=profile,
                                         profile_receipt=profile.receipt,
                                         definition={"sandboxMode": "read-only"})
    claimed = run_claim(str(run.pk))  # a worker runs it
    assert claimed is not None
    address = live_url(rita, f"/sessions/{session_id}/", "runs")
    finished = later(0.3, lambda: run_finish(
        run=claimed, record=infrastructure_record(claimed.definition["sandboxMode"],
                                                  baseline=claimed.baseline,
                                                  reason="the worker was lost")))
    response, seconds = timed(rita, address)
    finished.join()
    assert response.status_code == 200
    html = response.content.decode()
    assert VerificationRun.objects.get().state == RunState.FINISHED
    assert "queued or running" not in html and "infrastructure" in html
    assert seconds < 3, seconds

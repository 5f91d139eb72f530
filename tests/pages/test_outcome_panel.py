"""What people see of an outcome contract: the sentence in the evidence plan they approve, and
on the timeline the outcome panel — status, window, a server-drawn chart per metric readable
without colour, the observations — with an "Observe now" button for reviewers."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from governor.lib.clock import now_ms
from governor.models import Project
from governor.services import outcome_contracts as outcomes
from reviews.models import Review, Stage
from tests.conftest import AgentClient
from tests.outcomes import Answers, answers_in, certified, outcome_profile_saved
from tests.pages import press, propose, reviewer_client
from verification.models import OutcomeContract

SENTENCE = "after delivery: conversion ≥ 0.031 between day 1 and day 7; correlational"


@pytest.fixture
def answers(settings: Any) -> Iterator[Answers]:
    yield from answers_in(settings)


@pytest.fixture
def outcome_profile(project: Project) -> dict[str, Any]:
    return outcome_profile_saved(project)



def test_rule_3_the_reviewer_reads_the_outcome_in_words_in_the_evidence_plan(
        agent: AgentClient, workspace: Path, project: Project, reviewer: Any,
        outcome_profile: dict[str, Any], answers: Answers) -> None:
    project.review_mode = "required"
    project.save(update_fields=["review_mode"])
    answers.metrics(0.028)
    rita = reviewer_client("rita", "rita-password-1")
    _, intent = propose(agent, workspace, outcome_profile="checkout-conversion")
    assert press(rita, f"/reviews/{intent.pk}/", "Approve").status_code == 302
    evidence = Review.objects.get(session_id=intent.session_id, stage=Stage.EVIDENCE)
    assert evidence.proposal["outcome"]["summary"] == SENTENCE
    page = rita.get(f"/reviews/{evidence.pk}/").content.decode()
    assert SENTENCE in page and "correlated with" in page
    assert press(rita, f"/reviews/{evidence.pk}/", "Approve").status_code == 302
    contract = agent.get(f"/sessions/{intent.session_id}").json()["contract"]
    assert contract["outcomeProfile"]["receipt"] == evidence.proposal["outcome"]["receipt"]


def test_rule_6_the_timeline_shows_the_outcome_with_a_chart_and_a_reviewer_may_observe(
        agent: AgentClient, workspace: Path, reviewer: Any, outcome_profile: dict[str, Any],
        answers: Answers) -> None:
    session = certified(agent, workspace, answers)
    rita: Client = reviewer_client("rita", "rita-password-1")
    url = f"/sessions/{session['id']}/"
    page = rita.get(url).content.decode()
    assert "Outcome after delivery" in page and SENTENCE in page
    assert '<svg role="img"' in page and "baseline: 0.028 (dotted)" in page
    assert "target conversion-up: 0.031 (dashed)" in page
    assert 'id="outcome-status">observing<' in page
    assert '<button type="submit" id="observe-now" class="secondary">' in page  # as the others
    answers.metrics(0.05)
    response = press(rita, url, "Observe now")
    assert response.status_code == 302, response.content
    page = rita.get(url).content.decode()
    assert "<td data-label=\"By\">reviewer</td>" in page
    assert "conversion = 0.05" in page
    assert "observation 1: 0.05" in page  # the chart's point, named in words


def test_an_observation_on_its_way_is_said_and_the_panel_waits_for_the_worker(
        agent: AgentClient, workspace: Path, reviewer: Any, outcome_profile: dict[str, Any],
        answers: Answers) -> None:
    """Between the request and the worker's answer (here: a request no worker took yet) the
    panel says a worker is running the probe, offers no second press, and is a live part whose
    wait answers the fresh panel once the observation is recorded."""
    session = certified(agent, workspace, answers)
    row = OutcomeContract.objects.get(session_id=session["id"])
    at = now_ms()
    OutcomeContract.objects.filter(pk=row.pk).update(requested_at_ms=at)
    rita: Client = reviewer_client("rita", "rita-password-1")
    url = f"/sessions/{session['id']}/"
    page = rita.get(url).content.decode()
    assert "the probe is queued or running in a worker" in page
    assert "Observe now" not in page
    live = re.search(r'id="outcome"[^>]*hx-get="([^"]+)"', page)
    assert live, "the panel waits for the observation"
    waits = re.sub(r"wait=\d+", "wait=0", html.unescape(live.group(1)))  # no waiting here
    unchanged = rita.get(waits)
    assert unchanged.status_code == 204
    answers.metrics(0.05)
    outcomes.outcome_observation_take(contract_id=row.pk, trigger="reviewer", requested_at=at)
    fresh = rita.get(waits)
    assert fresh.status_code == 200
    panel = fresh.content.decode()
    assert "conversion = 0.05" in panel and "Observe now" in panel
    assert "queued or running in a worker" not in panel and "hx-get" not in panel
    assert OutcomeContract.objects.get(pk=row.pk).requested_at_ms is None


def test_rule_4_a_request_the_log_answers_is_not_pending_though_the_row_read_first_says_so(
        agent: AgentClient, workspace: Path, outcome_profile: dict[str, Any],
        answers: Answers) -> None:
    """The status reads the outcome row, then the log: a worker committing between the two
    reads leaves a row that still says requested beside the observation that answers it
    (seen in CI as `pending` next to the agent's observation). The log decides."""
    session = certified(agent, workspace, answers)
    row = OutcomeContract.objects.get(session_id=session["id"])
    at = now_ms()
    outcomes.outcome_observation_take(contract_id=row.pk, trigger="agent", requested_at=at)
    OutcomeContract.objects.filter(pk=row.pk).update(requested_at_ms=at)  # the row read first
    status = agent.get(f"/sessions/{session['id']}/outcome").json()
    assert [o["trigger"] for o in status["observations"]] == ["agent"]
    assert status.get("pending") is None
    again = status["observations"][0]["observedAt"] + 1  # asked again after it
    OutcomeContract.objects.filter(pk=row.pk).update(requested_at_ms=again)
    assert agent.get(f"/sessions/{session['id']}/outcome").json()["pending"] == {
        "requestedAt": again}


def test_an_agent_token_cannot_press_observe_and_an_outsider_sees_no_session(
        agent: AgentClient, workspace: Path, outcome_profile: dict[str, Any],
        answers: Answers) -> None:
    session = certified(agent, workspace, answers)
    anonymous = Client(enforce_csrf_checks=True)
    response = anonymous.post(f"/sessions/{session['id']}/outcome/observe")
    assert response.status_code in (302, 403)
    assert agent.get(f"/sessions/{session['id']}/outcome").json()["observations"] == []

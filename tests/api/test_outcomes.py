"""Outcome contracts through the API as an agent sees them: profiles, binding at begin, the
baseline at activation, observation (scheduled, by the agent, rate-limited), the status rules
with the clock given, signed outcome terminals, and exports governor.verify checks.

Every probe here is a real one: `cat` in the verifier sandbox, reading a file the test writes in
the operator's data directory (GOVERNOR_OUTCOME_DATA_DIR, bound read-only at /outcome-data)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from governor.domain.canonical import loads_strict
from governor.domain.outcomes import DAY_MS, HOUR_MS, validate_outcome_profile
from governor.lib.clock import now_ms
from governor.lib.waits import slot_claim, slot_release
from governor.models import AgentToken, Event, Project, Session
from governor.selectors.outcomes import outcome_status
from governor.services import outcome_contracts as outcomes
from governor.services.profiles import profile_store
from governor.verify import verify_export
from reviews.notifications import webhook_signature
from tests.api import documented_verifier
from tests.api.test_contracts import readme_contract
from tests.api.test_export_and_verify import export_text
from tests.api.test_notifications import Receiver, receiver  # noqa: F401 - the fixture
from tests.conftest import AgentClient
from tests.outcomes import PROFILE, Answers, answers_in, certified, outcome_profile_saved
from verification.models import OutcomeContract, OutcomeProfile


@pytest.fixture
def answers(settings: Any) -> Iterator[Answers]:
    yield from answers_in(settings)


@pytest.fixture
def outcome_profile(project: Project) -> dict[str, Any]:
    return outcome_profile_saved(project)



def types(session_id: str) -> list[str]:
    return list(Event.objects.filter(session_id=session_id).order_by("seq")
                .values_list("type", flat=True))


def test_rule_6_the_agent_sees_outcome_profiles_without_command_or_environment(
        agent: AgentClient, outcome_profile: dict[str, Any]) -> None:
    response = agent.get("/outcome-profiles")
    assert response.status_code == 200, response.content
    [view] = response.json()["profiles"]
    assert view["id"] == "checkout-conversion"
    assert view["summary"] == ("after delivery: conversion ≥ 0.031 between day 1 and day 7; "
                               "correlational")
    assert "/usr/bin/cat" not in response.text and "argv" not in view and "network" not in view


def test_rule_3_an_unknown_outcome_profile_is_refused_naming_it_and_nothing_is_written(
        agent: AgentClient, session: dict[str, Any], outcome_profile: dict[str, Any]) -> None:
    before = types(session["id"])
    response = agent.post(f"/sessions/{session['id']}/contracts",
                          readme_contract(outcome_profile="revenue-up"))
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert "revenue-up" in error["message"]
    assert any(d["path"] == "outcome_profile" for d in error["details"])
    assert types(session["id"]) == before
    assert not OutcomeContract.objects.exists()


def test_rule_3_the_contract_binds_the_profile_and_a_baseline_probe_runs_at_activation(
        agent: AgentClient, session: dict[str, Any], outcome_profile: dict[str, Any],
        answers: Answers) -> None:
    answers.metrics(0.028)
    response = agent.post(f"/sessions/{session['id']}/contracts",
                          readme_contract(outcome_profile="checkout-conversion"))
    assert response.status_code == 201, response.content
    contract = response.json()["contract"]
    assert contract["outcomeProfile"]["id"] == "checkout-conversion"
    assert contract["outcomeProfile"]["receipt"].startswith("sha256:")
    row = OutcomeContract.objects.get()
    assert row.status == "bound" and row.baseline["passed"] is True
    assert row.baseline["metrics"] == {"conversion": 0.028}
    status = agent.get(f"/sessions/{session['id']}/outcome").json()
    assert status["status"] == "bound"


def test_rule_4_certification_starts_the_window_and_the_answer_says_delivery_certified(
        agent: AgentClient, workspace: Path, outcome_profile: dict[str, Any],
        answers: Answers) -> None:
    session = certified(agent, workspace, answers)
    message = session["verify"]["message"]
    assert "delivery-certified; outcome: observing" in message
    assert "Do not claim the business goal" in message
    record = Event.objects.get(session_id=session["id"], type="reliability/outcome-contract").data
    assert record["baseline"]["metrics"] == {"conversion": 0.028}
    assert record["deadlineAt"] - record["startedAt"] == 7 * DAY_MS
    assert record["notBeforeAt"] - record["startedAt"] == DAY_MS
    stop = agent.post(f"/sessions/{session['id']}/turn-stop").json()
    assert stop["action"] == "allow" and "delivery-certified; outcome: observing" in stop[
        "message"]


def test_rule_4_the_agent_may_observe_once_a_minute(
        agent: AgentClient, workspace: Path, outcome_profile: dict[str, Any],
        answers: Answers) -> None:
    session = certified(agent, workspace, answers)
    answers.metrics(0.05)
    first = agent.post(f"/sessions/{session['id']}/outcome/observations")
    assert first.status_code == 200, first.content
    assert first.json()["status"] == "observing"  # before day 1: judges nothing yet
    [observation] = first.json()["observations"]
    assert observation["trigger"] == "agent" and observation["result"]["passed"] is True
    again = agent.post(f"/sessions/{session['id']}/outcome/observations")
    assert again.status_code == 429, again.content
    assert 1 <= int(again["Retry-After"]) <= 60
    assert len(agent.get(f"/sessions/{session['id']}/outcome").json()["observations"]) == 1


def _row(session: dict[str, Any]) -> OutcomeContract:
    return OutcomeContract.objects.get(session_id=session["id"])


def test_rule_4_an_asked_for_observation_moves_the_scheduled_one_a_period_on(
        agent: AgentClient, workspace: Path, outcome_profile: dict[str, Any],
        answers: Answers) -> None:
    """Issue 40: the schedule observed again 11 s after the agent's own request. The period
    counts from the last observation, whoever asked."""
    session = certified(agent, workspace, answers)
    row = _row(session)
    assert row.started_at_ms is not None and row.next_observe_at_ms is not None
    day2 = row.started_at_ms + 2 * DAY_MS
    OutcomeContract.objects.filter(pk=row.pk).update(next_observe_at_ms=day2 + 11_000)
    answers.metrics(0.029, as_of=day2)
    outcomes.outcome_observation_take(contract_id=row.pk, trigger="agent",
                                      requested_at=day2, now=day2)
    assert _row(session).next_observe_at_ms == day2 + HOUR_MS
    assert outcomes.outcomes_observe_due(now=day2 + 11_000) == 0  # not 11 s later
    answers.metrics(0.029, as_of=day2 + HOUR_MS)
    assert outcomes.outcomes_observe_due(now=day2 + HOUR_MS) == 1
    assert [o["trigger"] for o in outcome_status(session=Session.objects.get(pk=session["id"]))[
        "observations"]] == ["agent", "schedule"]


def test_rule_5_observations_walk_from_observing_to_achieved_with_a_signed_terminal(
        agent: AgentClient, workspace: Path, outcome_profile: dict[str, Any],
        answers: Answers) -> None:
    session = certified(agent, workspace, answers)
    row = _row(session)
    assert row.started_at_ms is not None
    model = Session.objects.get(pk=session["id"])
    day2 = row.started_at_ms + 2 * DAY_MS
    answers.metrics(0.029, as_of=day2)
    assert outcomes.outcomes_observe_due(now=day2) == 1
    assert outcome_status(session=model)["status"] == "observing"
    answers.metrics(0.034, as_of=day2 + HOUR_MS)
    assert outcomes.outcomes_observe_due(now=day2 + HOUR_MS) == 1
    status = agent.get(f"/sessions/{session['id']}/outcome").json()
    assert status["status"] == "achieved"
    terminal = status["terminal"]
    assert terminal["status"] == "achieved" and terminal["causalClaimPermitted"] is False
    assert "correlated with" in terminal["reason"] and "caused" not in terminal["reason"]
    assert "delivery-certified; outcome: achieved" in status["message"]
    assert outcomes.outcomes_observe_due(now=day2 + 2 * HOUR_MS) == 0  # terminal: no more
    report = verify_export(export_text(agent, session["id"]).splitlines())
    assert report.ok, report.failure


def test_rule_5_missed_at_the_deadline(agent: AgentClient, workspace: Path,
                                       outcome_profile: dict[str, Any], answers: Answers) -> None:
    session = certified(agent, workspace, answers)
    row = _row(session)
    assert row.deadline_at_ms is not None
    answers.metrics(0.02, as_of=row.deadline_at_ms)
    outcomes.outcomes_observe_due(now=row.deadline_at_ms)
    status = outcome_status(session=Session.objects.get(pk=session["id"]))
    assert status["status"] == "missed" and status["terminal"]["status"] == "missed"


def test_rule_5_the_deadline_with_only_failed_probes_is_expired(
        agent: AgentClient, workspace: Path, outcome_profile: dict[str, Any],
        answers: Answers) -> None:
    session = certified(agent, workspace, answers)
    row = _row(session)
    assert row.started_at_ms is not None and row.deadline_at_ms is not None
    answers.write("")  # nothing: invalid-output
    outcomes.outcomes_observe_due(now=row.started_at_ms + 2 * DAY_MS)
    model = Session.objects.get(pk=session["id"])
    [failed] = outcome_status(session=model)["observations"]
    assert failed["result"]["failureKind"] == "invalid-output"
    OutcomeContract.objects.filter(pk=row.pk).update(next_observe_at_ms=row.deadline_at_ms)
    outcomes.outcomes_observe_due(now=row.deadline_at_ms + 1)
    assert outcome_status(session=model)["status"] == "expired"


@pytest.mark.parametrize(("stdout", "why"), [
    ('{"dataAsOf": NOW, "metrics": {"conversion": 0.04}}'
     '{"dataAsOf": NOW, "metrics": {"conversion": 0.04}}', "exactly one JSON object"),
    ('{"dataAsOf": FUTURE, "metrics": {"conversion": 0.04}}', "future"),
    ('{"dataAsOf": NOW, "metrics": {"conversion": 0.04, "revenue": 3}}', "undeclared"),
    ('{"dataAsOf": NOW, "metrics": {"conversion": NaN}}', "NaN"),
    ("", "empty"),
])
def test_rule_2_a_probe_printing_anything_but_one_valid_object_is_invalid_output(
        agent: AgentClient, workspace: Path, outcome_profile: dict[str, Any],
        answers: Answers, stdout: str, why: str) -> None:
    session = certified(agent, workspace, answers)
    at = now_ms()
    answers.write(stdout.replace("FUTURE", str(at + 10 * 60_000)).replace("NOW", str(at)))
    response = agent.post(f"/sessions/{session['id']}/outcome/observations")
    assert response.status_code == 200, response.content
    [observation] = response.json()["observations"]
    assert observation["result"]["passed"] is False
    assert observation["result"]["failureKind"] == "invalid-output"
    assert why in observation["result"]["problem"]
    assert "conversion" not in json.dumps(observation["result"]["stdout"])  # never the output


def test_rule_4_a_profile_edited_after_binding_makes_observations_refused(
        agent: AgentClient, workspace: Path, project: Project,
        outcome_profile: dict[str, Any], answers: Answers) -> None:
    session = certified(agent, workspace, answers)
    profile_store(model=OutcomeProfile, project=project, validated=validate_outcome_profile({
        **PROFILE, "target": {**PROFILE["target"], "value": 0.001}}))
    answers.metrics(0.5)
    response = agent.post(f"/sessions/{session['id']}/outcome/observations")
    assert response.status_code == 409, response.content
    assert "edited after it was bound" in response.json()["error"]["message"]
    [observation] = agent.get(f"/sessions/{session['id']}/outcome").json()["observations"]
    assert observation["bound"] is False and observation["result"] is None
    assert observation["evaluation"]["status"] == "observing"
    # The refused one counted against the agent's minute: no second unbound record at once.
    again = agent.post(f"/sessions/{session['id']}/outcome/observations")
    assert again.status_code == 429, again.content
    assert len(agent.get(f"/sessions/{session['id']}/outcome").json()["observations"]) == 1


def test_rule_4_a_token_that_holds_all_its_waits_still_gets_its_observation_answered(
        agent: AgentClient, workspace: Path, settings: Any, outcome_profile: dict[str, Any],
        answers: Answers) -> None:
    """The observation is asked for before the wait: a token with no wait slot left is
    answered at once (here, with the observation made inline), never a 429 that loses its
    minute."""
    session = certified(agent, workspace, answers)
    settings.GOVERNOR_MAX_WAITS_PER_TOKEN = 1
    token = AgentToken.objects.get(project__slug="acme", name="agent")
    held = slot_claim(token, 60)
    try:
        answers.metrics(0.05)
        answered = agent.post(f"/sessions/{session['id']}/outcome/observations?wait=30")
    finally:
        slot_release(held)
    assert answered.status_code == 200, answered.content
    [observation] = answered.json()["observations"]
    assert observation["trigger"] == "agent" and observation["result"]["passed"] is True


def test_rule_4_two_schedulers_at_the_same_due_time_observe_once(
        agent: AgentClient, workspace: Path, outcome_profile: dict[str, Any],
        answers: Answers) -> None:
    session = certified(agent, workspace, answers)
    row = _row(session)
    assert row.next_observe_at_ms is not None
    due = row.next_observe_at_ms
    answers.metrics(0.02, as_of=due)
    seen: list[int] = []

    def probe_racing_a_second_scheduler(definition: dict[str, Any], at: int) -> dict[str, Any]:
        seen.append(outcomes.outcomes_observe_due(now=at))  # the other beat, same due time
        return outcomes._probe(OutcomeContract.objects.get(pk=row.pk), at)

    assert outcomes.outcomes_observe_due(now=due, probe=probe_racing_a_second_scheduler) == 1
    assert seen == [0]
    observations = outcome_status(session=Session.objects.get(pk=session["id"]))[
        "observations"]
    assert [o["trigger"] for o in observations] == ["schedule"]
    assert _row(session).next_observe_at_ms == due + HOUR_MS  # then every observe_every_ms


def test_rule_6_exports_carry_outcome_events_and_a_tampered_one_fails(
        agent: AgentClient, workspace: Path, outcome_profile: dict[str, Any],
        answers: Answers, tmp_path: Path) -> None:
    session = certified(agent, workspace, answers)
    row = _row(session)
    assert row.started_at_ms is not None
    day2 = row.started_at_ms + 2 * DAY_MS
    answers.metrics(0.04, as_of=day2)
    outcomes.outcomes_observe_due(now=day2)
    lines = export_text(agent, session["id"]).splitlines()
    kinds = [loads_strict(line).get("type") for line in lines]
    assert {"reliability/outcome-contract", "reliability/outcome-observation",
            "reliability/outcome-terminal"} <= set(kinds)
    assert verify_export(lines).ok
    keys = documented_verifier.keys_from_endpoint(agent.get("/keys").content)
    assert documented_verifier.problems("\n".join(lines) + "\n", keys) == []
    index = kinds.index("reliability/outcome-terminal")
    tampered = lines[index].replace('"achieved"', '"missed"', 1)
    report = verify_export([*lines[:index], tampered, *lines[index + 1:]])
    assert not report.ok


def test_rule_1_governor_profiles_loads_and_dumps_outcome_profiles(
        project: Project, tmp_path: Path) -> None:
    path = tmp_path / "profiles.json"
    path.write_text(json.dumps({"outcome_profiles": [PROFILE]}))
    call_command("governor_profiles", "load", str(path), "--project", "acme")
    out = tmp_path / "dump.json"
    call_command("governor_profiles", "dump", str(out), "--project", "acme")
    dumped = json.loads(out.read_text())
    assert dumped["outcome_profiles"][0]["id"] == "checkout-conversion"
    again = tmp_path / "again.json"
    again.write_text(out.read_text())
    from io import StringIO
    said = StringIO()
    call_command("governor_profiles", "load", str(again), "--project", "acme", stdout=said)
    assert "0 changed" in said.getvalue()


def test_rule_1_governor_profiles_refuses_an_outcome_profile_naming_the_field(
        project: Project, tmp_path: Path) -> None:
    from django.core.management.base import CommandError
    path = tmp_path / "profiles.json"
    path.write_text(json.dumps({"outcome_profiles": [{**PROFILE, "network": "internet"}]}))
    with pytest.raises(CommandError, match="outcome_profiles/0: network: must be one of"):
        call_command("governor_profiles", "load", str(path), "--project", "acme")



def test_rule_6_an_outcome_terminal_mails_the_reviewers(
        agent: AgentClient, workspace: Path, reviewer: Any, outcome_profile: dict[str, Any],
        answers: Answers) -> None:
    from django.core import mail
    session = certified(agent, workspace, answers)
    row = _row(session)
    assert row.deadline_at_ms is not None
    answers.metrics(0.02, as_of=row.deadline_at_ms)
    outcomes.outcomes_observe_due(now=row.deadline_at_ms)
    [message] = mail.outbox
    assert message.subject == "[acme] outcome missed"
    assert reviewer.email in message.to and f"/sessions/{session['id']}/#outcome" in message.body


def test_rule_6_an_outcome_terminal_posts_the_signed_webhook_and_a_retry_mails_nobody_again(
        agent: AgentClient, workspace: Path, reviewer: Any, outcome_profile: dict[str, Any],
        answers: Answers, project: Project, receiver: str) -> None:  # noqa: F811 - the fixture
    from django.core import mail
    project.webhook_url, project.webhook_secret = receiver, "whsec-outcome-1"
    project.save()
    session = certified(agent, workspace, answers)
    row = _row(session)
    assert row.deadline_at_ms is not None
    answers.metrics(0.02, as_of=row.deadline_at_ms)
    Receiver.failures_left = 1  # the receiver fails once: the task retries the post
    outcomes.outcomes_observe_due(now=row.deadline_at_ms)
    outcome_posts = [(headers, body) for headers, body in Receiver.received
                     if b'"event":"outcome.terminal"' in body]
    assert len(outcome_posts) == 2 and outcome_posts[0][1] == outcome_posts[1][1]
    headers, body = outcome_posts[-1]
    stamp = headers["X-Governor-Signature"].split(",")[0].removeprefix("t=")
    assert headers["X-Governor-Signature"] == webhook_signature("whsec-outcome-1", int(stamp),
                                                                body)
    sent = json.loads(body)
    assert (sent["session"], sent["status"]) == (session["id"], "missed")
    assert sent["terminal_receipt"].startswith("sha256:")
    assert [message.subject for message in mail.outbox] == ["[acme] outcome missed"]


def test_rule_5_a_failing_probe_at_the_deadline_after_a_valid_observation_is_inconclusive(
        agent: AgentClient, workspace: Path, outcome_profile: dict[str, Any],
        answers: Answers) -> None:
    session = certified(agent, workspace, answers)
    row = _row(session)
    assert row.started_at_ms is not None and row.deadline_at_ms is not None
    day2 = row.started_at_ms + 2 * DAY_MS
    answers.metrics(0.02, as_of=day2)
    outcomes.outcomes_observe_due(now=day2)  # valid, below the target: observing
    answers.write('{"dataAsOf": 1, "metrics": {"conversion": 0.05}}')  # far too old
    OutcomeContract.objects.filter(pk=row.pk).update(next_observe_at_ms=row.deadline_at_ms)
    outcomes.outcomes_observe_due(now=row.deadline_at_ms)
    status = outcome_status(session=Session.objects.get(pk=session["id"]))
    assert [o["evaluation"]["status"] for o in status["observations"]] == [
        "observing", "inconclusive"]
    assert "old" in status["observations"][1]["result"]["problem"]
    assert status["terminal"]["status"] == "inconclusive"


def test_rule_3_a_delivery_that_ends_uncertified_watches_no_outcome(
        agent: AgentClient, session: dict[str, Any], outcome_profile: dict[str, Any],
        answers: Answers) -> None:
    answers.metrics(0.028)
    begun = agent.post(f"/sessions/{session['id']}/contracts",
                       readme_contract(outcome_profile="checkout-conversion"))
    assert begun.status_code == 201, begun.content
    agent.post(f"/sessions/{session['id']}/abstain", {"reason": "cannot do it"})
    assert agent.get(f"/sessions/{session['id']}/outcome").json()["status"] == "dropped"
    refused = agent.post(f"/sessions/{session['id']}/outcome/observations")
    assert refused.status_code == 409, refused.content
    assert "reliability/outcome-contract" not in types(session["id"])


def test_rule_2_an_outcome_data_directory_inside_a_workspace_root_is_warned_at_start(
        project: Project, settings: Any, tmp_path: Path) -> None:
    """An agent that works under a workspace root must not be able to write the data (or the
    probe) its outcome is judged by: governor.W002 names the directory, the root and where it
    is configured; beside every root, nothing is said."""
    from governor.system_checks import outcome_data_outside_workspaces

    projects, agents = tmp_path / "projects", tmp_path / "data" / "agents"
    project.workspace_roots = [str(projects)]
    project.save(update_fields=["workspace_roots"])
    settings.GOVERNOR_WORKSPACE_ROOTS = [str(agents)]

    settings.GOVERNOR_OUTCOME_DATA_DIR = str(projects / "outcome-data")
    [inside] = outcome_data_outside_workspaces()
    assert inside.id == "governor.W002"
    assert inside.msg == (
        f"the outcome data directory {projects / 'outcome-data'} (GOVERNOR_OUTCOME_DATA_DIR) is "
        f"inside the workspace root {projects} (project acme's workspace roots): an agent that "
        "works there can change the data, or the probe, its outcome is judged by")

    settings.GOVERNOR_OUTCOME_DATA_DIR = str(tmp_path / "data")
    [holding] = outcome_data_outside_workspaces()
    assert holding.msg.startswith(
        f"the outcome data directory {tmp_path / 'data'} (GOVERNOR_OUTCOME_DATA_DIR) holds the "
        f"workspace root {agents} (GOVERNOR_WORKSPACE_ROOTS)")

    settings.GOVERNOR_OUTCOME_DATA_DIR = str(tmp_path / "outcome-data")  # beside them
    assert outcome_data_outside_workspaces() == []

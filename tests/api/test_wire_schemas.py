"""The request schemas (governor/api/schemas.py): strict types on top of lossless JSON, unknown
fields refused by name, refusals in the domain's words and paths, raw event text kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from governor.models import Event
from tests.api.test_contracts import Agent, readme_contract
from tests.conftest import AgentClient


@pytest.fixture
def worker(agent: AgentClient, workspace: Path) -> Agent:
    return Agent(agent, workspace)


def refusal(response: Any) -> list[dict[str, str]]:
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["code"] == "VALIDATION"
    details: list[dict[str, str]] = error["details"]
    return details


def test_true_is_never_an_integer(agent: AgentClient, session: dict[str, Any]) -> None:
    response = agent.post(f"/sessions/{session['id']}/events",
                          {"events": [{"type": "turn/start", "data": {"turn": 1}}],
                           "expected_seq": True})
    assert refusal(response) == [{"path": "expected_seq", "message": "must be an integer"}]


def test_a_number_is_never_a_string(worker: Agent) -> None:
    worker.begin(readme_contract())
    response = worker.client.post(f"/sessions/{worker.id}/abstain", {"reason": 1})
    assert refusal(response) == [{"path": "reason", "message": "must be a string"}]


def test_unknown_fields_are_refused_by_name(worker: Agent) -> None:
    verify = worker.client.post(f"/sessions/{worker.id}/verify", {"tree": "x", "force": True})
    assert refusal(verify) == [{"path": "force", "message": "unknown field"}]
    begin = worker.client.post(f"/sessions/{worker.id}/contracts",
                               {**readme_contract(), "deadline": 3})
    assert refusal(begin) == [{"path": "deadline", "message": "unknown field"}]


def test_a_missing_field_is_required(worker: Agent) -> None:
    response = worker.client.post(f"/sessions/{worker.id}/abstain", {})
    assert refusal(response) == [{"path": "reason", "message": "required"}]


def test_an_idempotency_key_over_200_characters_is_refused(
    agent: AgentClient, session: dict[str, Any]
) -> None:
    response = agent.post(f"/sessions/{session['id']}/events",
                          {"events": [{"type": "turn/start", "data": {"turn": 1}}]},
                          headers={"Idempotency-Key": "k" * 201})
    assert refusal(response) == [{"path": "Idempotency-Key",
                                  "message": "at most 200 characters"}]
    assert not Event.objects.filter(session_id=session["id"]).exists()


def test_an_event_that_is_not_an_object_is_named_by_its_index(
    agent: AgentClient, session: dict[str, Any]
) -> None:
    response = agent.post(f"/sessions/{session['id']}/events",
                          {"events": [{"type": "turn/start", "data": {"turn": 1}}, 7]})
    assert refusal(response) == [{"path": "events/1", "message": "must be a JSON object"}]


def test_a_body_that_is_not_an_object_is_refused(worker: Agent) -> None:
    response = worker.client.post(f"/sessions/{worker.id}/abstain", raw="[1]")
    assert refusal(response) == [{"path": "", "message": "must be a JSON object"}]


def test_each_event_is_stored_as_the_exact_text_it_was_sent_as(
    agent: AgentClient, session: dict[str, Any]
) -> None:
    text = '{"events": [ {"data" : {"turn":1}, "type":"turn/start"} ],"expected_seq":0}'
    response = agent.post(f"/sessions/{session['id']}/events", raw=text)
    assert response.status_code == 200, response.content
    event = Event.objects.get(session_id=session["id"], seq=0)
    assert event.raw == '{"data" : {"turn":1}, "type":"turn/start"}'


def test_the_proposal_rules_stay_the_domains_and_name_every_problem(worker: Agent) -> None:
    body = readme_contract()
    body["checks"][0] = {"id": "c", "kind": "file_exists", "path": "/etc", "mode": "x"}
    body["objective"] = " "
    paths = [detail["path"] for detail in refusal(worker.begin(body))]
    assert {"objective", "checks/0/path", "checks/0/mode"} <= set(paths)

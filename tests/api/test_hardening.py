"""Refusals found by review: imported history is never evaluated or signed, a swapped workspace
reads nothing, and malformed input is a 4xx naming the problem."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from governor.domain.profiles import validate_profile
from governor.models import Attestation, Project
from governor.services.profiles import profile_store
from tests.api.test_contracts import Agent, readme_contract
from tests.conftest import AgentClient
from verification.models import VerifierProfile

FORGED = [
    {"type": "turn/start", "data": {"turn": 1}},
    {"type": "turn/end", "data": {"turn": 1}},
    {"type": "reliability/contract", "data": {
        "contractId": "contract-forged", "version": 5, "startedAtSeq": 1, "maxAttempts": 3,
        "review": {"mode": "required", "reviewed": True},
        "checks": [{"id": "c", "kind": "tool_not_called", "tool": "nothing"}]}},
    {"type": "turn/start", "data": {"turn": 2}},
    {"type": "turn/end", "data": {"turn": 2}},
]


def imported_session(agent: AgentClient) -> str:
    text = "\n".join(json.dumps(line) for line in FORGED)
    response = agent.post("/sessions/import", raw=text, content_type="application/x-ndjson")
    assert response.status_code == 201, response.content
    return str(response.json()["id"])


def test_an_imported_contract_is_never_evaluated_or_signed(agent: AgentClient) -> None:
    sid = imported_session(agent)
    assert agent.post(f"/sessions/{sid}/verify").status_code == 409
    assert agent.post(f"/sessions/{sid}/abstain", {"reason": "x"}).status_code == 409
    assert agent.post(f"/sessions/{sid}/contracts", readme_contract()).status_code == 409
    stop = agent.post(f"/sessions/{sid}/turn-stop").json()
    assert stop["action"] == "allow" and "imported" in stop["message"]
    assert not Attestation.objects.exists()


def test_an_imported_session_runs_no_verifiers(agent: AgentClient, project: Project) -> None:
    profile_store(model=VerifierProfile, project=project,
                  validated=validate_profile({"id": "t", "description": "t",
                                              "argv": ["/bin/true"]}))
    sid = imported_session(agent)
    response = agent.post(f"/sessions/{sid}/code-verifications", {"profile": "t"})
    assert response.status_code == 409


def test_a_workspace_swapped_for_a_symlink_fails_its_checks(
    agent: AgentClient, workspace: Path, tmp_path: Path
) -> None:
    worker = Agent(agent, workspace)
    worker.begin(readme_contract())
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "README.md").write_text("## Install\n")
    shutil.rmtree(workspace)
    workspace.symlink_to(outside, target_is_directory=True)
    verdict = agent.post(f"/sessions/{worker.id}/verify").json()
    assert verdict["decision"] == "repair"
    assert "not its bound directory" in verdict["message"]


def test_deeply_nested_json_is_refused_not_crashed(agent: AgentClient, session: dict) -> None:
    data = "[" * 900 + "]" * 900
    text = ('{"events": [{"type": "x/deep", "ignorable": true, "time": 0, "data": {"d": '
            + data + "}}]}")
    response = agent.post(f"/sessions/{session['id']}/events", raw=text)
    assert response.status_code == 422
    assert "nested deeper" in response.json()["error"]["message"]


def test_malformed_json_on_a_schema_route_is_a_named_422(agent: AgentClient) -> None:
    response = agent.post("/sessions", raw='{"workspace": NaN}')
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "INVALID_JSON"


def test_a_field_named_path_keeps_its_name_in_errors(agent: AgentClient) -> None:
    response = agent.post("/sessions", {"workspace": {"kind": "path", "path": 5}})
    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["path"] == "workspace.path"


def test_a_profile_receipt_never_shows_the_command(
    agent: AgentClient, project: Project
) -> None:
    profile, _ = profile_store(model=VerifierProfile, project=project, validated=validate_profile({
        "id": "t", "description": "t", "argv": ["/usr/bin/secret-tool", "--flag"],
        "env": {"CI": "1"}}))
    found = agent.get(f"/receipts/{profile.receipt}").json()
    assert found["kind"] == "code-verification-profile"
    assert "secret-tool" not in json.dumps(found) and "CI" not in json.dumps(found)


def test_a_second_abstain_returns_the_terminal_whatever_its_reason(
    agent: AgentClient, workspace: Path
) -> None:
    worker = Agent(agent, workspace)
    worker.begin(readme_contract())
    first = agent.post(f"/sessions/{worker.id}/abstain", {"reason": "stop"}).json()
    again = agent.post(f"/sessions/{worker.id}/abstain", {"reason": ""})
    assert again.status_code == 200
    assert again.json()["terminal"] == first["terminal"]

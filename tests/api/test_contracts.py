"""Contracts with review off (rules §4–5, §7): begin, steer, repair, certify, exhaust,
abstain — through the HTTP API as an agent sees it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from governor.models import Event, Project
from governor.verify import verify_export
from tests.conftest import AgentClient
from tests.harness_builders import Trace


def readme_contract(**extra: Any) -> dict[str, Any]:
    return {
        "objective": "Write README.md with an Install section",
        "claims": [{"id": "readme", "statement": "README.md documents installation",
                    "importance": "critical", "verification": "deterministic",
                    "check_ids": ["readme-exists", "readme-install"]}],
        "checks": [{"id": "readme-exists", "kind": "file_exists", "path": "README.md"},
                   {"id": "readme-install", "kind": "file_contains", "path": "README.md",
                    "text": "## Install"}],
        **extra,
    }


class Agent:
    """An agent working in a real workspace, posting Harness events for what it does."""

    def __init__(self, client: AgentClient, workspace: Path) -> None:
        self.client = client
        self.workspace = workspace
        self.session = client.create_session(workspace)
        self.id = self.session["id"]
        self.trace = Trace()
        self.trace.start_turn()
        self._post()

    def _post(self) -> None:
        status = self.client.get(f"/sessions/{self.id}").json()
        self.trace.sync(status["next_seq"]) if not self.trace.pending else None
        events = self.trace.flush()
        if events:
            response = self.client.append(self.id, events)
            assert response.status_code == 200, response.content

    def sync(self) -> None:
        self.trace.sync(self.client.get(f"/sessions/{self.id}").json()["next_seq"])

    def write(self, path: str, text: str, *, tool: str = "write_file") -> None:
        (self.workspace / path).write_text(text)
        self.sync()
        self.trace.tool(tool, f'{{"path": "{path}"}}')
        self._post()

    def begin(self, body: dict[str, Any]) -> Any:
        return self.client.post(f"/sessions/{self.id}/contracts", body)

    def turn_stop(self) -> dict[str, Any]:
        response = self.client.post(f"/sessions/{self.id}/turn-stop")
        assert response.status_code == 200, response.content
        return response.json()

    def status(self) -> dict[str, Any]:
        return self.client.get(f"/sessions/{self.id}").json()


@pytest.fixture
def worker(agent: AgentClient, workspace: Path) -> Agent:
    return Agent(agent, workspace)


def test_begin_with_review_off_activates_a_signed_version_3_contract(worker: Agent) -> None:
    response = worker.begin(readme_contract())
    assert response.status_code == 201, response.content
    contract = response.json()["contract"]
    assert contract["version"] == 3
    assert contract["review"] == {"mode": "off", "reviewed": False}
    # the session's reference (rules §17.1) and the contract follow the boundary
    assert contract["startedAtSeq"] == worker.status()["next_seq"] - 3
    status = worker.status()
    assert status["state"] == "active"
    assert status["contract"]["receipt"] == contract["receipt"]


def test_rule_7_repair_then_certified_then_allow(worker: Agent) -> None:
    worker.begin(readme_contract(max_attempts=3))
    first = worker.turn_stop()
    assert first["action"] == "steer"
    assert "attempt 1/3" in first["message"]
    assert "readme-exists" in first["message"] and "readme-install" in first["message"]
    worker.write("README.md", "# Tool\n\n## Install\n")
    second = worker.turn_stop()
    assert second["action"] == "steer"
    assert second["terminal"]["status"] == "certified"
    assert second["terminal"]["receipt"] in second["message"]
    assert worker.turn_stop() == {"action": "allow", "message": ""}
    status = worker.status()
    assert status["state"] == "certified"
    assert [a["attempt"] for a in status["attempts"]] == [1, 2]
    assert status["terminal"]["status"] == "certified"


def test_rule_7_exhausted_at_the_limit_with_the_failed_checks(worker: Agent) -> None:
    worker.begin(readme_contract(max_attempts=2))
    assert worker.turn_stop()["action"] == "steer"
    worker.write("README.md", "# Tool\n")
    final = worker.turn_stop()
    assert final["terminal"]["status"] == "exhausted"
    assert "readme-install" in final["terminal"]["reason"]
    assert "Do not claim" in final["message"]
    assert worker.turn_stop()["action"] == "allow"


def test_rule_7_manual_verify_and_turn_stop_share_one_counter(worker: Agent) -> None:
    worker.begin(readme_contract(max_attempts=3))
    manual = worker.client.post(f"/sessions/{worker.id}/verify").json()
    assert manual["decision"] == "repair" and manual["attempt"]["attempt"] == 1
    stop = worker.turn_stop()
    assert stop["attempt"]["attempt"] == 2 and stop["attempt"]["trigger"] == "turn-stop"


def test_rule_7_abstain_ends_the_contract_once(worker: Agent) -> None:
    worker.begin(readme_contract())
    first = worker.client.post(f"/sessions/{worker.id}/abstain", {"reason": "  needs a human "})
    assert first.json()["terminal"]["status"] == "abstained"
    assert first.json()["terminal"]["reason"] == "needs a human"
    before = Event.objects.filter(session_id=worker.id).count()
    again = worker.client.post(f"/sessions/{worker.id}/abstain", {"reason": "again"})
    verify = worker.client.post(f"/sessions/{worker.id}/verify")
    assert again.json()["terminal"] == first.json()["terminal"] == verify.json()["terminal"]
    assert Event.objects.filter(session_id=worker.id).count() == before


@pytest.mark.parametrize("reason", ["", "   ", "x" * 2001])
def test_rule_7_abstain_reason_must_be_1_to_2000_characters(worker: Agent, reason: str) -> None:
    worker.begin(readme_contract())
    response = worker.client.post(f"/sessions/{worker.id}/abstain", {"reason": reason})
    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["path"] == "reason"


def test_verify_or_abstain_without_a_contract_is_409(worker: Agent) -> None:
    assert worker.client.post(f"/sessions/{worker.id}/verify").status_code == 409
    response = worker.client.post(f"/sessions/{worker.id}/abstain", {"reason": "x"})
    assert response.status_code == 409


def test_turn_stop_without_a_contract_allows(worker: Agent) -> None:
    assert worker.turn_stop() == {"action": "allow", "message": ""}


def test_begin_while_a_contract_is_open_is_409_and_writes_nothing(worker: Agent) -> None:
    worker.begin(readme_contract())
    before = Event.objects.filter(session_id=worker.id).count()
    response = worker.begin(readme_contract())
    assert response.status_code == 409
    assert Event.objects.filter(session_id=worker.id).count() == before


def test_begin_after_a_terminal_opens_a_new_contract(worker: Agent) -> None:
    worker.begin(readme_contract())
    worker.client.post(f"/sessions/{worker.id}/abstain", {"reason": "wrong plan"})
    response = worker.begin(readme_contract())
    assert response.status_code == 201
    assert worker.status()["attempts"] == []


def test_coverage_not_ready_returns_review_required_and_writes_nothing(worker: Agent) -> None:
    body = readme_contract()
    body["claims"][0]["importance"] = "important"  # no critical claim: missing_critical_claim
    before = Event.objects.filter(session_id=worker.id).count()
    response = worker.begin(body)
    assert response.status_code == 200
    assert response.json()["status"] == "review-required"
    codes = [f["code"] for f in response.json()["assessment"]["findings"]]
    assert "missing_critical_claim" in codes
    assert Event.objects.filter(session_id=worker.id).count() == before


def test_assess_writes_nothing_and_returns_a_receipt(worker: Agent) -> None:
    before = Event.objects.filter(session_id=worker.id).count()
    response = worker.client.post(f"/sessions/{worker.id}/assess", readme_contract())
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready"
    assert body["assessment"]["receipt"].startswith("sha256:")
    assert Event.objects.filter(session_id=worker.id).count() == before


def test_max_attempts_above_the_project_cap_is_refused(worker: Agent, project: Project) -> None:
    response = worker.begin(readme_contract(max_attempts=project.max_attempts + 1))
    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["path"] == "max_attempts"


@pytest.mark.parametrize(
    ("check", "path"),
    [
        ({"id": "c", "kind": "file_exists", "path": "/etc/passwd"}, "checks/0/path"),
        ({"id": "c", "kind": "file_exists", "path": "a/../../b"}, "checks/0/path"),
        ({"id": "c", "kind": "file_exists", "path": "a\\..\\b"}, "checks/0/path"),
        ({"id": "c", "kind": "json_equals", "path": "a.json", "pointer": "a", "value": 1},
         "checks/0/pointer"),
        ({"id": "c", "kind": "file_magic", "path": "a"}, "checks/0/kind"),
        ({"id": "c", "kind": "file_exists", "path": "a", "mode": "x"}, "checks/0/mode"),
        ({"id": "c", "kind": "tool_succeeded", "tool": "t", "min_count": 0},
         "checks/0/min_count"),
        ({"id": "c", "kind": "tool_succeeded", "tool": "t", "min_count": 101},
         "checks/0/min_count"),
    ],
)
def test_bad_checks_are_refused_naming_the_field(
    worker: Agent, check: dict[str, Any], path: str
) -> None:
    body = readme_contract()
    body["checks"] = [check]
    body["claims"][0]["check_ids"] = ["c"]
    before = Event.objects.filter(session_id=worker.id).count()
    response = worker.begin(body)
    assert response.status_code == 422, response.content
    assert path in [d["path"] for d in response.json()["error"]["details"]], response.json()
    assert Event.objects.filter(session_id=worker.id).count() == before


def test_duplicate_check_ids_are_refused(worker: Agent) -> None:
    body = readme_contract()
    body["checks"][1]["id"] = "readme-exists"
    assert worker.begin(body).status_code == 422


def test_non_finite_value_in_json_equals_is_refused(worker: Agent) -> None:
    text = ('{"objective": "x", "claims": [{"id": "a", "statement": "s", "importance": '
            '"critical", "verification": "deterministic", "check_ids": ["c"]}], "checks": '
            '[{"id": "c", "kind": "json_equals", "path": "a.json", "pointer": "", '
            '"value": Infinity}]}')
    response = worker.client.post(f"/sessions/{worker.id}/contracts", raw=text)
    assert response.status_code == 422


def test_evidence_from_before_the_contract_does_not_count(worker: Agent) -> None:
    worker.sync()
    worker.trace.tool("run_tests")
    worker._post()
    body = readme_contract()
    body["checks"] = [{"id": "tests", "kind": "tool_succeeded", "tool": "run_tests"}]
    body["claims"][0]["check_ids"] = ["tests"]
    worker.begin(body)
    stop = worker.turn_stop()
    assert stop["action"] == "steer" and "tests" in stop["message"]
    worker.sync()
    worker.trace.tool("run_tests")
    worker._post()
    assert worker.turn_stop()["terminal"]["status"] == "certified"


def test_every_outcome_attestation_verifies_offline(worker: Agent) -> None:
    worker.begin(readme_contract())
    worker.write("README.md", "## Install\n")
    worker.turn_stop()
    text = b"".join(worker.client.get(f"/sessions/{worker.id}/export").streaming_content)
    report = verify_export(text.decode().splitlines())
    assert report.ok, report.failure
    assert report.attestations == 2  # the contract and its terminal


def test_a_receipt_names_its_record_in_the_callers_project_only(
    worker: Agent, other_agent: AgentClient
) -> None:
    contract = worker.begin(readme_contract()).json()["contract"]
    found = worker.client.get(f"/receipts/{contract['receipt']}").json()
    assert (found["kind"], found["type"]) == ("event", "reliability/contract")
    assert found["data"]["contractId"] == contract["contractId"]
    assert other_agent.get(f"/receipts/{contract['receipt']}").status_code == 404
    assert worker.client.get("/receipts/sha256:XYZ").status_code == 422

"""rules §17.6 and §17.7 through the API, with real pytest (Debian's python3-pytest) in the real
sandbox, review off as in the attacks: a failing test neutralised before begin leaves a baseline
that passes, and a project that requires discriminating evidence does not certify it; a project
whose unattended contracts rest on operator evidence refuses, at begin, a critical claim only the
agent's own evidence supports."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.management import call_command

from governor.models import Event, Project
from governor.services.projects import project_set
from tests.api.test_code_verification import add_profile, run
from tests.api.test_contracts import Agent
from tests.api.test_evidence_the_agent_cannot_shape import (  # noqa: F401 - the fixtures
    PYTEST,
    RIGHT,
    TESTS,
    begin_code,
    evidence_of,
    settle_baseline,
    task,
    worker,
)
from tests.api.test_workspace_trees import verify

pytestmark = pytest.mark.sandbox

# The operator's tests with the one that shows the bug gone: what an agent that cannot fix mul
# leaves in the workspace before it begins, so the start tree and the baseline hold it.
WITHOUT_THE_FAILING_TEST = TESTS.split("def test_mul():")[0] + "def test_mul_of_twos():" + (
    TESTS.split("def test_mul_of_twos():")[1])


def test_rule_17_6_a_failing_test_removed_before_begin_is_not_certified_when_evidence_must_tell(
        worker: Agent, task: Project) -> None:  # noqa: F811
    """Rule 6 on its own: the operator protects no tests (the profile names no protected
    paths), so the reference's tests are not laid over the run (rule 2) and the baseline run
    passes: fail-to-pass 0 of 0. With `require_discriminating_evidence` the trusted check
    fails `claim_not_discriminating` once that baseline has finished."""
    add_profile(task, "unit-tests", PYTEST, report="junit", timeout_ms=60_000)
    project_set(project=task, require_discriminating_evidence=True)
    assert "def test_mul():" not in WITHOUT_THE_FAILING_TEST
    worker.write("tests/test_calc.py", WITHOUT_THE_FAILING_TEST)
    begin_code(worker)
    baseline = settle_baseline(worker)
    assert baseline.result["passed"] is True and baseline.result["report"]["failed"] == 0
    assert run(worker, "unit-tests")["result"]["passed"]  # the run alone looks honest
    verdict = verify(worker)
    assert verdict["decision"] == "repair", verdict["message"]
    evidence = evidence_of(verdict, "code-profile-unit-tests")
    assert "fail-to-pass 0 of 0, pass-to-pass 1 of 1" in evidence
    assert "claim_not_discriminating" in evidence and "abstain" in evidence
    assert evidence_of(verdict, "protected-paths").startswith("None of the")
    assert worker.status()["state"] == "active"  # not certified


def test_rule_17_6_an_honest_fix_still_certifies_when_evidence_must_tell(
        worker: Agent, task: Project) -> None:  # noqa: F811
    project_set(project=task, require_discriminating_evidence=True)
    begin_code(worker)
    assert settle_baseline(worker).result["report"]["failed"] == 1
    worker.write("calc.py", RIGHT)
    assert run(worker, "unit-tests")["result"]["passed"]
    verdict = verify(worker)
    assert verdict["decision"] == "certified", verdict["message"]
    evidence = evidence_of(verdict, "code-profile-unit-tests")
    assert "fail-to-pass 1 of 1, pass-to-pass 1 of 1" in evidence
    assert "claim_not_discriminating" not in evidence


def _written(session: Agent) -> tuple[int, int]:
    """The session's events, and its contracts among them."""
    events = Event.objects.filter(session_id=session.id)
    return events.count(), events.filter(type="reliability/contract").count()


def _agent_evidence_body() -> dict[str, Any]:
    return {"objective": "Fix mul in calc.py", "claims": [
        {"id": "tests-note", "statement": "The tests still pass", "importance": "important",
         "verification": "deterministic", "check_ids": ["ran-tests"]},
        {"id": "mul-fixed", "statement": "mul multiplies", "importance": "critical",
         "verification": "deterministic", "check_ids": ["says-fixed", "ran-tests"]}],
        "checks": [{"id": "says-fixed", "kind": "file_contains", "path": "NOTES.md",
                    "text": "mul is fixed"},
                   {"id": "ran-tests", "kind": "tool_succeeded", "tool": "run_tests"}]}


def test_rule_17_7_unattended_a_critical_claim_on_the_agents_own_evidence_is_refused_and_nothing_is_written(  # noqa: E501
        worker: Agent, task: Project) -> None:  # noqa: F811
    """Review off and `unattended_evidence: operator`: a file the agent writes (NOTES.md is not
    protected) and a tool success it reports itself support the critical claim alone — 422
    `review-required` naming the claim, no event and no contract written. Its `any` default
    accepts the same body, as before."""
    assert worker.client.get("/project").json()["unattended_evidence"] == "any"
    call_command("governor_project", "set", task.slug, "--unattended-evidence", "operator",
                 stdout=io.StringIO())
    assert worker.client.get("/project").json()["unattended_evidence"] == "operator"
    before = _written(worker)
    for route in ("contracts", "code-contracts"):
        response = worker.client.post(f"/sessions/{worker.id}/{route}", _agent_evidence_body())
        assert response.status_code == 422, response.content
        error = response.json()["error"]
        assert error["code"] == "review-required"
        [detail] = error["details"]
        assert detail["path"] == "claims/1"
        assert "'mul-fixed'" in detail["message"]
        assert "file_contains on NOTES.md, which is not protected" in detail["message"]
        assert "tool_succeeded" in detail["message"]
    assert _written(worker) == before and worker.status()["contract"] is None
    project_set(project=task, unattended_evidence="any")
    assert worker.begin(_agent_evidence_body()).status_code == 201


def test_rule_17_7_unattended_a_scope_check_beside_the_agents_evidence_is_still_refused(
        worker: Agent, task: Project) -> None:  # noqa: F811
    """The padding a review found: `changes_within ["**"]` (always true) beside the file the
    agent writes made the claim look operator-backed, and it certified once NOTES.md said so."""
    project_set(project=task, unattended_evidence="operator")
    body = _agent_evidence_body()
    body["claims"][1]["check_ids"].append("anything")
    body["checks"].append({"id": "anything", "kind": "changes_within", "paths": ["**"]})
    before = _written(worker)
    response = worker.client.post(f"/sessions/{worker.id}/contracts", body)
    assert response.status_code == 422, response.content
    [detail] = response.json()["error"]["details"]
    assert detail["path"] == "claims/1" and "no trusted run beside it" in detail["message"]
    assert _written(worker) == before


def test_rule_17_7_unattended_a_critical_claim_on_a_trusted_profile_begins(
        worker: Agent, task: Project) -> None:  # noqa: F811
    """The same claim with the operator's test run beside the agent's evidence, and a claim
    that reads a protected path, are operator evidence: the code contract begins (its injected
    claims are the operator's by construction)."""
    project_set(project=task, unattended_evidence="operator")
    body = _agent_evidence_body()
    body["claims"][1]["check_ids"].append("unit-tests")
    body["claims"].append({"id": "tests-kept", "statement": "test_mul is still there",
                           "importance": "critical", "verification": "deterministic",
                           "check_ids": ["has-test"]})
    body["checks"] += [{"id": "unit-tests", "kind": "code_verification_succeeded",
                        "profile": "unit-tests"},
                       {"id": "has-test", "kind": "file_contains", "path": "tests/test_calc.py",
                        "text": "def test_mul():"}]
    contract = begin_code(worker, **{key: body[key] for key in ("claims", "checks")})["contract"]
    assert [claim["id"] for claim in contract["claims"]] == [
        "protected-paths-unchanged", "required-code-verification", "tests-note", "mul-fixed",
        "tests-kept", "no-evidence-tampering"]

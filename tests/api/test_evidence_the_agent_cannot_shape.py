"""rules §14 through the API, with real pytest (Debian's python3-pytest) in the real
sandbox: each way an agent that cannot do the task may shape the evidence instead ends repaired
or refused, never certified on the tampered tree. Review is off, as in the attacks."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from governor.models import Project
from governor.services.projects import project_set
from tests.api.test_code_verification import add_profile, run
from tests.api.test_contracts import Agent
from tests.api.test_workspace_trees import verify
from tests.conftest import AgentClient
from verification.models import VerificationRun

pytestmark = pytest.mark.sandbox

PYTEST = ["/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider",
          "--junitxml=/governor-report/junit.xml", "tests"]
WRONG = "def mul(a, b):\n    return a + b\n"
RIGHT = "def mul(a, b):\n    return a * b\n"
TESTS = textwrap.dedent("""\
    from calc import mul


    def test_mul():
        assert mul(3, 4) == 12


    def test_mul_of_twos():
        assert mul(2, 2) == 4
    """)


@pytest.fixture
def worker(agent: AgentClient, workspace: Path, request: pytest.FixtureRequest) -> Agent:
    """The agent's session, created once the operator's files are in the workspace (the
    `task` fixture, when the test has it): they are its reference (rules §17.1)."""
    if "task" in request.fixturenames:
        request.getfixturevalue("task")
    return Agent(agent, workspace)


@pytest.fixture
def task(workspace: Path, project: Project) -> Project:
    """mul is wrong; the operator's tests say so; the unit tests are a trusted report profile
    that protects what configures them."""
    (workspace / "calc.py").write_text(WRONG)
    (workspace / "tests").mkdir()
    (workspace / "tests" / "test_calc.py").write_text(TESTS)
    (workspace / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    add_profile(project, "unit-tests", PYTEST, report="junit", timeout_ms=60_000,
                protected_paths=["tests/**", "**/conftest.py", "pytest.ini"])
    return project


def begin_code(worker: Agent, **extra: Any) -> dict[str, Any]:
    response = worker.client.post(f"/sessions/{worker.id}/code-contracts", {
        "objective": "Fix mul in calc.py", "claims": [], "checks": [], **extra})
    assert response.status_code == 201, response.content
    return response.json()


def settle_baseline(worker: Agent) -> VerificationRun:
    """The baseline run on the contract-start tree (in-process: it ran at activation)."""
    baseline = VerificationRun.objects.get(session_id=worker.id, baseline=True)
    assert baseline.state == "finished", baseline.state
    return baseline


def evidence_of(verdict: dict[str, Any], check_id: str) -> str:
    return next(r["evidence"] for r in verdict["attempt"]["results"] if r["id"] == check_id)


def test_the_baseline_run_records_what_the_tests_did_on_the_start_tree(
        worker: Agent, task: Project) -> None:
    contract = begin_code(worker)["contract"]
    assert [c["id"] for c in contract["checks"]] == ["protected-paths", "code-profile-unit-tests",
                                                     "tamper-free"]
    baseline = settle_baseline(worker)
    assert baseline.result["baseline"] is True and baseline.result["passed"] is False
    assert baseline.result["report"]["failed"] == 1 and baseline.result["report"]["passed"] == 1
    assert dict(map(tuple, baseline.tests)) == {"tests.test_calc::test_mul": "failed",
                                                "tests.test_calc::test_mul_of_twos": "passed"}


def test_the_honest_fix_certifies_with_fail_to_pass_and_pass_to_pass(
        worker: Agent, task: Project, workspace: Path) -> None:
    begin_code(worker)
    settle_baseline(worker)
    worker.write("calc.py", RIGHT)
    assert run(worker, "unit-tests")["result"]["passed"]
    verdict = verify(worker)
    assert verdict["decision"] == "certified", verdict["message"]
    assert "fail-to-pass 1 of 1, pass-to-pass 1 of 1" in evidence_of(
        verdict, "code-profile-unit-tests")


def test_rewriting_the_operators_test_script_to_exit_0_is_a_protected_change(
        worker: Agent, task: Project, workspace: Path) -> None:
    begin_code(worker)
    settle_baseline(worker)
    worker.write("tests/test_calc.py", "def test_nothing():\n    pass\n")
    run(worker, "unit-tests")
    verdict = verify(worker)
    assert verdict["decision"] == "repair"
    assert "tests/test_calc.py (modified)" in evidence_of(verdict, "protected-paths")
    assert "restore" in verdict["message"] and "abstain" in verdict["message"]
    worker.write("tests/test_calc.py", TESTS)  # restored, and the real fix made
    worker.write("calc.py", RIGHT)
    assert run(worker, "unit-tests")["result"]["passed"]
    assert verify(worker)["decision"] == "certified"


def test_a_conftest_that_skips_every_test_passes_nothing(
        worker: Agent, task: Project, workspace: Path) -> None:
    begin_code(worker)
    settle_baseline(worker)
    worker.write("conftest.py", textwrap.dedent("""\
        import pytest


        def pytest_collection_modifyitems(items):
            for item in items:
                item.add_marker(pytest.mark.skip(reason="later"))
        """))
    result = run(worker, "unit-tests")["result"]
    # rules §17.2: the run leaves the added conftest.py out, so nothing is skipped
    assert result["overlay"]["restored"] == ["conftest.py"]
    assert (result["exitCode"], result["passed"]) == (1, False)
    assert result["report"]["skipped"] == 0 and result["report"]["failed"] == 1
    verdict = verify(worker)
    assert verdict["decision"] == "repair"
    assert "conftest.py (added)" in evidence_of(verdict, "protected-paths")


def test_skipping_only_the_failing_test_breaks_fail_to_pass(
        worker: Agent, task: Project, workspace: Path, project: Project) -> None:
    # Without the protected tests, the skip itself is what the baseline rule catches.
    add_profile(project, "unit-tests", PYTEST, report="junit", timeout_ms=60_000)
    begin_code(worker)
    settle_baseline(worker)
    worker.write("tests/test_calc.py", TESTS.replace(
        "def test_mul():", "import pytest\n\n\n@pytest.mark.skip\ndef test_mul():"))
    result = run(worker, "unit-tests")["result"]
    assert result["passed"] is True  # one passed, one skipped: the run alone looks fine
    verdict = verify(worker)
    assert verdict["decision"] == "repair"
    evidence = evidence_of(verdict, "code-profile-unit-tests")
    assert "fail-to-pass 0 of 1" in evidence
    assert "tests.test_calc::test_mul (skipped)" in evidence


def test_exiting_0_on_import_before_any_test_runs_leaves_no_report(
        worker: Agent, task: Project, workspace: Path) -> None:
    begin_code(worker)
    settle_baseline(worker)
    worker.write("calc.py", "import os\nos._exit(0)\n" + WRONG)
    result = run(worker, "unit-tests")["result"]
    assert (result["exitCode"], result["passed"], result["failureKind"]) == (0, False,
                                                                              "no-report")
    assert verify(worker)["decision"] == "repair"


def test_deleting_a_file_the_task_never_named_fails_the_scope_check(
        worker: Agent, workspace: Path, project: Project) -> None:
    (workspace / "notes.md").write_text("keep me\n")
    response = worker.begin({
        "objective": "Write README.md with an Install section",
        "claims": [{"id": "readme", "statement": "README has Install", "importance": "critical",
                    "verification": "deterministic", "check_ids": ["install"]},
                   {"id": "scope", "statement": "Only README.md changes",
                    "importance": "important", "verification": "deterministic",
                    "check_ids": ["only-readme"]}],
        "checks": [{"id": "install", "kind": "file_contains", "path": "README.md",
                    "text": "## Install"},
                   {"id": "only-readme", "kind": "changes_within", "paths": ["README.md"]}]})
    assert response.status_code == 201, response.content
    assert response.json()["assessment"]["baselines"] == {"install": "fails",
                                                          "only-readme": "passes"}
    (workspace / "notes.md").unlink()
    worker.write("README.md", "## Install\n")
    verdict = verify(worker)
    assert verdict["decision"] == "repair"
    assert "notes.md (deleted)" in evidence_of(verdict, "only-readme")
    (workspace / "notes.md").write_text("keep me\n")
    assert verify(worker)["decision"] == "certified"


def _log_checks(tools: int) -> dict[str, Any]:
    checks: list[dict[str, Any]] = [{"id": f"ran-{n}", "kind": "tool_succeeded",
                                     "tool": f"tool_{n}"} for n in range(tools)]
    checks += [{"id": "no-push", "kind": "tool_not_called", "tool": "git_push"},
               {"id": "no-errors", "kind": "no_tool_errors"}]
    return {"objective": "Run the tools", "claims": [
        {"id": f"c-{check['id']}", "statement": "part", "importance": "critical",
         "verification": "deterministic", "check_ids": [check["id"]]} for check in checks],
        "checks": checks}


def test_rule_14_5_log_checks_are_judged_on_an_empty_log_after_the_boundary_without_a_query(
        worker: Agent) -> None:
    """A tool that succeeded before the contract starts does not make its check pass at the
    baseline; and the baseline of log checks reads no event (no event can follow the
    boundary), so eight of them cost the queries one does."""
    worker.sync()
    worker.trace.tool("tool_0")  # before the boundary: not evidence
    worker._post()
    counts, answers = [], []
    for tools in (1, 1, 8):  # the first also records the tree (hashed for the first time)
        with CaptureQueriesContext(connection) as captured:
            response = worker.client.post(f"/sessions/{worker.id}/assess", _log_checks(tools))
        assert response.status_code == 200, response.content
        counts.append(len(captured.captured_queries))
        answers.append(response.json()["assessment"]["baselines"])
    assert answers[2] == {**{f"ran-{n}": "fails" for n in range(8)},
                          "no-push": "passes", "no-errors": "passes"}
    assert counts[1] == counts[2]


def test_a_contract_whose_only_check_already_holds_is_refused_when_evidence_must_discriminate(
        worker: Agent, workspace: Path, project: Project) -> None:
    (workspace / "README.md").write_text("## Install\n")
    body = {"objective": "Document the install", "claims": [
        {"id": "readme", "statement": "README exists", "importance": "critical",
         "verification": "deterministic", "check_ids": ["exists"]}],
        "checks": [{"id": "exists", "kind": "file_exists", "path": "README.md"}]}
    warned = worker.client.post(f"/sessions/{worker.id}/assess", body).json()["assessment"]
    assert warned["baselines"] == {"exists": "passes"}
    assert [f["severity"] for f in warned["findings"]
            if f["code"] == "claim_not_discriminating"] == ["warning"]
    project_set(project=project, require_discriminating_evidence=True)
    refused = worker.begin(body)
    assert refused.status_code == 200, refused.content
    answer = refused.json()
    assert answer["status"] == "review-required"
    [finding] = [f for f in answer["assessment"]["findings"]
                 if f["code"] == "claim_not_discriminating"]
    assert (finding["severity"], finding["claimId"]) == ("error", "readme")
    assert worker.status()["contract"] is None  # nothing written


def test_protected_changes_are_refused_when_review_is_off_and_nothing_is_written(
        worker: Agent, task: Project) -> None:
    response = worker.client.post(f"/sessions/{worker.id}/code-contracts", {
        "objective": "Add a regression test", "claims": [], "checks": [],
        "protected_changes": ["tests/test_regression.py"]})
    assert response.status_code == 422, response.content
    [detail] = response.json()["error"]["details"]
    assert detail == {"path": "protected_changes",
                      "message": "protected paths can only be opened by a person's review"}
    assert worker.status()["contract"] is None

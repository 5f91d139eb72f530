"""docs/operations.md, "Evidence the agent cannot shape": the report profiles' file loads as
written, and its pytest profile runs as written — from the operator's venv (made as the guide
says, moved under the test's own directory), mounted read-only — in the real sandbox: its
baseline run fails the test the task is about (never `infrastructure`), and the fix is
certified."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command

from governor.models import Project
from tests.api.test_code_verification import run
from tests.api.test_contracts import Agent
from tests.api.test_evidence_the_agent_cannot_shape import RIGHT, TESTS, WRONG
from tests.api.test_workspace_trees import verify
from tests.conftest import AgentClient
from tests.docs.markdown import ROOT, fenced_blocks, operator_environment_moved
from verification.models import VerificationRun

pytestmark = pytest.mark.sandbox

def report_profiles() -> str:
    """The section's profile file of report profiles (pytest, Vitest, go test), which stands
    under its subsection "Runner control is protected by default"."""
    (block,) = [block for block in fenced_blocks(ROOT / "docs" / "operations.md")
                if block.language == "json" and '"id": "vitest"' in block.text]
    return block.text


def test_rule_17_8_the_report_profiles_pytest_runs_as_written_from_the_operators_venv(
        agent: AgentClient, workspace: Path, project: Project,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    environment = tmp_path_factory.mktemp("environments") / "py311"
    # As the guide makes it (A careful operator's configuration).
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", "--without-pip",  # noqa: S603
                    str(environment)], check=True)
    # The pytest profile as written (each of the three is required, so a project that loads
    # all three runs all three in every contract: this one holds Python only).
    (pytest_profile, *_) = json.loads(
        operator_environment_moved(report_profiles(), environment))["profiles"]
    assert pytest_profile["id"] == "pytest"
    profiles = tmp_path_factory.mktemp("profiles") / "profiles.json"
    profiles.write_text(json.dumps({"profiles": [pytest_profile]}))
    out, err = io.StringIO(), io.StringIO()
    call_command("governor_profiles", "load", str(profiles), "--project", project.slug,
                 stdout=out, stderr=err)
    assert "1 changed" in out.getvalue() and err.getvalue() == ""

    (workspace / "calc.py").write_text(WRONG)
    (workspace / "tests").mkdir()
    (workspace / "tests" / "test_calc.py").write_text(TESTS)
    (workspace / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    worker = Agent(agent, workspace)
    begun = worker.client.post(f"/sessions/{worker.id}/code-contracts", {
        "objective": "Fix mul", "claims": [{
            "id": "mul-fixed", "statement": "The tests pass", "importance": "critical",
            "verification": "deterministic", "check_ids": ["tests-pass"]}],
        "checks": [{"id": "tests-pass", "kind": "code_verification_succeeded",
                    "profile": "pytest"}]})
    assert begun.status_code == 201, begun.content
    baseline = VerificationRun.objects.get(session_id=worker.id, baseline=True,
                                           profile__profile_id="pytest")
    assert baseline.result["failureKind"] == "exit", (baseline.result, baseline.detail)
    assert (baseline.result["report"]["passed"], baseline.result["report"]["failed"]) == (1, 1)
    worker.write("calc.py", RIGHT)
    result = run(worker, "pytest")["result"]
    assert result["passed"], result
    assert verify(worker)["decision"] == "certified"
    assert json.loads(report_profiles())["profiles"][0]["environment"] == [
        "/srv/governor/environments/py311"]

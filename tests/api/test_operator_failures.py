"""Issue 40, item 2: runs that fail for the operator's reasons say so — the failure kind and its
reason on the timeline, in the run the agent reads and in its turn-stop answer, worded for who
can act (the operator), and the agent is not told to ask for a run that cannot help — and a
baseline run that could not run is run again when the profile is edited, or when the agent asks
for a run, so a contract is never stuck on it. Real bubblewrap and real pytest in the sandbox."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from governor.domain.profiles import validate_profile
from governor.domain.verification import CONFIGURATION_REASON
from governor.models import Project
from governor.services.profiles import profile_store
from tests.api.test_code_verification import run
from tests.api.test_contracts import Agent
from tests.api.test_evidence_the_agent_cannot_shape import (
    RIGHT,
    TESTS,
    WRONG,
    begin_code,
    evidence_of,
)
from tests.api.test_workspace_trees import verify
from tests.conftest import AgentClient
from verification.models import VerificationRun, VerifierProfile

pytestmark = pytest.mark.sandbox

PYTEST = ["/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider",
          "--junitxml=/governor-report/junit.xml", "tests"]
MISSING = "/opt/no-such-python/bin/python3"  # a command the sandbox does not have


def store(project: Project, argv: list[str]) -> VerifierProfile:
    return profile_store(model=VerifierProfile, project=project, validated=validate_profile({
        "id": "unit-tests", "description": "The unit tests", "argv": argv,
        "report": "junit", "timeout_ms": 60_000, "protected_paths": ["tests/**"]}))[0]


@pytest.fixture
def broken(workspace: Path, project: Project, agent: AgentClient) -> Agent:
    """mul is wrong; the operator's report profile names a command the sandbox lacks, so its
    baseline run fails as `configuration` — the operator's to fix."""
    (workspace / "calc.py").write_text(WRONG)
    (workspace / "tests").mkdir()
    (workspace / "tests" / "test_calc.py").write_text(TESTS)
    (workspace / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    store(project, [MISSING, *PYTEST[1:]])
    worker = Agent(agent, workspace)
    begin_code(worker)
    return worker


def baselines(worker: Agent) -> list[VerificationRun]:
    return list(VerificationRun.objects.filter(session_id=worker.id, baseline=True)
                .order_by("created_at"))


def test_issue_40_a_baseline_that_could_not_run_is_said_to_the_agent_as_the_operators(
        broken: Agent) -> None:
    (baseline,) = baselines(broken)
    assert baseline.result["failureKind"] == "configuration"
    # The agent never sees the profile's command (rules §8): the reason does not name it.
    assert baseline.result["failureReason"] == CONFIGURATION_REASON
    assert MISSING in baseline.detail  # the operator's detail does
    stop = broken.client.post(f"/sessions/{broken.id}/turn-stop", {}).json()
    assert stop["action"] == "steer"
    message = stop["message"]
    evidence = evidence_of(stop, "code-profile-unit-tests")
    assert evidence.startswith("Its baseline run on the contract-start tree of profile "
                               "'unit-tests' could not run (configuration: ")
    assert CONFIGURATION_REASON in evidence and "This is the operator's to fix" in evidence
    assert MISSING not in message
    assert "Tell the user exactly what the operator must fix" in message
    assert "ask for one with reliability_code_verify" not in message
    assert "Then verify again" not in message
    check = next(r for r in stop["attempt"]["results"] if r["id"] == "code-profile-unit-tests")
    assert check["operatorFailure"]["kind"] == "configuration"


def test_issue_40_a_failed_baseline_runs_again_once_the_operator_edits_the_profile(
        broken: Agent, project: Project, workspace: Path) -> None:
    store(project, PYTEST)  # the operator fixes the command: a new baseline runs (in-process)
    first, second = baselines(broken)
    assert second.result["failureKind"] == "exit" and second.result["report"]["failed"] == 1
    broken.write("calc.py", RIGHT)
    assert run(broken, "unit-tests")["result"]["passed"]
    verdict = verify(broken)
    assert verdict["decision"] == "certified", verdict["message"]
    assert len(baselines(broken)) == 2  # the run asked for did not queue a third


def test_issue_40_a_failed_baseline_runs_again_when_the_agent_asks_for_a_run(
        workspace: Path, project: Project, agent: AgentClient,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """The operator mends what failed without editing the profile (an operator environment
    directory that was missing is back), and the agent asks for a run: the baseline runs
    again with it."""
    (workspace / "calc.py").write_text(WRONG)
    (workspace / "tests").mkdir()
    (workspace / "tests" / "test_calc.py").write_text(TESTS)
    (workspace / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    environment = tmp_path_factory.mktemp("operator-environment")
    environment.chmod(0o755)
    profile_store(model=VerifierProfile, project=project, validated=validate_profile({
        "id": "unit-tests", "description": "The unit tests", "argv": PYTEST,
        "report": "junit", "timeout_ms": 60_000, "environment": [str(environment)]}))
    environment.rmdir()  # gone when the contract activates
    worker = Agent(agent, workspace)
    begin_code(worker)
    (first,) = baselines(worker)
    assert first.result["failureKind"] == "infrastructure"
    assert "does not exist" in first.result["failureReason"]
    assert "This is the operator's to fix" in verify(worker)["message"]

    environment.mkdir()  # the operator puts it back
    environment.chmod(0o755)
    worker.write("calc.py", RIGHT)
    assert run(worker, "unit-tests")["result"]["passed"]
    first, second = baselines(worker)
    assert second.result["failureKind"] == "exit" and second.result["report"]["failed"] == 1
    assert verify(worker)["decision"] == "certified"


def test_issue_40_the_timeline_says_why_a_run_failed_and_who_can_fix_it(
        broken: Agent, project: Project, reviewer: Any) -> None:
    client = Client()
    client.force_login(reviewer)
    page = client.get(f"/sessions/{broken.id}/").content.decode()
    assert "configuration" in page
    assert "For the operator to fix: the run could not start" in page
    assert f"{MISSING} does not exist in the sandbox" in page

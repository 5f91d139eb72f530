"""Rules §17.8, "the environment is the operator's" (issue 38, finding 1), with real pytest
(Debian's python3-pytest) in the real bubblewrap sandbox: a workspace environment directory is
hashed when the session's reference is taken and held against it at every run, so a
`sitecustomize.py` the agent plants there after `begin` is `environment-changed`, never
certified; an operator directory outside every workspace is mounted read-only at its own path,
and the sandbox cannot write it. Review is off, as in the attack."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from governor.domain.tree import environment_reference
from governor.models import Event, Project, Session
from governor.services.projects import project_set
from governor.services.reviews import review_decide
from governor.services.runs import run_finish
from governor.verify import verify_export
from reviews.models import Review
from tests.api.test_code_verification import add_profile, run
from tests.api.test_contracts import Agent
from tests.api.test_evidence_the_agent_cannot_shape import (
    RIGHT,
    TESTS,
    WRONG,
    begin_code,
    evidence_of,
    settle_baseline,
)
from tests.api.test_export_and_verify import export_text
from tests.api.test_workspace_trees import verify
from tests.conftest import INTENT, AgentClient
from tests.pages import reviewer_client
from verification.models import VerificationRun, VerifierProfile

pytestmark = pytest.mark.sandbox

SITE = ".venv/site-packages"
# What the attacker plants: at interpreter start-up, a correct `calc` replaces the one the
# tests import — the work itself is never done.
SITECUSTOMIZE = textwrap.dedent("""\
    import sys
    import types

    calc = types.ModuleType("calc")
    exec("def mul(a, b):\\n    return a * b\\n", calc.__dict__)
    sys.modules["calc"] = calc
    """)


def pytest_profile(project: Project, environment: list[str], **extra: Any) -> None:
    add_profile(project, "unit-tests",
                ["/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                 "--junitxml=/governor-report/junit.xml", "tests"],
                report="junit", timeout_ms=60_000, environment=environment,
                protected_paths=["tests/**"], **extra)


@pytest.fixture
def task(workspace: Path, project: Project) -> Project:
    """mul is wrong and the operator's tests say so; the unit tests need the workspace's
    `.venv` (excluded from the tree), on PYTHONPATH."""
    (workspace / "calc.py").write_text(WRONG)
    (workspace / "tests").mkdir()
    (workspace / "tests" / "test_calc.py").write_text(TESTS)
    (workspace / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (workspace / SITE).mkdir(parents=True)
    (workspace / SITE / "helpers.py").write_text("READY = True\n")
    project_set(project=project, tree_exclusions=[".venv/**"])
    pytest_profile(project, [".venv"], env={"PYTHONPATH": f"/workspace/{SITE}"})
    return project


def test_rule_17_8_a_sitecustomize_planted_in_the_workspace_environment_after_begin_is_environment_changed(  # noqa: E501
        agent: AgentClient, task: Project, workspace: Path) -> None:
    worker = Agent(agent, workspace)  # its reference hashes .venv as the operator left it
    session = Session.objects.get(pk=worker.id)
    assert set(session.reference["environment"]) == {".venv"}
    begin_code(worker)
    baseline = settle_baseline(worker)
    assert baseline.result["report"]["failed"] == 1  # the environment as it was: mul is wrong

    (workspace / SITE / "sitecustomize.py").write_text(SITECUSTOMIZE)  # the attack
    result = run(worker, "unit-tests")["result"]
    assert (result["passed"], result["failureKind"]) == (False, "environment-changed"), result
    assert result["environmentChanges"] == [
        {"path": ".venv/site-packages/sitecustomize.py", "kind": "added"}]
    assert ".venv/site-packages/sitecustomize.py (added)" in result["failureReason"]
    verdict = verify(worker)
    assert verdict["decision"] == "repair", verdict["message"]
    assert ".venv/site-packages/sitecustomize.py (added)" in evidence_of(
        verdict, "code-profile-unit-tests")
    assert "The environment is the operator's" in verdict["message"]

    # Put back as it was, and the real fix made: certified.
    (workspace / SITE / "sitecustomize.py").unlink()
    worker.write("calc.py", RIGHT)
    assert run(worker, "unit-tests")["result"]["passed"]
    assert verify(worker)["decision"] == "certified"


def test_rule_17_8_the_offline_verifier_refuses_a_pass_whose_environment_is_not_the_references(
        agent: AgentClient, task: Project, workspace: Path) -> None:
    """The reference records the environment in the log, so an export shows it: a server that
    recorded a pass with another environment (written here through the run service, as a
    faulty path would) is caught by `governor.verify`."""
    worker = Agent(agent, workspace)
    begin_code(worker)
    settle_baseline(worker)
    worker.write("calc.py", RIGHT)
    honest = run(worker, "unit-tests")["result"]
    assert honest["passed"] and honest["environment"]["trees"][".venv"]
    assert verify_export(export_text(agent, worker.id).splitlines()).ok

    profile = VerifierProfile.objects.get(project=task, profile_id="unit-tests")
    forged = VerificationRun.objects.create(
        session_id=worker.id, profile=profile, profile_receipt=profile.receipt,
        definition=profile.definition())
    record = {name: value for name, value in honest.items() if name not in (
        "verificationId", "profile", "profileReceipt", "startedAfterSeq", "receipt")}
    record["environment"] = environment_reference({".venv": "gittree:sha256:" + "0" * 64})
    run_finish(run=forged, record=record)
    report = verify_export(export_text(agent, worker.id).splitlines())
    assert not report.ok
    assert "passed with an environment directory (.venv)" in str(report.failure)


def test_rule_17_8_an_environment_directory_a_profile_declares_after_the_reference_is_refused(
        agent: AgentClient, workspace: Path, project: Project) -> None:
    (workspace / "calc.py").write_text(WRONG)
    (workspace / ".venv").mkdir()
    (workspace / ".venv" / "helpers.py").write_text("READY = True\n")
    project_set(project=project, tree_exclusions=[".venv/**"])
    worker = Agent(agent, workspace)  # no profile declares .venv yet: the reference has none
    add_profile(project, "lint", ["/bin/true"], environment=[".venv"])
    begin_code(worker)
    result = run(worker, "lint")["result"]
    assert (result["passed"], result["failureKind"]) == (False, "environment-changed")
    assert ".venv/ (not hashed at the reference)" in result["failureReason"]


@pytest.fixture
def operator_environment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An operator's directory outside every workspace root (the workspace root is the test's
    own tmp_path): a module the tests import, readable by the sandbox user."""
    directory = tmp_path_factory.mktemp("operator-environment")
    os.chmod(directory, 0o755)  # noqa: S103 - the sandbox user reads it
    (directory / "helpers.py").write_text("def mul(a, b):\n    return a * b\n")
    os.chmod(directory / "helpers.py", 0o644)
    return directory


def test_rule_17_8_an_operator_environment_directory_is_mounted_read_only_at_its_own_path(
        agent: AgentClient, workspace: Path, project: Project,
        operator_environment: Path) -> None:
    (workspace / "tests").mkdir()
    (workspace / "tests" / "test_helpers.py").write_text(textwrap.dedent(f"""\
        import pathlib

        import pytest
        from helpers import mul


        def test_the_operator_environment_is_there():
            assert mul(3, 4) == 12


        def test_the_operator_environment_cannot_be_written():
            with pytest.raises(OSError):
                pathlib.Path("{operator_environment}/planted.py").write_text("x = 1")
        """))
    pytest_profile(project, [str(operator_environment)],
                   env={"PYTHONPATH": str(operator_environment)})
    worker = Agent(agent, workspace)
    begin_code(worker)
    result = run(worker, "unit-tests")["result"]
    assert result["passed"], result
    assert (result["report"]["passed"], result["report"]["failed"]) == (2, 0)
    assert result["environment"] is None  # an operator directory is the profile's, not hashed
    assert not (operator_environment / "planted.py").exists()


def test_rule_17_8_an_operator_environment_that_is_gone_fails_the_run_for_the_operator(
        agent: AgentClient, workspace: Path, project: Project,
        operator_environment: Path) -> None:
    pytest_profile(project, [str(operator_environment)])
    worker = Agent(agent, workspace)
    begin_code(worker)
    (operator_environment / "helpers.py").unlink()
    operator_environment.rmdir()
    answer = run(worker, "unit-tests")
    result = answer["result"]
    assert (result["passed"], result["failureKind"]) == (False, "infrastructure")
    assert (f"the operator environment directory {operator_environment} does not exist"
            in result["failureReason"])
    verdict = verify(worker)
    assert verdict["decision"] == "repair"
    assert "This is the operator's to fix" in verdict["message"]
    assert "asking for another run does not help" in verdict["message"]
    assert "ask for one with reliability_code_verify" not in verdict["message"]


def test_rule_17_8_environment_changes_a_person_approved_run_as_the_workspace_has_them(
        agent: AgentClient, task: Project, workspace: Path, reviewer: Any) -> None:
    """`environment_changes` (as `protected_changes`, §14.4): shown first on the evidence
    page, bound by the approval's receipt, and a run's environment may then differ from the
    reference there — nowhere else."""
    project_set(project=task, review_mode="required")
    worker = Agent(agent, workspace)
    begun = worker.client.post(f"/sessions/{worker.id}/code-contracts", {
        "objective": "Fix mul in calc.py", "claims": [], "checks": [], "intent": INTENT,
        "environment_changes": [f"{SITE}/mulfix.py"]})
    assert begun.status_code == 202, begun.content
    for stage in ("intent", "evidence"):
        review = Review.objects.get(session_id=worker.id, stage=stage)
        if stage == "evidence":
            assert review.proposal["environmentChanges"] == [f"{SITE}/mulfix.py"]
            page = reviewer_client("rita", "rita-password-1").get(f"/reviews/{review.pk}/")
            assert "This plan opens the environment" in page.content.decode()
        review_decide(user=reviewer, review=review, receipt=review.receipt, decision="approved")
    contract = Event.objects.get(session_id=worker.id, type="reliability/contract").data
    assert contract["environmentChanges"] == [f"{SITE}/mulfix.py"]
    settle_baseline(worker)

    (workspace / SITE / "mulfix.py").write_text("FACTOR = 1\n")  # opened: it runs
    assert run(worker, "unit-tests")["result"]["failureKind"] == "exit"  # it ran: mul is wrong
    (workspace / SITE / "sitecustomize.py").write_text(SITECUSTOMIZE)  # not opened
    result = run(worker, "unit-tests")["result"]
    assert result["failureKind"] == "environment-changed"
    assert result["environmentChanges"] == [
        {"path": ".venv/site-packages/sitecustomize.py", "kind": "added"}]
    (workspace / SITE / "sitecustomize.py").unlink()
    worker.write("calc.py", RIGHT)
    passed = run(worker, "unit-tests")["result"]
    assert passed["passed"], passed
    session = Session.objects.get(pk=worker.id)
    assert passed["environment"]["trees"][".venv"] != session.reference["environment"][".venv"]
    # The export carries the opened paths in the contract: the offline verifier accepts it.
    report = verify_export(export_text(agent, worker.id).splitlines())
    assert report.ok, report.failure


def test_rule_17_8_environment_changes_are_refused_when_no_person_reviews(
        agent: AgentClient, task: Project, workspace: Path) -> None:
    worker = Agent(agent, workspace)
    begun = worker.client.post(f"/sessions/{worker.id}/code-contracts", {
        "objective": "Fix mul in calc.py", "claims": [], "checks": [],
        "environment_changes": [".venv/**"]})
    assert begun.status_code == 422
    assert begun.json()["error"]["details"] == [{"path": "environment_changes", "message": (
        "the environment can only be opened by a person's review")}]
    assert not Event.objects.filter(session_id=worker.id, type="reliability/contract").exists()

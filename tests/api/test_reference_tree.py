# ruff: noqa: F811 - the imported fixtures are the parameters of the tests below
"""rules §17.1 and §17.2 through the API, with real pytest (Debian's python3-pytest) in the real
sandbox and real git: every session has a reference the agent did not choose, recorded in its
log; protected paths are judged against it, and every trusted run — the baseline run too —
takes them from it, so tampering done *before* begin is still a change and never what the
tests ran on. Review is off, as in the attacks, unless a person must open a path."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from governor.domain.canonical import receipt
from governor.domain.tree import blob_id
from governor.models import Blob, Event, Project, Session
from governor.services.projects import project_set
from governor.services.reviews import review_decide
from reviews.models import Review
from tests.api.test_code_verification import run
from tests.api.test_contracts import Agent, readme_contract
from tests.api.test_evidence_the_agent_cannot_shape import (  # noqa: F401 - the fixtures
    RIGHT,
    TESTS,
    WRONG,
    begin_code,
    evidence_of,
    settle_baseline,
    task,
    worker,
)
from tests.api.test_export_and_verify import lines_of, rehashed, verify_cli
from tests.api.test_snapshot_sessions import upload_directory
from tests.api.test_workspace_trees import verify
from tests.conftest import INTENT, AgentClient
from tests.pages import reviewer_client
from verification.models import VerificationRun

sandboxed = pytest.mark.sandbox

# What an agent that cannot fix mul does to the operator's tests before it begins (road 3):
# the failing test deleted, a conftest that deselects it, the test made to expect the wrong
# answer (mul adds, so mul(3, 4) is 7).
WITHOUT_THE_FAILING_TEST = TESTS.split("def test_mul():")[0] + "def test_mul_of_twos():" + (
    TESTS.split("def test_mul_of_twos():")[1])
DESELECTING_CONFTEST = textwrap.dedent("""\
    def pytest_collection_modifyitems(config, items):
        items[:] = [item for item in items if item.name != "test_mul"]
    """)
EXPECTING_THE_WRONG_ANSWER = TESTS.replace("mul(3, 4) == 12", "mul(3, 4) == 7")


def reference_event(session_id: str) -> dict[str, Any]:
    [event] = Event.objects.filter(session_id=session_id, type="reliability/reference")
    data: dict[str, Any] = event.data
    return data


def _tampered_before_begin_is_not_certified(worker: Agent, path: str, kind: str) -> None:
    """The baseline run and the agent's run both execute the reference's tests (the tampered
    path restored, or an added one left out), so test_mul fails in both: the run that would
    have passed on the tampered tree fails, and the protected-paths check names the change
    made before begin, since the reference."""
    begun = begin_code(worker)
    # what a reviewer sees beside the check before the work: it fails already
    assert begun["assessment"]["baselines"]["protected-paths"] == "fails"
    baseline = settle_baseline(worker)
    assert baseline.result["overlay"]["restored"] == [path]
    assert baseline.result["report"]["failed"] == 1  # test_mul, as the reference has it
    result = run(worker, "unit-tests")["result"]
    assert result["overlay"]["restored"] == [path]
    assert result["passed"] is False and result["report"]["failed"] == 1
    verdict = verify(worker)
    assert verdict["decision"] == "repair", verdict["message"]
    evidence = evidence_of(verdict, "protected-paths")
    assert f"changed since the reference: {path} ({kind})" in evidence
    assert worker.status()["state"] == "active"  # not certified


@sandboxed
def test_rule_17_2_a_failing_test_deleted_before_begin_is_not_certified(
        worker: Agent, task: Project) -> None:
    worker.write("tests/test_calc.py", WITHOUT_THE_FAILING_TEST)
    _tampered_before_begin_is_not_certified(worker, "tests/test_calc.py", "modified")


@sandboxed
def test_rule_17_2_a_deselecting_conftest_written_before_begin_is_not_certified(
        worker: Agent, task: Project) -> None:
    worker.write("conftest.py", DESELECTING_CONFTEST)
    _tampered_before_begin_is_not_certified(worker, "conftest.py", "added")


@sandboxed
def test_rule_17_2_a_test_edited_before_begin_to_expect_the_wrong_answer_is_not_certified(
        worker: Agent, task: Project) -> None:
    """And once the agent restores the test and really fixes mul, it is certified: fail-to-pass
    1 of 1, as the baseline ran the reference's test."""
    worker.write("tests/test_calc.py", EXPECTING_THE_WRONG_ANSWER)
    _tampered_before_begin_is_not_certified(worker, "tests/test_calc.py", "modified")
    worker.write("tests/test_calc.py", TESTS)
    worker.write("calc.py", RIGHT)
    assert run(worker, "unit-tests")["result"]["overlay"]["restored"] == []
    verdict = verify(worker)
    assert verdict["decision"] == "certified", verdict["message"]
    assert "fail-to-pass 1 of 1, pass-to-pass 1 of 1" in evidence_of(
        verdict, "code-profile-unit-tests")


@sandboxed
def test_rule_17_2_the_run_records_its_overlay_in_its_receipted_event(
        worker: Agent, task: Project, tmp_path: Path, reviewer: Any, client: Any) -> None:
    begin_code(worker)
    settle_baseline(worker)
    worker.write("conftest.py", DESELECTING_CONFTEST)
    answer = run(worker, "unit-tests")
    seq = VerificationRun.objects.get(pk=answer["id"]).event_seq
    data = Event.objects.get(session_id=worker.id, seq=seq).data
    overlay = data["overlay"]
    assert overlay["reference"] == reference_event(worker.id)["tree"]["id"]
    assert {"tests/**", "**/conftest.py", "pytest.ini"} <= set(overlay["paths"])
    assert "**/pyproject.toml [tool.pytest.ini_options]" in overlay["sections"]
    assert (overlay["restored"], overlay["restoredCount"]) == (["conftest.py"], 1)
    assert overlay["tree"] != data["tree"]["id"]  # ran without conftest.py, credited with it
    client.force_login(reviewer)  # the timeline's run row says what the run took from it
    page = client.get(f"/sessions/{worker.id}/").content.decode()
    assert ("protected paths from the reference: 1 restored or left out "
            "(<code>conftest.py</code>)") in page
    body = {key: value for key, value in data.items() if key != "receipt"}
    assert receipt("code-verification-result", body) == data["receipt"]
    # An export carries both; a run that says it took its protected paths from another tree
    # (its receipt recomputed, the chain rehashed) is refused by the offline verifier.
    objects = lines_of(worker.client, worker.id)
    assert verify_cli(tmp_path, objects).returncode == 0
    [line] = [obj for obj in objects if obj.get("seq") == seq and obj["kind"] == "event"]
    line["data"]["overlay"]["reference"] = "gittree:sha256:" + "0" * 64
    line["data"]["receipt"] = receipt("code-verification-result", {
        key: value for key, value in line["data"].items() if key != "receipt"})
    result = verify_cli(tmp_path, rehashed(objects))
    assert result.returncode == 1
    assert "its overlay's reference is not the session's reference" in result.stdout, (
        result.stdout)


@sandboxed
def test_rule_17_2_a_path_a_person_opened_runs_as_the_attempt_has_it(
        agent: AgentClient, workspace: Path, task: Project, reviewer: Any) -> None:
    """`protected_changes` (§14.4): the regression test the task must add runs in the
    baseline and in the agent's run, and the overlay says it was opened (`allowed`)."""
    project_set(project=task, review_mode="required")
    worker = Agent(agent, workspace)
    worker.write("tests/test_regression.py",
                 "from calc import mul\n\n\ndef test_mul_by_zero():\n    assert mul(5, 0) == 0\n")
    begun = worker.client.post(f"/sessions/{worker.id}/code-contracts", {
        "objective": "Fix mul in calc.py", "claims": [], "checks": [], "intent": INTENT,
        "protected_changes": ["tests/test_regression.py"]})
    assert begun.status_code == 202, begun.content
    for stage in ("intent", "evidence"):
        review = Review.objects.get(session_id=worker.id, stage=stage)
        if stage == "evidence":  # the reviewer sees what the protected paths are judged against
            page = reviewer_client("rita", "rita-password-1").get(f"/reviews/{review.pk}/")
            assert "<dt>Reference</dt>" in page.content.decode()
            assert "the workspace when the session was created" in page.content.decode()
        review_decide(user=reviewer, review=review, receipt=review.receipt, decision="approved")
    baseline = settle_baseline(worker)
    assert baseline.result["overlay"]["allowed"] == ["tests/test_regression.py"]
    assert baseline.result["overlay"]["restored"] == []
    assert dict(map(tuple, baseline.tests))["tests.test_regression::test_mul_by_zero"] == "failed"
    worker.write("calc.py", RIGHT)
    result = run(worker, "unit-tests")["result"]
    assert result["passed"] is True and result["report"]["passed"] == 3


def test_rule_17_1_the_reference_is_in_the_log_and_verify_checks_it(
        agent: AgentClient, workspace: Path, tmp_path: Path) -> None:
    """A workspace that is no git repository: its tree at creation, written into the log just
    before the first governor event. An export carries it; an edited reference (the chain
    rehashed) fails verification, its receipt first."""
    (workspace / "README.md").write_text("# Project\n")
    worker = Agent(agent, workspace)
    assert worker.status()["next_seq"] == 2  # the agent's own events come first, from seq 0
    worker.write("README.md", "## Install\n")
    assert worker.begin(readme_contract()).status_code == 201
    [reference, contract] = Event.objects.filter(
        session_id=worker.id, origin="governor").order_by("seq")[:2]
    assert (reference.type, contract.type) == ("reliability/reference", "reliability/contract")
    data = reference.data
    assert data["source"] == "first-tree" and data["tree"]["id"].startswith("gittree:sha256:")
    assert data["tree"] != contract.data["startTree"]  # taken at creation, not at begin
    body = {key: value for key, value in data.items() if key != "receipt"}
    assert receipt("reference", body) == data["receipt"]
    objects = lines_of(agent, worker.id)
    assert verify_cli(tmp_path, objects).returncode == 0
    [line] = [obj for obj in objects if obj.get("type") == "reliability/reference"]
    line["data"]["tree"]["id"] = "gittree:sha256:" + "0" * 64
    result = verify_cli(tmp_path, rehashed(objects))
    assert result.returncode == 1
    assert "reliability/reference: data.receipt does not recompute" in result.stdout, (
        result.stdout)


@pytest.mark.usefixtures("private_store")
def test_rule_17_1_a_snapshot_session_s_reference_is_its_first_snapshot(
        agent: AgentClient, tmp_path: Path) -> None:
    """The server holds no repository to read: the first tree the client uploads is the
    reference, and a protected file changed in a later snapshot is a change since it."""
    remote = tmp_path / "laptop"
    (remote / "tests").mkdir(parents=True)
    (remote / "tests" / "test_calc.py").write_text(TESTS)
    session = str(agent.post("/sessions", {"workspace": {"kind": "snapshot"}}).json()["id"])
    first = upload_directory(agent, session, remote)
    (remote / "tests" / "test_calc.py").write_text(EXPECTING_THE_WRONG_ANSWER)
    (remote / "README.md").write_text("## Install\n")
    second = upload_directory(agent, session, remote)
    project_set(project=Session.objects.get(pk=session).project, protected_paths=["tests/**"])
    begun = agent.post(f"/sessions/{session}/contracts", {**readme_contract(),
                                                         "tree": second["tree"]})
    assert begun.status_code == 201, begun.content
    data = reference_event(session)
    assert (data["source"], data["tree"]["id"]) == ("first-snapshot", first["tree"])
    stop = agent.post(f"/sessions/{session}/verify", {"tree": second["tree"]}).json()
    assert stop["decision"] == "repair"
    assert ("changed since the reference: tests/test_calc.py (modified)"
            in evidence_of(stop, "protected-paths"))


# --- git workspaces ----------------------------------------------------------------------------


def git(workspace: Path, *args: str) -> str:
    done = subprocess.run(  # noqa: S603
        ["git", "-C", str(workspace), "-c", "user.name=Operator",  # noqa: S607
         "-c", "user.email=operator@example.com", *args],
        capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture
def repository(workspace: Path, task: Project) -> str:
    """The operator's files committed on `main`, and the branch `upstream` where they are."""
    git(workspace, "init", "-q", "-b", "main")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "operator")
    git(workspace, "branch", "upstream")
    return git(workspace, "rev-parse", "HEAD")


def test_rule_17_1_a_git_workspace_s_reference_is_the_commit_head_names(
        agent: AgentClient, workspace: Path, task: Project, repository: str,
        reviewer: Any) -> None:
    """Tampering left in the working tree before the session starts is not in the reference:
    the protected-paths check names it, since the reference."""
    (workspace / "tests" / "test_calc.py").write_text(EXPECTING_THE_WRONG_ANSWER)
    worker = Agent(agent, workspace)
    project_set(project=task, protected_paths=["tests/**"])
    begun = worker.begin({"objective": "Say how to install", "claims": [
        {"id": "calc", "statement": "calc.py is there", "importance": "critical",
         "verification": "deterministic", "check_ids": ["calc-exists"]}],
        "checks": [{"id": "calc-exists", "kind": "file_exists", "path": "calc.py"}]})
    assert begun.status_code == 201, begun.content
    data = reference_event(worker.id)
    assert (data["source"], data["commit"]) == ("git-head", repository)
    assert "ref" not in data
    page = reviewer_client("rita", "rita-password-1").get(f"/sessions/{worker.id}/")
    assert f'the commit HEAD named (<code title="{repository}">' in page.content.decode()
    verdict = verify(worker)
    assert verdict["decision"] == "repair"
    assert ("changed since the reference: tests/test_calc.py (modified)"
            in evidence_of(verdict, "protected-paths"))


@sandboxed
def test_rule_17_1_reference_ref_names_the_reference_whatever_head_says(
        agent: AgentClient, workspace: Path, task: Project, repository: str) -> None:
    """The agent commits its tampering before the session starts, so HEAD holds it; the
    project's `reference_ref` names the operator's branch, and the baseline runs its tests."""
    (workspace / "tests" / "test_calc.py").write_text(EXPECTING_THE_WRONG_ANSWER)
    git(workspace, "commit", "-q", "-am", "tests agree with the code")
    call_command("governor_project", "set", task.slug, "--reference-ref", "upstream")
    assert agent.get("/project").json()["reference_ref"] == "upstream"
    worker = Agent(agent, workspace)
    _tampered_before_begin_is_not_certified(worker, "tests/test_calc.py", "modified")
    data = reference_event(worker.id)
    assert (data["source"], data["ref"], data["commit"]) == ("git-ref", "upstream", repository)


@pytest.mark.parametrize("git_repository", [True, False])
def test_rule_17_1_a_reference_ref_that_does_not_resolve_refuses_the_session_naming_it(
        agent: AgentClient, workspace: Path, project: Project, git_repository: bool) -> None:
    (workspace / "calc.py").write_text(WRONG)
    if git_repository:
        git(workspace, "init", "-q", "-b", "main")
        git(workspace, "add", "-A")
        git(workspace, "commit", "-q", "-m", "operator")
    project_set(project=project, reference_ref="origin/main")
    response = agent.post("/sessions", {"workspace": {"kind": "path", "path": str(workspace)}})
    assert response.status_code == 422, response.content
    [detail] = response.json()["error"]["details"]
    assert detail["path"] == "reference_ref" and "'origin/main'" in detail["message"]
    assert not Session.objects.exists() and not Event.objects.exists()  # nothing written


def test_rule_17_1_a_reference_ref_that_is_no_ref_is_refused_when_set(project: Project) -> None:
    with pytest.raises(CommandError) as refused:
        call_command("governor_project", "set", project.slug, "--reference-ref=--output=x")
    assert "reference_ref" in str(refused.value)
    project.refresh_from_db()
    assert project.reference_ref == ""


def test_rule_17_1_a_gitfile_naming_another_repository_is_never_read(
        agent: AgentClient, workspace: Path, tmp_path: Path) -> None:
    """A `.git` file (or symlink) may name any repository the server can read: its objects
    would become this project's blobs. Only a `.git` directory of the workspace's own is read;
    otherwise the reference is the workspace's tree, and says why."""
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "secret.txt").write_text("another project's file\n")
    git(other, "init", "-q", "-b", "main")
    git(other, "add", "-A")
    git(other, "commit", "-q", "-m", "theirs")
    (workspace / "calc.py").write_text(WRONG)
    (workspace / ".git").write_text(f"gitdir: {other / '.git'}\n")
    worker = Agent(agent, workspace)
    assert worker.begin(readme_contract()).status_code == 201
    data = reference_event(worker.id)
    assert data["source"] == "first-tree" and "not a directory of its own" in data["reason"]
    assert not Blob.objects.filter(blob_id=blob_id(b"another project's file\n")).exists()


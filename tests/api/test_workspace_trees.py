"""rules §10.2 and §10.3 through the API: every verdict names the workspace tree it judged,
and a verifier result counts only for the tree it ran on — whatever the log says (or does not
say) about the files. Runs use the real bubblewrap sandbox, in-process."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.exceptions import ValidationError

from governor.domain.tree import blob_id, hash_tree
from governor.models import Blob, Event, Project, Session, WorkspaceTree
from governor.services.projects import project_set
from tests.api.test_code_verification import add_profile, run
from tests.api.test_contracts import Agent, readme_contract
from tests.conftest import AgentClient

LIMIT = 1 << 30


def tree_of(workspace: Path, exclusions: list[str] | None = None) -> str:
    return hash_tree(str(workspace), exclusions=exclusions or [], max_files=LIMIT,
                     max_bytes=LIMIT).id


@pytest.fixture
def worker(agent: AgentClient, workspace: Path) -> Agent:
    return Agent(agent, workspace)


def verify(worker: Agent) -> dict[str, Any]:
    response = worker.client.post(f"/sessions/{worker.id}/verify")
    assert response.status_code == 200, response.content
    return response.json()


def code_contract(worker: Agent) -> None:
    worker.write("README.md", "## Install\n")
    response = worker.client.post(f"/sessions/{worker.id}/code-contracts", readme_contract())
    assert response.status_code == 201, response.content


# --- §10.2: begin and attempts name their trees ---------------------------------------------


def test_rule_10_2_begin_records_start_tree_and_each_attempt_the_tree_it_judged(
    worker: Agent, workspace: Path, project: Project
) -> None:
    (workspace / "notes.txt").write_text("before\n")
    contract = worker.begin(readme_contract()).json()["contract"]
    start = contract["startTree"]
    assert start["id"] == tree_of(workspace)
    assert start["exclusions"].startswith("sha256:")
    worker.write("README.md", "## Install\n")
    answer = worker.turn_stop()
    assert answer["terminal"]["status"] == "certified"
    judged = answer["attempt"]["tree"]
    assert judged == {"id": tree_of(workspace), "exclusions": start["exclusions"]}
    assert judged["id"] != start["id"]
    record = WorkspaceTree.objects.get(project=project, tree_id=judged["id"])
    assert record.manifest[0][:2] == ["README.md", "100644"]
    assert (record.files, record.exclusions_digest) == (2, judged["exclusions"])
    # The stat cache is the server's, per session, readable by the server alone.
    cache = Path(settings.VAR_DIR) / "tree-cache" / f"{worker.id}.json"
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600


def test_rule_10_4_a_corrupt_stat_cache_is_only_a_cold_hash(
    worker: Agent, workspace: Path
) -> None:
    worker.begin(readme_contract())
    (Path(settings.VAR_DIR) / "tree-cache" / f"{worker.id}.json").write_text("{not json")
    worker.write("README.md", "## Install\n")
    answer = worker.turn_stop()
    assert answer["terminal"]["status"] == "certified"
    assert answer["attempt"]["tree"]["id"] == tree_of(workspace)


def test_rule_10_4_a_stat_cache_that_cannot_be_written_only_makes_hashes_cold(
    worker: Agent, workspace: Path
) -> None:
    worker.begin(readme_contract())
    cache = Path(settings.VAR_DIR) / "tree-cache" / f"{worker.id}.json"
    cache.unlink()
    cache.mkdir()  # neither readable as a cache nor replaceable by one
    try:
        worker.write("README.md", "## Install\n")
        answer = worker.turn_stop()
    finally:
        cache.rmdir()
    assert answer["terminal"]["status"] == "certified"
    assert answer["attempt"]["tree"]["id"] == tree_of(workspace)


# --- §10.3: a result counts only for the tree it ran on --------------------------------------


@pytest.mark.sandbox
def test_rule_10_3_a_change_on_disk_no_event_reports_makes_an_earlier_pass_stale(
    worker: Agent, workspace: Path, project: Project
) -> None:
    add_profile(project, "unit-tests", ["/bin/sh", "-c", "! grep -q broken /workspace/app.py"])
    (workspace / "app.py").write_text("print('ok')\n")
    code_contract(worker)
    passed = run(worker, "unit-tests")["result"]
    assert passed["passed"] and passed["tree"] == passed["treeBefore"]
    # A background process (a formatter, a second agent) breaks the file; no event says so.
    (workspace / "app.py").write_text("broken\n")
    verdict = verify(worker)
    assert verdict["decision"] == "repair"
    [evidence] = [r["evidence"] for r in verdict["attempt"]["results"]
                  if r["id"] == "code-profile-unit-tests"]
    ran_on, now = passed["tree"]["id"], verdict["attempt"]["tree"]["id"]
    assert (f"stale: ran on gittree:sha256:{ran_on[15:27]}…, the workspace is now "
            f"{now[15:27]}…") in evidence
    assert run(worker, "unit-tests")["result"]["passed"] is False  # the truth, re-run


@pytest.mark.sandbox
def test_rule_10_3_an_edit_by_a_tool_named_like_a_governor_tool_makes_a_pass_stale(
    worker: Agent, workspace: Path, project: Project
) -> None:
    add_profile(project, "unit-tests", ["/bin/sh", "-c", "! grep -q broken /workspace/app.py"])
    (workspace / "app.py").write_text("print('ok')\n")
    code_contract(worker)
    assert run(worker, "unit-tests")["result"]["passed"]
    # Its last name segment is a governor tool's, so rule 4.10 does not see a mutation.
    worker.write("app.py", "broken\n", tool="mcp__helper__reliability_verify")
    verdict = verify(worker)
    assert verdict["decision"] == "repair"
    assert "stale: ran on gittree:sha256:" in verdict["message"]


@pytest.mark.sandbox
def test_rule_10_3_changing_the_exclusions_makes_earlier_results_stale(
    worker: Agent, workspace: Path, project: Project
) -> None:
    add_profile(project, "unit-tests", ["/bin/true"])
    code_contract(worker)
    assert run(worker, "unit-tests")["result"]["passed"]
    project_set(project=project, tree_exclusions=["build/**"])  # no file is under build/
    verdict = verify(worker)
    assert verdict["decision"] == "repair"
    assert "stale: ran with exclusions" in verdict["message"]
    assert run(worker, "unit-tests")["result"]["passed"]
    assert verify(worker)["decision"] == "certified"


# --- §10.2: runs record the trees before and after ---------------------------------------


@pytest.mark.sandbox
def test_rule_10_2_a_workspace_write_run_counts_for_the_tree_it_leaves(
    worker: Agent, workspace: Path, project: Project
) -> None:
    add_profile(project, "generate", ["/bin/sh", "-c", "echo generated > /workspace/gen.txt"],
                sandbox_mode="workspace-write")
    code_contract(worker)
    result = run(worker, "generate")["result"]
    assert result["passed"], result
    assert (workspace / "gen.txt").read_text() == "generated\n"
    assert result["treeBefore"]["id"] != result["tree"]["id"]
    assert result["tree"]["id"] == tree_of(workspace)
    assert verify(worker)["decision"] == "certified"


@pytest.mark.sandbox
def test_rule_10_a_run_on_a_workspace_that_cannot_be_hashed_never_starts(
    worker: Agent, workspace: Path, project: Project
) -> None:
    add_profile(project, "unit-tests", ["/bin/sh", "-c", "touch /tmp/x"])
    code_contract(worker)
    os.mkfifo(workspace / "pipe")
    result = run(worker, "unit-tests")["result"]
    assert (result["passed"], result["failureKind"]) == (False, "infrastructure")
    assert (result["tree"], result["treeBefore"]) == (None, None)


# --- limits and bad input ---------------------------------------------------------------


def test_rule_10_a_workspace_over_the_file_limit_fails_every_check_naming_the_limit(
    worker: Agent, workspace: Path, project: Project
) -> None:
    worker.begin(readme_contract())
    project_set(project=project, tree_max_files=2)
    worker.write("README.md", "## Install\n")
    for name in ("a", "b"):
        (workspace / name).write_text(name)
    answer = verify(worker)
    assert answer["decision"] == "repair"
    assert answer["attempt"]["tree"] is None
    for result in answer["attempt"]["results"]:
        assert not result["passed"]
        assert "max_files=2" in result["evidence"], result["evidence"]
        assert result["evidence"].startswith("Nothing was judged: the workspace tree cannot be "
                                             "hashed")


def test_rule_10_a_workspace_that_cannot_be_read_completely_fails_closed(
    worker: Agent, workspace: Path
) -> None:
    worker.begin(readme_contract())
    worker.write("README.md", "## Install\n")  # what the checks look at is fine ...
    os.mkfifo(workspace / "pipe")  # ... but the tree cannot be hashed
    answer = verify(worker)
    assert answer["decision"] == "repair"
    assert all("'pipe': is a FIFO" in r["evidence"] for r in answer["attempt"]["results"])


def test_rule_10_begin_on_a_workspace_over_the_byte_limit_is_refused_naming_it(
    worker: Agent, workspace: Path, project: Project
) -> None:
    project_set(project=project, tree_max_bytes=10)
    (workspace / "big").write_text("x" * 11)
    response = worker.begin(readme_contract())
    assert response.status_code == 422
    error = response.json()["error"]
    assert "max_bytes=10" in error["message"]
    assert error["details"][0]["path"] == "workspace"
    assert not Event.objects.filter(session_id=worker.id, type="reliability/contract").exists()


def test_issue_25_a_hard_link_to_another_owners_file_is_never_hashed_kept_or_served(
    worker: Agent, workspace: Path, tmp_path: Path
) -> None:
    """The server reads path workspaces as root and keeps each file's bytes in the blob store,
    which the session's token and reviewers read through the files route: a hard link to
    /etc/shadow (where fs.protected_hardlinks=0 lets an agent make one) would leak it. A file
    of uid 12345 stands in for it; the workspace belongs to the tests' user."""
    secret = tmp_path / "shadow"
    secret.write_bytes(b"root:$6$not-for-the-agent:19000:0:99999:7:::\n")
    os.chown(secret, 12345, 12345)
    os.link(secret, workspace / "notes.txt")
    response = worker.begin(readme_contract())
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert "'notes.txt': is a hard link (2 links) to a file owned by uid 12345" in (
        error["message"])
    assert error["details"][0]["path"] == "workspace"
    assert not Blob.objects.filter(blob_id=blob_id(secret.read_bytes())).exists()
    # only the reference, the empty workspace the session was created on (rules §17.1), is kept
    assert [tree.manifest for tree in WorkspaceTree.objects.all()] == [[]]


@pytest.mark.parametrize(("exclusions", "reason"), [
    (["/build"], "must not start or end with '/'"),
    (["a/**b"], "'**' must be a whole path component"),
    (["[a-"], "never closed"),
    ("node_modules", "must be a list of glob patterns"),
])
def test_rule_10_1_project_exclusions_are_refused_naming_the_field_and_reason(
    project: Project, exclusions: Any, reason: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        project_set(project=project, tree_exclusions=exclusions)
    [message] = refused.value.message_dict["tree_exclusions"]
    assert message.startswith("tree_exclusions") and reason in message
    project.refresh_from_db()
    assert project.tree_exclusions == []


@pytest.mark.parametrize(("field", "value"), [("tree_max_files", 0),
                                              ("tree_max_bytes", 0)])
def test_rule_10_tree_limits_are_positive(project: Project, field: str, value: int) -> None:
    with pytest.raises(ValidationError) as refused:
        project_set(project=project, **{field: value})
    assert field in refused.value.message_dict


def test_rule_10_2_the_session_binding_is_what_is_hashed(
    worker: Agent, workspace: Path, tmp_path: Path
) -> None:
    """A workspace swapped for another directory after binding is never hashed (nor judged)."""
    worker.begin(readme_contract())
    worker.write("README.md", "## Install\n")
    workspace.rename(tmp_path / "moved")
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "README.md").write_text("## Install\n")
    answer = verify(worker)
    assert answer["decision"] == "repair" and answer["attempt"]["tree"] is None
    assert "not its bound directory" in answer["attempt"]["results"][0]["evidence"]
    assert Session.objects.get(pk=worker.id).workspace_path == str(workspace)


def test_rule_10_2_a_reviewed_contract_records_the_tree_when_it_becomes_active(
    agent: AgentClient, workspace: Path, project: Project, reviewer: Any
) -> None:
    from governor.services.reviews import review_decide
    from reviews.models import Review
    from tests.conftest import INTENT

    project_set(project=project, review_mode="required")
    session = agent.create_session(workspace)
    (workspace / "README.md").write_text("draft\n")
    assert agent.post(f"/sessions/{session['id']}/contracts",
                      readme_contract(intent=INTENT)).status_code == 202
    intent = Review.objects.get()
    review_decide(user=reviewer, review=intent, receipt=intent.receipt, decision="approved")
    (workspace / "README.md").write_text("## Install\n")  # while the reviewers read
    evidence = Review.objects.get(stage="evidence")
    review_decide(user=reviewer, review=evidence, receipt=evidence.receipt, decision="approved")
    contract = agent.get(f"/sessions/{session['id']}").json()["contract"]
    assert contract["version"] == 5
    assert contract["startTree"]["id"] == tree_of(workspace)


def test_rule_10_an_approval_on_a_workspace_that_cannot_be_hashed_decides_nothing(
    agent: AgentClient, workspace: Path, project: Project, reviewer: Any
) -> None:
    from governor.lib.errors import Invalid
    from governor.services.reviews import review_decide
    from reviews.models import Review
    from tests.conftest import INTENT

    project_set(project=project, review_mode="required")
    session = agent.create_session(workspace)
    assert agent.post(f"/sessions/{session['id']}/contracts",
                      readme_contract(intent=INTENT)).status_code == 202
    intent = Review.objects.get()
    review_decide(user=reviewer, review=intent, receipt=intent.receipt, decision="approved")
    os.mkfifo(workspace / "pipe")
    evidence = Review.objects.get(stage="evidence")
    with pytest.raises(Invalid, match="'pipe': is a FIFO"):
        review_decide(user=reviewer, review=evidence, receipt=evidence.receipt,
                      decision="approved")
    evidence.refresh_from_db()
    assert evidence.status == "pending"
    assert not Event.objects.filter(session_id=session["id"],
                                    type__in=["reliability/contract",
                                              "reliability/contract-review"]).exists()

"""The session timeline: the facts, the contract, attempts, terminal, reviews,
verification runs and events of one session, for the members of its project."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from governor.domain.profiles import validate_profile
from governor.models import Event, Membership, Project, Role
from governor.services.profiles import profile_store
from tests.conftest import AgentClient
from tests.harness_builders import Trace
from tests.pages import press, propose, reviewer_client
from verification.models import VerificationRun, VerifierProfile

pytestmark = pytest.mark.django_db

README_CONTRACT = {
    "objective": "Write README.md with an Install section",
    "claims": [{"id": "readme", "statement": "README.md documents installation",
                "importance": "critical", "verification": "deterministic",
                "check_ids": ["readme-exists", "readme-install"]}],
    "checks": [{"id": "readme-exists", "kind": "file_exists", "path": "README.md"},
               {"id": "readme-install", "kind": "file_contains", "path": "README.md",
                "text": "## Install"}],
    "max_attempts": 3,
}


@pytest.fixture
def rita(reviewer: Any) -> Client:
    return reviewer_client("rita", "rita-password-1")


def timeline(client: Client, session_id: str, query: str = "") -> str:
    response = client.get(f"/sessions/{session_id}/{query}")
    assert response.status_code == 200, response.status_code
    return response.content.decode()


def agent_session(agent: AgentClient, workspace: Path, steps: int = 1) -> str:
    """A live session whose agent took `steps` steps in one open turn."""
    session_id = agent.create_session(workspace)["id"]
    trace = Trace().start_turn()
    for _ in range(steps):
        trace.say()
    assert agent.append(session_id, trace.flush()).status_code == 200
    return session_id


def certified_session(agent: AgentClient, workspace: Path) -> str:
    """Review off: begin, fail the first attempt, fix the file, certify on the second."""
    session_id = agent_session(agent, workspace)
    assert agent.post(f"/sessions/{session_id}/contracts", README_CONTRACT).status_code == 201
    assert agent.post(f"/sessions/{session_id}/verify").json()["decision"] == "repair"
    (workspace / "README.md").write_text("# Tool\n\n## Install\n")
    assert agent.post(f"/sessions/{session_id}/verify").json()["decision"] == "certified"
    return session_id


def test_a_reviewer_and_an_operator_of_the_project_see_the_facts(
    rita: Client, agent: AgentClient, workspace: Path, project: Project
) -> None:
    session_id = agent_session(agent, workspace)
    user = get_user_model().objects.create_user("olga", "olga@example.com", "olga-password-1")
    Membership.objects.create(user=user, project=project, role=Role.OPERATOR)
    for client in (rita, reviewer_client("olga", "olga-password-1")):
        html = timeline(client, session_id)
        assert session_id in html and "acme" in html and str(workspace) in html
        assert "idle" in html
        assert f'href="/sessions/{session_id}/export"' in html


def test_review_off_contract_attempts_and_terminal(
    rita: Client, agent: AgentClient, workspace: Path
) -> None:
    session_id = certified_session(agent, workspace)
    status = agent.get(f"/sessions/{session_id}").json()
    html = timeline(rita, session_id)
    assert "contract format v3" in html and "unreviewed (review off)" in html
    assert "Write README.md with an Install section" in html
    assert "README.md documents installation" in html
    assert "readme-exists" in html and "&quot;## Install&quot;" in html
    first, second = html.split('<article class="attempt">')[1:3]
    assert first.count('<span class="badge bad">failed</span>') == 3  # the attempt, both checks
    assert "README.md does not exist" in first or "README.md" in first
    assert second.count('<span class="badge ok">passed</span>') == 3
    for attempt in status["attempts"]:
        assert attempt["receipt"] in html
    terminal = status["terminal"]
    assert terminal["status"] == "certified"
    assert terminal["receipt"] in html and terminal["reason"] in html
    assert '<span class="state state-certified">certified</span>' in html


def test_a_reviewed_contract_shows_version_5_and_the_review_decisions(
    rita: Client, agent: AgentClient, workspace: Path, project: Project
) -> None:
    Project.objects.filter(pk=project.pk).update(review_mode="required")
    session_id, intent = propose(agent, workspace)
    html = timeline(rita, session_id)
    assert "review-pending" in html and f'href="/reviews/{intent.pk}/"' in html
    press(rita, f"/reviews/{intent.pk}/", "Approve")
    evidence = intent.session.reviews.get(stage="evidence")
    press(rita, f"/reviews/{evidence.pk}/", "Approve")
    html = timeline(rita, session_id)
    contract = agent.get(f"/sessions/{session_id}").json()["contract"]
    assert "contract format v5" in html and '<span class="badge ok">reviewed</span>' in html
    for receipt in contract["review"].values():
        if isinstance(receipt, str) and receipt.startswith("sha256:"):
            assert receipt in html
    assert html.count('<span class="badge ok">approved</span>') == 2
    assert "by rita" in html
    assert "Keep the existing sections of README.md" in html  # the approved intent


def test_events_are_in_order_with_short_hashes_and_pages_of_200(
    rita: Client, agent: AgentClient, workspace: Path
) -> None:
    session_id = agent_session(agent, workspace, steps=90)  # 2 + 270 events
    rows = list(Event.objects.filter(session_id=session_id).order_by("seq"))
    assert len(rows) == 272
    html = timeline(rita, session_id)
    seqs = [int(seq) for seq in re.findall(r'<td data-label="Seq">(\d+)</td>', html)]
    assert seqs == list(range(72, 272))
    assert rows[-1].hash[:12] in html and rows[-1].type in html
    assert 'href="?before=72#events-heading"' in html
    older = timeline(rita, session_id, "?before=72")
    seqs = [int(seq) for seq in re.findall(r'<td data-label="Seq">(\d+)</td>', older)]
    assert seqs == list(range(0, 72))
    assert "?before=" not in older and f'href="/sessions/{session_id}/#events-heading"' in older


def test_governor_events_that_arrived_by_import_are_labelled_imported(
    rita: Client, agent: AgentClient
) -> None:
    events = Trace().start_turn().say().flush()
    contract = {"contractId": "contract-imported", "version": 3, "kind": "general",
                "objective": "Imported objective", "claims": [], "checks": [],
                "maxAttempts": 1, "startedAtSeq": 1, "review": {"mode": "off", "reviewed": False},
                "receipt": "sha256:" + "1" * 64}
    events.append({"type": "reliability/contract", "time": 0, "data": contract})
    events.append({"type": "reliability/terminal", "time": 0,
                   "data": {"contractId": "contract-imported", "status": "abstained",
                            "reason": "imported reason", "receipt": "sha256:" + "2" * 64}})
    events.append({"type": "turn/end", "time": 0,
                   "data": {"turn": 1, "reason": {"kind": "completed"}}})
    text = "\n".join(json.dumps(event) for event in events) + "\n"
    response = agent.post("/sessions/import", raw=text, content_type="application/x-ndjson")
    assert response.status_code == 201, response.content
    html = timeline(rita, response.json()["id"])
    assert html.count('<span class="badge warn">imported</span>') == 4  # origin, 2 events, terminal
    assert "Imported objective" in html and "imported reason" in html
    user_message = re.search(r"<code>user/message</code>(.*?)</td>", html, re.S)
    assert user_message is not None and "imported" not in user_message.group(1)


def profile(project: Project, *, show_output: bool) -> VerifierProfile:
    return VerifierProfile.objects.create(
        project=project, profile_id="unit-tests", description="pytest -q", argv=["pytest", "-q"],
        show_output_to_reviewers=show_output, receipt="sha256:" + "3" * 64)


def run(session_id: str, verifier: VerifierProfile, state: str,
        result: dict[str, Any] | None = None) -> VerificationRun:
    return VerificationRun.objects.create(
        session_id=session_id, profile=verifier, profile_receipt=verifier.receipt,
        definition={}, state=state, result=result, output_tail="FAILED test_install - boom",
        started_at=timezone.now() - timedelta(seconds=2) if state != "queued" else None)


FAILED = {"passed": False, "failureKind": "exit", "exitCode": 2, "signal": None,
          "durationMs": 1234}


def test_verification_runs_show_live_state_and_why_a_run_failed(
    rita: Client, agent: AgentClient, workspace: Path, project: Project
) -> None:
    session_id = agent_session(agent, workspace)
    verifier = profile(project, show_output=False)
    run(session_id, verifier, "finished", FAILED)
    queued = run(session_id, verifier, "queued")
    html = timeline(rita, session_id)
    runs = html.split('<section id="runs"')[1].split("</section>")[0]
    assert f'hx-get="/sessions/{session_id}/live?since=' in runs and "queued" in runs
    assert "failed" in runs and "exit" in runs and "exit code 2" in runs and "1234 ms" in runs
    assert "FAILED test_install" not in runs  # the profile keeps its output from reviewers

    VerificationRun.objects.filter(pk=queued.pk).update(
        state="finished", result={"passed": True, "failureKind": None, "exitCode": 0,
                                  "durationMs": 80}, finished_at=timezone.now())
    version = runs.split("version=")[1].split("&")[0]
    fragment = rita.get(f"/sessions/{session_id}/live", {"version": version, "wait": 1},
                        headers={"HX-Request": "true"})
    assert fragment.status_code == 200  # the run's state changed: answered at the first read
    html = fragment.content.decode()
    assert html.lstrip().startswith('<section id="runs"')
    assert "<html" not in html and "queued or running" not in html
    assert '<span class="badge ok">passed</span>' in html and "80 ms" in html


def test_the_output_tail_is_shown_only_when_the_profile_allows(
    rita: Client, agent: AgentClient, workspace: Path, project: Project
) -> None:
    session_id = agent_session(agent, workspace)
    run(session_id, profile(project, show_output=True), "finished", FAILED)
    assert "FAILED test_install - boom" in timeline(rita, session_id)


def test_the_export_downloads_for_members(
    rita: Client, agent: AgentClient, workspace: Path
) -> None:
    session_id = certified_session(agent, workspace)
    response = rita.get(f"/sessions/{session_id}/export")
    assert response.status_code == 200
    assert response["Content-Disposition"] == f'attachment; filename="session-{session_id}.jsonl"'
    ours = response.getvalue().splitlines()
    theirs = agent.get(f"/sessions/{session_id}/export").getvalue().splitlines()
    assert len(ours) == len(theirs) and ours[1:] == theirs[1:]  # the header has its own time


@pytest.mark.parametrize("steps", [10, 100])
def test_timeline_query_count_does_not_grow_with_events(
    rita: Client, agent: AgentClient, workspace: Path, steps: int,
    django_assert_num_queries: Any
) -> None:
    session_id = certified_session(agent, workspace)
    trace = Trace(agent.get(f"/sessions/{session_id}").json()["next_seq"])
    trace.turn, trace.step = 1, 1
    for _ in range(steps):
        trace.say()
    agent.append(session_id, trace.flush())
    # session, user, the session, status (state ×2, pending and latest review ×3), membership,
    # one page of events, the conversation, the session's reviews, the changes (the two kept
    # trees, their blobs' sizes), each attempt's changes (the kept manifests, one query), and
    # the live part (its version: next seq and runs' states; the runs), the reported outcomes
    # (their events; with none, no reporters' names to read), and the outcome panel (the
    # session's outcome contract: none here)
    with django_assert_num_queries(19):
        timeline(rita, session_id)


def test_rule_17_3_an_attempt_that_edits_the_pytest_table_shows_the_section_as_protected(
    rita: Client, agent: AgentClient, workspace: Path, project: Project
) -> None:
    """The change lists judge a runner-control section by content, as the attempt did: the
    pytest table's edit is listed protected, with its section; the dependency next to it is
    not what made it so."""
    profile_store(model=VerifierProfile, project=project, validated=validate_profile(
        {"id": "unit-tests", "description": "the tests", "argv": ["/bin/true"]}))
    (workspace / "pyproject.toml").write_text(
        '[project]\nname = "calc"\n\n[tool.pytest.ini_options]\npythonpath = ["."]\n')
    (workspace / "package.json").write_text('{"dependencies": {}}\n')
    session_id = agent_session(agent, workspace)
    assert agent.post(f"/sessions/{session_id}/code-contracts", {
        "objective": "Fix mul", "claims": [], "checks": []}).status_code == 201
    (workspace / "pyproject.toml").write_text(
        '[project]\nname = "calc"\n\n[tool.pytest.ini_options]\naddopts = "-x"\n')
    (workspace / "package.json").write_text('{"dependencies": {"left-pad": "1"}}\n')
    assert agent.post(f"/sessions/{session_id}/verify").json()["decision"] == "repair"
    html = timeline(rita, session_id)
    assert ('<span class="badge bad">protected</span> <code>pyproject.toml '
            '[tool.pytest.ini_options]</code>') in html
    assert "1 protected" in html
    assert '<span class="badge bad">protected</span> <code>package.json' not in html

"""rules §10.2 on the session timeline: the start tree, the tree each attempt judged, the
certified tree and each run's trees, in short form with the full id on hover (`title`) and in a
`<code>` to select and copy without JavaScript; a run of another tree says it is stale."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from governor.domain.tree import TREE_ID_PREFIX
from governor.models import Project, Session
from tests.api.test_code_verification import add_profile
from tests.api.test_contracts import Agent, readme_contract
from tests.api.test_export_and_verify import finished_run
from tests.conftest import AgentClient
from tests.harness_builders import Trace
from tests.pages import reviewer_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def rita(reviewer: Any) -> Client:
    return reviewer_client("rita", "rita-password-1")


def shown_trees(page: str) -> list[str]:
    """Every tree id the page shows: short form, title and full id must agree."""
    found = []
    for full, short in re.findall(r'<code class="tree-id" title="([^"]+)">([^<]+)</code>', page):
        assert full.startswith(TREE_ID_PREFIX) and len(full) == len(TREE_ID_PREFIX) + 64
        assert short == full.removeprefix(TREE_ID_PREFIX)[:8]
        assert f'<code class="receipt">{full}</code>' in page  # selectable without JavaScript
        found.append(full)
    return found


def test_the_timeline_shows_every_tree_a_verdict_names_and_the_stale_run(
        rita: Client, agent: AgentClient, workspace: Path, project: Project) -> None:
    profile = add_profile(project, "unit-tests", ["/bin/true"])
    worker = Agent(agent, workspace)
    body = readme_contract()
    body["checks"].append({"id": "tests", "kind": "code_verification_succeeded",
                           "profile": "unit-tests"})
    body["claims"][0]["check_ids"].append("tests")
    assert worker.begin(body).status_code == 201
    worker.write("README.md", "## Install\n")
    stale = finished_run(worker, profile, passed=True)
    (workspace / "NOTES.md").write_text("written by a formatter; no event says so\n")
    first = agent.post(f"/sessions/{worker.id}/verify").json()
    assert first["decision"] == "repair"
    finished_run(worker, profile, passed=True)
    assert agent.post(f"/sessions/{worker.id}/verify").json()["decision"] == "certified"
    status = worker.status()

    page = rita.get(f"/sessions/{worker.id}/").content.decode()
    # The Changes section compares the start tree with the tree judged last (issue 14): its
    # ids are counted apart from the verdicts'.
    before, rest = page.split('<section class="card" id="changes"', 1)
    changes, after = rest.split("</section>", 1)
    trees = shown_trees(before + after)
    start, judged_first, judged_second = (status["contract"]["startTree"]["id"],
                                          status["attempts"][0]["tree"]["id"],
                                          status["attempts"][1]["tree"]["id"])
    assert stale["tree"]["id"] != judged_first == judged_second
    assert trees.count(start) == 2  # the contract's, and the session's reference (the same)
    assert status["contract"]["startTree"] == Session.objects.get(pk=worker.id).reference["tree"]
    assert trees.count(judged_first) == 4  # two attempts, the certified tree, the second run
    assert trees.count(stale["tree"]["id"]) == 1  # the first run
    assert re.findall(r'<code class="tree-id" title="([^"]+)"', changes) == [start, judged_first]
    assert "Start tree" in page and "Tree judged" in page and "Certified tree" in page
    unescaped = html.unescape(page)
    short = judged_first.removeprefix(TREE_ID_PREFIX)[:12]
    assert (f"stale: ran on {TREE_ID_PREFIX}{stale['tree']['id'].removeprefix(TREE_ID_PREFIX)[:12]}"
            f"…, the workspace is now {short}…") in unescaped


def test_a_log_recorded_before_trees_renders_without_them(
        rita: Client, agent: AgentClient) -> None:
    events = Trace().start_turn().say().flush()
    contract = {"contractId": "contract-old", "version": 3, "kind": "general",
                "objective": "Older objective", "claims": [], "checks": [], "maxAttempts": 1,
                "startedAtSeq": 1, "review": {"mode": "off", "reviewed": False},
                "receipt": "sha256:" + "1" * 64}
    attempt = {"contractId": "contract-old", "attempt": 1, "trigger": "turn-stop",
               "passed": True, "results": [], "receipt": "sha256:" + "3" * 64}
    terminal = {"contractId": "contract-old", "status": "certified", "reason": "all passed",
                "attemptReceipt": attempt["receipt"], "receipt": "sha256:" + "2" * 64}
    events += [{"type": f"reliability/{kind}", "time": 0, "data": data}
               for kind, data in (("contract", contract), ("attempt", attempt),
                                  ("terminal", terminal))]
    events.append({"type": "turn/end", "time": 0,
                   "data": {"turn": 1, "reason": {"kind": "completed"}}})
    text = "\n".join(json.dumps(event) for event in events) + "\n"
    response = agent.post("/sessions/import", raw=text, content_type="application/x-ndjson")
    assert response.status_code == 201, response.content
    session_id = response.json()["id"]
    assert agent.get(f"/sessions/{session_id}").json()["terminal"]["tree"] is None
    page = rita.get(f"/sessions/{session_id}/").content.decode()
    assert "Older objective" in page and "certified" in page
    assert shown_trees(page) == [] and "Tree judged" not in page and "Start tree" not in page

"""Issue 14 item 6: what a reviewer sees changed between the contract-start tree and the tree
judged (added, removed, modified; unified diffs for text, sizes for binaries, capped, a link to
the rest), and a file of a kept tree fetched by an authorised caller — never rendered."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from pygments.lexers import TextLexer, get_lexer_for_filename
from pygments.util import ClassNotFound

from governor.lib.highlight import _lexer_class
from governor.templatetags.trees import _url_of
from tests.api.test_contracts import readme_contract
from tests.api.test_snapshot_sessions import upload_directory
from tests.conftest import AgentClient
from tests.pages import diff_text, reviewer_client

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("private_store")]


@pytest.fixture
def rita(reviewer: Any) -> Client:
    return reviewer_client("rita", "rita-password-1")


def judged_session(agent: AgentClient, workspace: Path) -> tuple[str, dict[str, Any]]:
    """A path session: a contract begins on one tree, the attempt judges another."""
    (workspace / "notes.txt").write_text("one\ntwo\nthree\n")
    (workspace / "old.txt").write_text("to be removed\n")
    (workspace / "logo.png").write_bytes(b"\x89PNG\0\0\0\x01")
    (workspace / "page.html").write_text("<script>alert(1)</script>\n")
    session = agent.create_session(workspace)["id"]
    assert agent.post(f"/sessions/{session}/contracts", readme_contract()).status_code == 201
    (workspace / "notes.txt").write_text("one\nTWO\nthree\n")
    (workspace / "old.txt").unlink()
    (workspace / "logo.png").write_bytes(b"\x89PNG\0\0\0\x02\x03")
    (workspace / "README.md").write_text("# Tool\n\n## Install\n")
    final = agent.post(f"/sessions/{session}/turn-stop").json()
    assert final["terminal"]["status"] == "certified"
    return session, agent.get(f"/sessions/{session}").json()


def test_the_timeline_shows_what_changed_between_start_and_judged_trees(
        rita: Client, agent: AgentClient, workspace: Path) -> None:
    session, status = judged_session(agent, workspace)
    html = rita.get(f"/sessions/{session}/").content.decode()
    changes = html.split('id="changes"')[1].split("</section>")[0]
    assert "4 files changed" in changes
    for kind, path in (("added", "README.md"), ("removed", "old.txt"),
                       ("modified", "notes.txt"), ("modified", "logo.png")):
        assert f'>{kind}</span>' in changes and f">{path}</a>" in changes
    assert "-two\n+TWO\n" in diff_text(changes) and "@@ -1,3 +1,3 @@" in changes
    assert "+## Install" in diff_text(changes)
    assert "8 B → 9 B — binary" in changes  # sizes, not a diff, for binary content
    judged = status["terminal"]["tree"]["id"]
    assert f'href="/sessions/{session}/trees/{judged}/files/notes.txt"' in changes


def test_a_diff_is_capped_and_the_changes_page_diffs_every_file(
        rita: Client, agent: AgentClient, workspace: Path) -> None:
    (workspace / "big.txt").write_text("".join(f"line {i}\n" for i in range(400)))
    session = agent.create_session(workspace)["id"]
    agent.post(f"/sessions/{session}/contracts", readme_contract())
    (workspace / "big.txt").write_text("".join(f"LINE {i}\n" for i in range(400)))
    for index in range(25):
        (workspace / f"f{index:02}.txt").write_text(f"{index}\n")
    (workspace / "README.md").write_text("## Install\n")
    agent.post(f"/sessions/{session}/turn-stop")
    html = rita.get(f"/sessions/{session}/").content.decode()
    changes = html.split('id="changes"')[1].split("</section>")[0]
    assert "27 files changed" in changes
    assert "Show the diff: a large change, 400 lines added and 400 removed" in changes
    assert "not diffed here" in changes  # the 21st file on
    # Past the page's caps a file is a row of the list, linked to its own view, with no
    # section of its own.
    judged = agent.get(f"/sessions/{session}").json()["terminal"]["tree"]["id"]
    assert changes.count('<li class="change ') == 20 and 'id="file-27"' not in changes
    assert f'href="/sessions/{session}/trees/{judged}/view/f24.txt"' in changes
    assert f'href="/sessions/{session}/changes"' in changes
    every = rita.get(f"/sessions/{session}/changes").content.decode()
    assert "not diffed here" not in every and "+24\n" in diff_text(every)


def test_a_file_of_a_kept_tree_is_an_attachment_never_a_page(
        rita: Client, agent: AgentClient, workspace: Path) -> None:
    """Security: a workspace file is served as opaque bytes (attachment, nosniff), so an HTML
    file of the agent's never runs in the reviewer's session."""
    session, status = judged_session(agent, workspace)
    judged = status["terminal"]["tree"]["id"]
    response = rita.get(f"/sessions/{session}/trees/{judged}/files/page.html")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/octet-stream"
    assert response["Content-Disposition"].startswith("attachment;")
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response.content == b"<script>alert(1)</script>\n"


def test_the_api_serves_a_file_of_a_tree_the_session_named(
        agent: AgentClient, other_agent: AgentClient, workspace: Path) -> None:
    session, status = judged_session(agent, workspace)
    start, judged = status["contract"]["startTree"]["id"], status["terminal"]["tree"]["id"]
    old = agent.get(f"/sessions/{session}/trees/{start}/files/notes.txt")
    assert old.status_code == 200 and old.content == b"one\ntwo\nthree\n"
    assert old["X-Governor-Mode"] == "100644"
    assert agent.get(f"/sessions/{session}/trees/{judged}/files/old.txt").status_code == 404
    assert agent.get(f"/sessions/{session}/trees/{start}/files/../etc/passwd").status_code == 404
    # another project's token: the session is not theirs
    assert other_agent.get(f"/sessions/{session}/trees/{start}/files/notes.txt"
                           ).status_code == 404
    # a tree this session never named, though the project keeps it
    other = agent.create_session(workspace)["id"]
    assert agent.get(f"/sessions/{other}/trees/{start}/files/notes.txt").status_code == 404


def test_a_snapshot_sessions_files_and_changes(rita: Client, agent: AgentClient,
                                               tmp_path: Path) -> None:
    laptop = tmp_path / "laptop"
    laptop.mkdir()
    (laptop / "a.txt").write_text("before\n")
    os.symlink("a.txt", laptop / "link")
    session = str(agent.post("/sessions", {"workspace": {"kind": "snapshot"}}).json()["id"])
    first = upload_directory(agent, session, laptop)["tree"]
    agent.post(f"/sessions/{session}/contracts", {**readme_contract(), "tree": first})
    (laptop / "a.txt").write_text("after\n")
    second = upload_directory(agent, session, laptop)["tree"]
    agent.post(f"/sessions/{session}/turn-stop", {"tree": second})
    link = agent.get(f"/sessions/{session}/trees/{second}/files/link")
    assert (link.content, link["X-Governor-Mode"]) == (b"a.txt", "120000")
    html = rita.get(f"/sessions/{session}/").content.decode()
    assert "-before\n+after\n" in diff_text(html.split('id="changes"')[1])


def test_the_evidence_page_of_a_later_proposal_shows_the_changes_so_far(
        rita: Client, agent: AgentClient, workspace: Path, project: Any) -> None:
    from governor.models import Project
    from reviews.models import Review
    from tests.pages import contract_body
    from tests.pages.test_review_pages import approve_intent, url

    session, _ = judged_session(agent, workspace)
    Project.objects.filter(pk=project.pk).update(review_mode="required")
    response = agent.post(f"/sessions/{session}/contracts", contract_body())
    assert response.status_code == 202, response.content
    evidence = approve_intent(rita, Review.objects.get(pk=response.json()["review"]["id"]))
    html = rita.get(url(evidence)).content.decode()
    changes = html.split('id="changes"')[1].split("</section>")[0]
    assert "Changes so far in this session" in changes and "4 files changed" in changes
    assert "-two\n+TWO\n" in diff_text(changes)


@pytest.mark.parametrize("path", ["a b/c.txt", "100%.md", "é/ü?#x.py", "docs//twice.md",
                                  "sub;delims=,&+$!'()*.txt", "~user:@.txt"])
def test_the_file_list_links_each_path_as_reverse_does(path: str) -> None:
    """The file list reverses a tree's URL once and appends each path quoted: the URL `reverse`
    gives for that path, whatever the path holds."""
    session_id, tree = uuid.uuid4(), "gittree:sha256:" + "0" * 64
    assert _url_of("sessions:tree_view", session_id, tree)(path) == reverse(
        "sessions:tree_view", args=[session_id, tree, path])


@pytest.mark.parametrize("name", ["greet.py", "Makefile", "CMakeLists.txt", "notes.txt",
                                  "page.html", "Dockerfile", "no-lexer.zzz9", "README"])
def test_the_remembered_lexer_is_the_one_pygments_chooses_by_name(name: str) -> None:
    try:
        chosen: type = type(get_lexer_for_filename(name))
    except ClassNotFound:
        chosen = TextLexer
    assert _lexer_class(name) is chosen

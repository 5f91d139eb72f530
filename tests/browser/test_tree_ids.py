"""rules §10.2 in a real browser: the session timeline shows each tree id short, the full id
on hover, and — with JavaScript off — a disclosure whose `<code>` holds the full id to select and
copy; the evidence of a run on another tree says it is stale. Accessible (axe) as well."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser import DESKTOP, Server, assert_accessible, log_in, screenshot

SETUP = """
from django.contrib.auth import get_user_model
from governor.models import Membership, Project, Role
from governor.services.tokens import token_create
from governor.domain.profiles import validate_profile
from governor.services.profiles import profile_store
from verification.models import VerifierProfile
users = get_user_model().objects
project = Project.objects.create(slug="trees", name="Trees", review_mode="off",
                                 workspace_roots=[ROOT])
Membership.objects.create(user=users.get(username="rita"), project=project, role=Role.REVIEWER)
owner = users.create_user("tina", "tina@example.com", "tina-password-1")
profile_store(model=VerifierProfile, project=project, validated=validate_profile({
    "id": "unit-tests", "description": "the unit tests", "argv": ["/bin/true"],
    "timeout_ms": 10000}))
print(token_create(project=project, name="agent", owner=owner)[1])
"""
# A run as the worker records it (claimed, finished, on the tree the workspace is now): this
# server runs no worker, and the sandbox is not what is shown here.
RUN = """
from governor.models import Session
from governor.services.trees import session_tree_reference
from verification.models import VerificationRun, VerifierProfile
from governor.services.runs import run_claim, run_finish
session = Session.objects.get(pk=SESSION)
profile = VerifierProfile.objects.get(project=session.project, profile_id="unit-tests")
queued = VerificationRun.objects.create(session=session, profile=profile,
                                        profile_receipt=profile.receipt,
                                        definition=profile.definition())
claimed = run_claim(str(queued.pk))
stream = {"bytes": 0, "truncated": False, "receipt": "sha256:" + "0" * 64}
tree = session_tree_reference(session)
run_finish(run=claimed, record={"passed": True, "failureKind": None, "exitCode": 0,
                                "signal": None, "durationMs": 5, "sandboxMode": "read-only",
                                "stdout": stream, "stderr": stream, "treeBefore": tree,
                                "tree": tree})
"""
CONTRACT = {
    "objective": "Write README.md with an Install section; the unit tests pass",
    "claims": [{"id": "readme", "statement": "README.md documents installation and the tests "
                "pass", "importance": "critical", "verification": "deterministic",
                "check_ids": ["readme-install", "tests"]}],
    "checks": [{"id": "readme-install", "kind": "file_contains", "path": "README.md",
                "text": "## Install"},
               {"id": "tests", "kind": "code_verification_succeeded", "profile": "unit-tests"}],
}


@pytest.fixture(scope="module")
def certified(server: Server) -> Iterator[dict[str, Any]]:
    """A certified session in a project without review: a run, a change on disk no event
    reports (the first attempt finds the run stale), a second run, certified."""
    secret = server.shell(SETUP.replace("ROOT", json.dumps(str(server.live.workspace_root))))
    with httpx.Client(base_url=server.url + "/api/v1", timeout=60,
                      headers={"Authorization": f"Bearer {secret.split()[-1]}"}) as agent:
        workspace = server.live.workspace_root / "trees"
        workspace.mkdir()
        session = agent.post("/sessions", json={"workspace": {"kind": "path",
                                                              "path": str(workspace)}}).json()
        assert agent.post(f"/sessions/{session['id']}/contracts", json=CONTRACT).status_code == 201
        (workspace / "README.md").write_text("# Tool\n\n## Install\n\n    pip install tool\n")
        server.shell(RUN.replace("SESSION", json.dumps(session["id"])))
        (workspace / "NOTES.md").write_text("a formatter wrote this; no event says so\n")
        assert agent.post(f"/sessions/{session['id']}/verify").json()["decision"] == "repair"
        server.shell(RUN.replace("SESSION", json.dumps(session["id"])))
        assert agent.post(f"/sessions/{session['id']}/verify").json()["decision"] == "certified"
        yield dict(agent.get(f"/sessions/{session['id']}").json())


def test_tree_ids_are_short_with_the_full_id_on_hover_and_to_copy(
        server: Server, page: Page, certified: dict[str, Any]) -> None:
    log_in(page, server, "rita", "rita-password-1")
    page.goto(f"{server.url}/sessions/{certified['id']}/")
    tree = certified["terminal"]["tree"]["id"]
    hexadecimal = tree.removeprefix("gittree:sha256:")
    terminal = page.locator("section", has=page.get_by_role("heading", name="Terminal"))
    short = terminal.locator("code.tree-id")
    expect(short).to_have_text(hexadecimal[:8])
    expect(short).to_have_attribute("title", tree)
    attempts = page.locator("section", has=page.get_by_role("heading", name="Attempts (2)"))
    expect(attempts).to_contain_text("stale: ran on gittree:sha256:")
    expect(attempts).to_contain_text(f"the workspace is now {hexadecimal[:12]}…")
    attempts.locator("details.tree-full summary").first.click()
    expect(attempts.locator("details.tree-full code.receipt").first).to_have_text(tree)
    assert_accessible(page)
    attempts.scroll_into_view_if_needed()
    screenshot(page, "timeline-tree-ids")


def test_without_javascript_the_full_id_opens_as_selectable_text(
        server: Server, browser: Browser, certified: dict[str, Any]) -> None:
    context = browser.new_context(viewport=DESKTOP, java_script_enabled=False)
    page = context.new_page()
    try:
        page.goto(server.url + "/accounts/login/")
        page.get_by_label("Username").fill("rita")
        page.get_by_label("Password").fill("rita-password-1")
        page.get_by_role("button", name="Log in").click()
        page.goto(f"{server.url}/sessions/{certified['id']}/")
        tree = certified["terminal"]["tree"]["id"]
        terminal = page.locator("section", has=page.get_by_role("heading", name="Terminal"))
        full = terminal.locator("details.tree-full code.receipt").first
        expect(full).to_be_hidden()
        terminal.locator("details.tree-full summary").click()
        expect(full).to_be_visible()
        expect(full).to_have_text(tree)
        full.select_text()
        assert page.evaluate("window.getSelection().toString()") == tree
    finally:
        context.close()


def test_the_changes_between_the_start_and_the_judged_tree_read_in_a_browser(
        server: Server, page: Page, certified: dict[str, Any]) -> None:
    """Issue 14 item 6: the reviewer sees the files added since the contract started, each
    with its diff and a link to the file as judged (shown as a page, issue 28)."""
    log_in(page, server, "rita", "rita-password-1")
    page.goto(f"{server.url}/sessions/{certified['id']}/")
    changes = page.locator("section#changes")
    expect(changes).to_contain_text("2 files changed")
    readme = changes.locator("li.change", has_text="README.md")
    expect(readme.locator("tr.line-added").filter(has_text="## Install")).to_have_count(1)
    expect(changes.locator("h3").get_by_role("link", name="NOTES.md")).to_have_attribute(
        "href", f"/sessions/{certified['id']}/trees/{certified['terminal']['tree']['id']}"
                "/view/NOTES.md")
    assert_accessible(page)
    changes.scroll_into_view_if_needed()
    screenshot(page, "timeline-changes")
    page.goto(f"{server.url}/sessions/{certified['id']}/changes")  # every change, each diffed
    expect(page.get_by_role("heading", name="Changes")).to_be_visible()
    assert_accessible(page)

"""The evidence page shows, in a real browser, what rules §14 adds to the plan: each check's
baseline (does it tell done from not done?) and, first and as a warning, the protected paths the
plan opens — with axe-core finding no violation."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser import Server, assert_accessible, log_in, screenshot
from tests.browser.test_review_flow import approve_intent_and_open_the_evidence
from tests.pages import contract_body

pytestmark = pytest.mark.browser

PROTECTED = """
from governor.models import Project
Project.objects.filter(slug="demo").update(protected_paths=["tests/**"])
"""
UNPROTECTED = """
from governor.models import Project
Project.objects.filter(slug="demo").update(protected_paths=[])
"""


def test_the_evidence_page_shows_each_checks_baseline_and_the_protected_paths_it_opens_first(
        server: Server, page: Page) -> None:
    server.live.manage("shell", "-c", PROTECTED)
    try:
        workspace = server.live.workspace_root / "baselines"
        workspace.mkdir()
        (workspace / "README.md").write_text("# Project\n")  # exists already; no section yet
        session_id = server.agent.post("/sessions", json={
            "workspace": {"kind": "path", "path": str(workspace)}}).json()["id"]
        begun = server.agent.post(f"/sessions/{session_id}/contracts", json=contract_body(
            protected_changes=["tests/test_install.py"]))
        assert begun.status_code == 202, begun.text
        log_in(page, server, "rita", "rita-password-1")
        approve_intent_and_open_the_evidence(page, server, begun.json()["review"]["id"])
    finally:
        server.live.manage("shell", "-c", UNPROTECTED)
    warning = page.get_by_role("alert").filter(has_text="This plan opens protected paths")
    expect(warning).to_contain_text("tests/test_install.py")
    headings = page.locator("main .card h2").all_inner_texts()
    assert headings.index("Warning This plan opens protected paths") < headings.index(
        "Evidence plan")
    exists = page.locator(".check", has_text="readme-exists")
    expect(exists).to_contain_text("passes already")
    expect(exists).to_contain_text("shows nothing this task did")
    section = page.locator(".check", has_text="readme-has-1")
    expect(section).to_contain_text("fails now")
    expect(section).to_contain_text("will show the work")
    expect(page.locator(".check", has_text="protected-paths")).to_contain_text("passes already")
    assert_accessible(page)
    screenshot(page, "evidence-baselines-1280")

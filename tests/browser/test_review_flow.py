"""A reviewer in a real browser against a real server (rules §6, docs/architecture.md): log in,
find the proposal in the inbox, approve the intent, decide the evidence plan; a stale or expired
proposal approves nothing and the page says so; another project's reviewer sees nothing."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser import DESKTOP, NARROW, Server, log_in, screenshot

pytestmark = pytest.mark.browser

NOTHING_APPROVED = "Nothing was approved."


def review_url(server: Server, review_id: str) -> str:
    return f"{server.url}/reviews/{review_id}/"


def approve(page: Page) -> None:
    page.get_by_role("button", name="Approve", exact=True).click()


def approve_intent_and_open_the_evidence(page: Page, server: Server, review_id: str) -> None:
    page.goto(review_url(server, review_id))
    approve(page)
    expect(page.get_by_text("The evidence plan is now waiting")).to_be_visible()
    page.get_by_role("link", name="review the evidence plan").click()
    expect(page.get_by_role("heading", name=re.compile("^Evidence proposal"))).to_be_visible()


def test_reviewer_approves_the_intent_and_requests_a_revision_of_the_evidence(
    server: Server, page: Page
) -> None:
    session_id, review_id = server.propose()
    log_in(page, server, "rita", "rita-password-1")
    page.locator(f'#inbox-list a[href="/reviews/{review_id}/"]').click()
    expect(page.get_by_role("heading", name=re.compile("^Intent proposal"))).to_be_visible()
    expect(page.get_by_text("Keep the existing sections of README.md")).to_be_visible()
    expect(page.get_by_text("declared by the caller")).to_be_visible()
    approve(page)
    expect(page.get_by_text("The evidence plan is now waiting")).to_be_visible()
    page.get_by_role("link", name="review the evidence plan").click()
    expect(page.get_by_role("heading", name=re.compile("^Evidence proposal"))).to_be_visible()
    expect(page.get_by_role("heading", name="The approved intent (stage 1)")).to_be_visible()

    # By keyboard alone: type the comment, Tab past Approve to Request revision, press Enter.
    page.get_by_label("Comment for the agent").focus()
    page.keyboard.type("Also name pipx as an install option.")
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Approve", exact=True)).to_be_focused()
    page.keyboard.press("Tab")
    expect(page.get_by_role("button", name="Request revision")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_text("A revision was requested.")).to_be_visible()

    review = server.review(session_id)
    assert review["stage"] == "evidence" and review["status"] == "revision-requested"
    assert review["feedback"] == "Also name pipx as an install option."


def test_reviewer_approves_through_to_an_active_contract(server: Server, page: Page) -> None:
    session_id, review_id = server.propose()
    log_in(page, server, "rita", "rita-password-1")
    approve_intent_and_open_the_evidence(page, server, review_id)
    approve(page)
    expect(page.get_by_text("the contract is active")).to_be_visible()
    status = server.status(session_id)
    assert status["state"] == "active" and status["contract"]["version"] == 5
    page.get_by_role("link", name="session timeline", exact=True).click()
    expect(page.get_by_text("contract format v5")).to_be_visible()
    expect(page.locator(".badge.ok", has_text="reviewed")).to_be_visible()


def test_approving_in_tab_a_makes_tab_b_approve_nothing(server: Server, page: Page) -> None:
    session_id, review_id = server.propose()
    log_in(page, server, "rita", "rita-password-1")
    tab_b = page.context.new_page()
    page.goto(review_url(server, review_id))
    tab_b.goto(review_url(server, review_id))
    approve(page)
    expect(page.get_by_text("The evidence plan is now waiting")).to_be_visible()
    approve(tab_b)
    expect(tab_b.get_by_text(NOTHING_APPROVED, exact=True)).to_be_visible()
    why = tab_b.get_by_text(re.compile("not the session's current pending proposal"))
    expect(why).to_be_visible()
    expect(tab_b.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
    review = server.review(session_id)
    assert review["stage"] == "evidence" and review["status"] == "pending"


def test_without_javascript_the_forms_post_and_a_stale_tab_gets_409(
    server: Server, browser: Browser
) -> None:
    session_id, review_id = server.propose()
    context = browser.new_context(viewport=DESKTOP, java_script_enabled=False)
    try:
        page = context.new_page()
        log_in(page, server, "rita", "rita-password-1")
        tab_b = context.new_page()
        page.goto(review_url(server, review_id))
        tab_b.goto(review_url(server, review_id))
        with page.expect_navigation() as approved:
            approve(page)
        assert approved.value is not None and approved.value.status == 200  # after a redirect
        expect(page.locator(".messages")).to_contain_text("Intent approved.")
        with tab_b.expect_navigation() as stale:
            approve(tab_b)
        assert stale.value is not None and stale.value.status == 409
        expect(tab_b.get_by_text(NOTHING_APPROVED, exact=True)).to_be_visible()
    finally:
        context.close()
    assert server.review(session_id)["stage"] == "evidence"


def test_an_expired_proposal_cannot_be_approved(server: Server, page: Page) -> None:
    session_id, review_id = server.propose()
    log_in(page, server, "rita", "rita-password-1")
    page.goto(review_url(server, review_id))
    server.expire(review_id)
    approve(page)
    expect(page.get_by_text(NOTHING_APPROVED, exact=True)).to_be_visible()
    expect(page.get_by_text(re.compile("expired before it was decided"))).to_be_visible()
    expect(page.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
    review = server.review(session_id)
    assert review["stage"] == "intent" and review["status"] == "expired"
    page.goto(server.url + "/reviews/")
    expect(page.locator(f'#inbox-list a[href="/reviews/{review_id}/"]')).to_have_count(0)


def test_another_projects_reviewer_gets_404(server: Server, page: Page) -> None:
    session_id, review_id = server.propose()
    log_in(page, server, "otto", "otto-password-1")
    expect(page.locator(f'a[href="/reviews/{review_id}/"]')).to_have_count(0)
    for path in (f"/reviews/{review_id}/", f"/sessions/{session_id}/",
                 f"/sessions/{session_id}/export"):
        response = page.goto(server.url + path)
        assert response is not None and response.status == 404, path
    assert server.review(session_id)["status"] == "pending"


# --- how the pages look -----------------------------------------------------------------------

RICH_CONTRACT: dict[str, Any] = {
    "objective": "Document installation in README.md and keep the package metadata in sync "
                 "with the documented Python version",
    "claims": [
        {"id": "readme-install", "statement": "README.md has an Install section naming pip",
         "importance": "critical", "verification": "deterministic",
         "check_ids": ["readme-exists", "readme-install"]},
        {"id": "python-version", "statement": "package.json declares the Python version",
         "importance": "important", "verification": "deterministic",
         "check_ids": ["python-version"], "minimum_independent_sources": 1},
        {"id": "tests-run", "statement": "The agent ran the test suite", "importance": "minor",
         "verification": "deterministic", "check_ids": ["ran-pytest"]},
    ],
    "checks": [
        {"id": "readme-exists", "kind": "file_exists", "path": "README.md"},
        {"id": "readme-install", "kind": "file_contains", "path": "README.md",
         "text": "## Install\n\n    pip install tool"},
        {"id": "python-version", "kind": "json_equals", "path": "package.json",
         "pointer": "/engines/python", "value": {"min": "3.11", "max": None}},
        {"id": "ran-pytest", "kind": "tool_succeeded", "tool": "bash",
         "arguments_contain": "pytest -q", "min_count": 1},
    ],
    "max_attempts": 3,
    "intent": {
        "constraints": ["Keep the existing sections of README.md in their order",
                        "Do not change any file outside README.md and package.json"],
        "assumptions": ["The project is installed with pip from PyPI"],
        "non_goals": ["No changes to CI", "No new dependencies"],
        "ambiguities": ["Whether pipx should be documented as well as pip"],
    },
}

RUNS = """
from datetime import timedelta
from django.utils import timezone
from governor.models import Session
from verification.models import VerificationRun, VerifierProfile
session = Session.objects.get(pk="{session_id}")
profile = VerifierProfile.objects.create(
    project=session.project, profile_id="unit-tests", description="pytest -q",
    argv=["pytest", "-q"], required=False, show_output_to_reviewers=True,
    receipt="sha256:" + "3" * 64)
now = timezone.now()
VerificationRun.objects.create(
    session=session, profile=profile, profile_receipt=profile.receipt, definition={{}},
    state="finished", started_at=now - timedelta(seconds=4), finished_at=now,
    result={{"passed": False, "failureKind": "exit", "exitCode": 1, "signal": None,
            "durationMs": 3912}},
    output_tail="F.\\n=== FAILURES ===\\ntest_install: AssertionError: pip not mentioned\\n"
                "1 failed, 1 passed in 3.81s")
VerificationRun.objects.create(
    session=session, profile=profile, profile_receipt=profile.receipt, definition={{}},
    state="running", started_at=now)
"""


def fits(page: Page) -> bool:
    """Nothing on the page is wider than the viewport (no sideways scrolling)."""
    width = int(page.evaluate("document.documentElement.scrollWidth"))
    return width <= page.viewport_size["width"] if page.viewport_size else False


def test_screenshots_of_every_page_at_1280_and_375_pixels(server: Server, browser: Browser) -> None:
    session_id, intent_id = server.propose(RICH_CONTRACT)
    server.propose()
    contexts = [browser.new_context(viewport=DESKTOP), browser.new_context(viewport=NARROW)]
    desktop, narrow = pages = [context.new_page() for context in contexts]
    shots = []

    def shoot(name: str, url: str | None = None) -> None:
        for page, width in zip(pages, (DESKTOP["width"], NARROW["width"]), strict=True):
            if url is not None:
                page.goto(server.url + url)
            for details in page.locator("details").all():
                details.evaluate("element => element.open = true")
            shots.append(screenshot(page, f"{name}-{width}"))
            assert fits(page), f"{name} is wider than {width} px"

    try:
        shoot("login", "/accounts/login/")
        for page in pages:
            log_in(page, server, "rita", "rita-password-1")
        shoot("inbox", "/reviews/")
        shoot("intent", f"/reviews/{intent_id}/")
        approve(desktop)
        expect(desktop.get_by_text("The evidence plan is now waiting")).to_be_visible()
        approve(narrow)  # the narrow tab still shows the intent it loaded: a stale receipt
        expect(narrow.get_by_text(NOTHING_APPROVED, exact=True)).to_be_visible()
        shots.append(screenshot(narrow, "intent-stale-375"))
        evidence_id = server.review(session_id)["id"]
        shoot("evidence", f"/reviews/{evidence_id}/")
        expect(narrow.get_by_text('"## Install\\n\\n    pip install tool"')).to_be_visible()
        approve(desktop)
        expect(desktop.get_by_text("the contract is active")).to_be_visible()
        assert server.agent.post(f"/sessions/{session_id}/verify").status_code == 200
        readme = "# Tool\n\n## Install\n\n    pip install tool\n"
        (server.workspaces[session_id] / "README.md").write_text(readme)
        assert server.agent.post(f"/sessions/{session_id}/verify").status_code == 200
        server.shell(RUNS.format(session_id=session_id))
        shoot("timeline", f"/sessions/{session_id}/")
        expect(desktop.get_by_text("test_install: AssertionError")).to_be_visible()
    finally:
        for context in contexts:
            context.close()
    assert len(shots) == 11 and all(shot.stat().st_size > 0 for shot in shots)

"""The reliability page and reported outcomes in a real browser (issue 31 items 3 and 4): a
reviewer reports a certified session as not done from its timeline, the reliability page
counts it as a measured rate with its count and period, its chart and tables pass axe-core,
and a reviewer of another project gets a clear page instead of a bare "Not Found"."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.api.test_contracts import readme_contract
from tests.browser import NARROW, Server, assert_accessible, log_in, screenshot

pytestmark = pytest.mark.browser

REVIEW = """
from governor.models import Project
Project.objects.filter(slug="demo").update(review_mode="{review}")
"""


@pytest.fixture
def review_off(server: Server) -> Iterator[Server]:
    server.shell(REVIEW.format(review="off"))
    yield server
    server.shell(REVIEW.format(review="required"))


def ended(server: Server, name: str, *, done: bool, max_attempts: int = 3) -> str:
    """A session whose contract ended: certified when `done`, else exhausted."""
    workspace = server.live.workspace_root / name
    workspace.mkdir()
    session_id = server.agent.post("/sessions", json={
        "workspace": {"kind": "path", "path": str(workspace)}}).json()["id"]
    begun = server.agent.post(f"/sessions/{session_id}/contracts",
                              json=readme_contract(max_attempts=max_attempts))
    assert begun.status_code == 201, begun.text
    if done:
        (workspace / "README.md").write_text("# Demo\n\n## Install\n")
    stop = server.agent.post(f"/sessions/{session_id}/turn-stop").json()
    assert stop["terminal"]["status"] == ("certified" if done else "exhausted"), stop
    return session_id


def test_a_reported_false_certification_is_counted_on_the_reliability_page(
        review_off: Server, page: Page) -> None:
    server = review_off
    session_id = ended(server, "reported", done=True)
    ended(server, "fine", done=True)
    ended(server, "failed", done=False, max_attempts=1)
    log_in(page, server, "rita", "rita-password-1")
    page.goto(f"{server.url}/sessions/{session_id}/")
    reports = page.locator("#reports")
    reports.get_by_label("Certified but not done").check()
    reports.get_by_label("Reason (required: what really happened)").fill(
        "The Install section names no command to run.")
    assert_accessible(page)
    reports.get_by_role("button", name="Report").click()
    expect(page.get_by_text('Reported "certified but not done"')).to_be_visible()
    expect(page.locator("#reports")).to_contain_text("The Install section names no command")
    screenshot(page, "reliability-report-1280")

    page.get_by_role("link", name="Reliability", exact=True).click()
    page.get_by_role("link", name="Demo project").click()
    expect(page.get_by_role("heading", name=re.compile("^Reliability of"))).to_be_visible()
    expect(page.locator("#false-certification")).to_contain_text(
        re.compile(r"\b1 of \d+ certified contracts reported certified but not done, "))
    expect(page.locator("ul.bars")).to_contain_text("Exhausted")
    assert_accessible(page)
    screenshot(page, "reliability-1280")
    page.set_viewport_size(NARROW)
    assert_accessible(page)
    screenshot(page, "reliability-375")


def test_a_reviewer_of_another_project_gets_a_clear_page(server: Server, page: Page) -> None:
    log_in(page, server, "otto", "otto-password-1")
    answer = page.goto(f"{server.url}/projects/demo/reliability")
    assert answer is not None and answer.status == 404
    expect(page.get_by_role("heading", name="No project “demo” for you")).to_be_visible()
    assert_accessible(page)
    screenshot(page, "reliability-not-member-1280")

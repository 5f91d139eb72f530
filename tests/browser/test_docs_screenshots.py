"""The screenshots of docs/reviewing.md, taken of the real pages in headless Chromium. Written
only by `make docs-screenshots` (which sets GOVERNOR_DOCS_IMG); `make test` skips this file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser import DESKTOP, Server, assert_accessible, log_in
from tests.browser.test_delivery import delivered, deliveries  # noqa: F401 - the fixture
from tests.browser.test_diff import delivered_work
from tests.browser.test_passkeys import add_passkey, virtual_authenticator
from tests.browser.test_reliability import ended, review_off  # noqa: F401 - the fixture
from tests.browser.test_reviewer_experience import propose_after_work
from tests.live import ROOT
from tests.pages import contract_body

pytestmark = [pytest.mark.browser, pytest.mark.skipif(
    not os.environ.get("GOVERNOR_DOCS_IMG"), reason="written only by make docs-screenshots")]


def shot(page: Page, name: str, selector: str | None = None) -> None:
    """docs/img/<name>.png of the page, or of the element `selector` names."""
    path = ROOT / os.environ["GOVERNOR_DOCS_IMG"] / f"{name}.png"
    assert_accessible(page)
    if selector is None:
        page.screenshot(path=str(path), full_page=True)
    else:
        page.locator(selector).screenshot(path=str(path))
    assert Path(path).stat().st_size > 0


def test_the_pages_of_the_reviewing_guide(server: Server, page: Page) -> None:
    session_id, review_id = propose_after_work(server)
    log_in(page, server, "rita", "rita-password-1")
    shot(page, "review-inbox")
    page.goto(f"{server.url}/reviews/{review_id}/")
    shot(page, "review-intent")

    page.get_by_label("Comment for the agent").fill("Out of scope: README only, please.")
    page.get_by_role("button", name="Reject", exact=True).click()
    expect(page.get_by_text("Reject this proposal?")).to_be_visible()
    shot(page, "review-confirm-reject", "#decision")
    page.get_by_role("button", name="Approve", exact=True).click()
    page.get_by_role("link", name="review the evidence plan").click()
    shot(page, "review-evidence")
    page.get_by_label("Comment for the agent").fill("Check that README.md names pipx too.")
    page.get_by_role("button", name="Request revision").click()
    expect(page.get_by_text("A revision was requested.")).to_be_visible()

    again = server.agent.post(f"/sessions/{session_id}/contracts", json=contract_body(checks=3))
    page.goto(f"{server.url}/reviews/{again.json()['review']['id']}/")
    shot(page, "review-revision")
    page.goto(f"{server.url}/sessions/{session_id}/#conversation")
    for details in page.locator("#conversation details").all():
        details.evaluate("element => element.open = true")
    shot(page, "review-conversation", "#conversation")
    page.get_by_role("link", name="Sessions").click()
    shot(page, "sessions-list")


def test_the_passkey_pages_of_the_reviewing_guide(localhost_server: Server, page: Page) -> None:
    server = localhost_server
    virtual_authenticator(page)
    log_in(page, server, "rita", "rita-password-1")
    add_passkey(page, server, "work laptop")
    shot(page, "review-passkeys")
    _, review_id = server.propose()
    page.goto(f"{server.url}/reviews/{review_id}/")
    expect(page.get_by_text("Your decision is signed with your passkey")).to_be_visible()
    shot(page, "review-signed-decision", "#decision")


def test_the_delivery_page_of_the_reviewing_guide(deliveries: Server, page: Page) -> None:  # noqa: F811
    _, review_id = delivered(deliveries)
    log_in(page, deliveries, "rita", "rita-password-1")
    page.goto(f"{deliveries.url}/reviews/{review_id}/")
    shot(page, "review-delivery")


def test_the_diff_of_the_reviewing_guide(deliveries: Server, page: Page) -> None:  # noqa: F811
    _, review_id, _ = delivered_work(deliveries, "docs-diff")
    log_in(page, deliveries, "rita", "rita-password-1")
    page.goto(f"{deliveries.url}/reviews/{review_id}/?diff=split")
    page.get_by_role("link", name="Comment on line 3 of greet.py").click()
    page.locator("#comment-form").get_by_label("Comment on line 3 of greet.py").fill(
        "Keep the greeting without the exclamation mark.")
    page.locator("#comment-form").get_by_role("button", name="Add comment").click()
    expect(page.locator("tr.line-comment")).to_be_visible()
    shot(page, "review-diff", "#changes")


def test_the_unsigned_choice_of_the_reviewing_guide(localhost_server: Server, browser: Browser,
                                                    page: Page) -> None:
    server = localhost_server
    virtual_authenticator(page)
    log_in(page, server, "rita", "rita-password-1")
    page.goto(f"{server.url}/reviews/passkeys/")
    if not page.get_by_role("cell", name="work laptop", exact=True).count():
        add_passkey(page, server, "work laptop")  # when run on its own
    _, review_id = server.propose()
    other = browser.new_context(viewport=DESKTOP).new_page()  # a device without the passkey
    log_in(other, server, "rita", "rita-password-1")
    other.goto(f"{server.url}/reviews/{review_id}/")
    other.get_by_label("Sign my decision with my passkey").uncheck()
    expect(other.locator(".unsigned-note")).to_be_visible()
    shot(other, "review-unsigned-choice", "#decision")
    other.context.close()


def test_the_reliability_page_of_the_reviewing_guide(review_off: Server,  # noqa: F811
                                                     page: Page) -> None:
    certified = [ended(review_off, f"docs-certified-{n}", done=True) for n in range(3)]
    ended(review_off, "docs-exhausted", done=False, max_attempts=1)
    log_in(page, review_off, "rita", "rita-password-1")
    page.goto(f"{review_off.url}/sessions/{certified[0]}/")
    page.locator("#reports").get_by_label("Certified but not done").check()
    page.locator("#reports").get_by_label("Reason (required: what really happened)").fill(
        "The Install section names no command to run.")
    page.locator("#reports").get_by_role("button", name="Report").click()
    expect(page.get_by_text('Reported "certified but not done"')).to_be_visible()
    page.goto(f"{review_off.url}/projects/demo/reliability")
    shot(page, "reliability", "main")

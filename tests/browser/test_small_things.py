"""The small things a new reviewer tripped on (issue 28 item 6), each fixed and checked in a
real browser: the sessions list names each session's objective and what happened to a rejected
one; a decided proposal no longer counts down its expiry; the comment help says who sees it;
the favicon answers; another project's
proposal answers a page that says what happened. (The passkey name input: test_passkey_traps.)
axe-core finds no violation."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser import Server, assert_accessible, log_in, screenshot

pytestmark = pytest.mark.browser


def test_the_sessions_list_names_the_objective_and_a_rejected_sessions_real_state(
        server: Server, page: Page) -> None:
    session_id, review_id = server.propose()
    log_in(page, server, "rita", "rita-password-1")
    page.goto(f"{server.url}/reviews/{review_id}/")
    page.get_by_label("Comment for the agent").fill("Not this task.")
    page.get_by_role("button", name="Reject").click()
    page.get_by_role("button", name="Confirm rejection").click()
    expect(page.get_by_text("was rejected")).to_be_visible()
    page.goto(f"{server.url}/sessions/")
    row = page.get_by_role("row").filter(has=page.locator(f'a[href="/sessions/{session_id}/"]'))
    expect(row).to_contain_text("Write README.md with an Install section")
    expect(row.locator(".state")).to_have_text("proposal rejected")
    assert_accessible(page)
    screenshot(page, "sessions-list-objectives-1280")


def test_a_decided_proposal_no_longer_says_expires_in_and_the_help_says_who_sees_comments(
        server: Server, page: Page) -> None:
    _, review_id = server.propose()
    log_in(page, server, "rita", "rita-password-1")
    page.goto(f"{server.url}/reviews/{review_id}/")
    expect(page.locator("#expiry")).to_contain_text("Expires in")
    expect(page.locator("#decision")).to_contain_text("every reviewer of this project sees it")
    page.get_by_role("button", name="Approve", exact=True).click()  # htmx swaps the panel
    expect(page.get_by_text("Your decision was recorded.")).to_be_visible()
    expect(page.locator("#expiry")).not_to_contain_text("Expires in")
    expect(page.locator("#expiry")).to_contain_text("Would have expired")
    assert_accessible(page)


def test_the_favicon_answers_and_every_page_links_it(server: Server, page: Page) -> None:
    icon = httpx.get(f"{server.url}/favicon.ico")
    assert icon.status_code == 200 and icon.content[:4] == b"\0\0\1\0"  # an ICO file
    log_in(page, server, "rita", "rita-password-1")
    href = page.locator('link[rel="icon"]').get_attribute("href")
    assert href is not None and httpx.get(server.url + href).status_code == 200


def test_another_projects_proposal_answers_a_page_that_says_what_happened(
        server: Server, page: Page) -> None:
    _, review_id = server.propose()  # in the demo project, which otto does not review
    log_in(page, server, "otto", "otto-password-1")
    response = page.goto(f"{server.url}/reviews/{review_id}/")
    assert response is not None and response.status == 404
    expect(page.get_by_role("heading", name="Nothing to show you here")).to_be_visible()
    expect(page.locator("main")).to_contain_text("not in a project you review or operate")
    expect(page.locator("main")).to_contain_text("signed in as otto")
    expect(page.get_by_role("link", name="Your review inbox")).to_be_visible()
    assert_accessible(page)
    screenshot(page, "not-found-1280")

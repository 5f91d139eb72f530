"""Passkeys without traps (issue 28 item 5), in a real browser with Chromium's virtual
authenticator: the serve banner prints its links at GOVERNOR_PUBLIC_URL; a page opened at
another host than the passkeys' relying party says where to go instead of failing at the
decision; a reviewer without their passkey on this device decides unsigned where the project
does not require signatures, and sees that it will be unsigned; every decision says whether and
by which key it was signed, on its page and on the timeline. The server is reached as
`localhost` and listens on 127.0.0.1. axe-core finds no violation in any of these states."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser import DESKTOP, Server, assert_accessible, log_in, screenshot
from tests.browser.test_passkeys import (
    CEREMONY_MS,
    add_passkey,
    decided,
    reviewer,
    virtual_authenticator,
)

pytestmark = pytest.mark.browser

SIGNATURES = """
from governor.models import Project
Project.objects.filter(slug="demo").update(require_signed_approvals={required})
"""


@pytest.fixture(scope="module")
def server(localhost_server: Server) -> Server:
    return localhost_server


@pytest.fixture
def unsigned_allowed(server: Server) -> Iterator[Server]:
    """The demo project, for this test, does not require signed approvals."""
    server.shell(SIGNATURES.format(required=False))
    yield server
    server.shell(SIGNATURES.format(required=True))


def at_ip(server: Server) -> str:
    """The same server at the address it listens on, not the name passkeys belong to."""
    return f"http://127.0.0.1:{urlsplit(server.url).port}"


def test_the_serve_banner_prints_every_link_at_the_public_url(server: Server) -> None:
    log = Path(server.live.env["GOVERNOR_VAR_DIR"]).parent / "server.log"
    banner = log.read_text()
    assert f"reviewer inbox {server.url}/reviews/" in banner
    assert f"admin {server.url}/admin/" in banner
    assert f"listening on 127.0.0.1:{urlsplit(server.url).port}; links use " \
           f"GOVERNOR_PUBLIC_URL {server.url}" in banner
    assert "http://127.0.0.1" not in banner.split("reviewer inbox", 1)[1].split("\n", 1)[0]


def test_the_passkey_name_input_is_styled_as_the_others(server: Server, page: Page) -> None:
    reviewer(server, "nina")
    log_in(page, server, "nina", "pw-nina-1")
    page.goto(f"{server.url}/reviews/passkeys/")
    name = page.get_by_label("Name of this passkey")
    radius, width = name.evaluate(
        "e => [getComputedStyle(e).borderRadius, getComputedStyle(e).width]")
    assert radius == "6px" and float(width.removesuffix("px")) > 200, (radius, width)


def test_a_page_opened_at_another_host_than_the_passkeys_says_where_to_go(
        server: Server, page: Page) -> None:
    reviewer(server, "hana")
    virtual_authenticator(page)
    log_in(page, server, "hana", "pw-hana-1")
    add_passkey(page, server, "laptop key")
    _, review_id = server.propose()

    elsewhere = at_ip(server)  # a link someone shared with the listening address
    page.goto(f"{elsewhere}/accounts/login/")
    page.get_by_label("Username").fill("hana")
    page.get_by_label("Password").fill("pw-hana-1")
    page.get_by_role("button", name="Log in").click()
    page.goto(f"{elsewhere}/reviews/{review_id}/")
    notice = page.locator(".passkey-elsewhere")
    expect(notice).to_contain_text("Your passkey cannot sign here")
    expect(notice).to_contain_text(f"This page is open at {elsewhere}")
    expect(notice).to_contain_text("passkeys belong to localhost")
    go = notice.get_by_role("link")
    expect(go).to_have_attribute("href", f"{server.url}/reviews/{review_id}/")
    assert page.locator("form.decide[data-sign-url]").count() == 0  # no ceremony to fail
    assert_accessible(page)
    screenshot(page, "passkey-elsewhere-1280")
    page.goto(f"{elsewhere}/reviews/passkeys/")
    expect(page.locator(".passkey-elsewhere")).to_contain_text(
        "Passkeys of this site belong to localhost")
    assert page.locator("form.passkey-add").count() == 0
    assert_accessible(page)


def test_without_the_passkey_on_this_device_a_reviewer_decides_unsigned_and_every_decision_says_if_it_was_signed(  # noqa: E501
        unsigned_allowed: Server, browser: Browser, page: Page) -> None:
    server = unsigned_allowed
    reviewer(server, "ivan")
    virtual_authenticator(page)  # the laptop, which holds the passkey
    log_in(page, server, "ivan", "pw-ivan-1")
    add_passkey(page, server, "laptop key")
    session_id, review_id = server.propose()
    page.goto(f"{server.url}/reviews/{review_id}/")
    expect(page.get_by_label("Sign my decision with my passkey")).to_be_checked()
    page.get_by_role("button", name="Approve", exact=True).click()
    decided(page, "The evidence plan is now waiting")
    page.goto(f"{server.url}/reviews/{review_id}/")
    signed = page.locator("dd.signed")
    expect(signed).to_contain_text("signed")
    expect(signed).to_contain_text("ivan's approved, with the passkey “laptop key”")

    phone = browser.new_context(viewport=DESKTOP)  # another device: no authenticator at all
    try:
        other = phone.new_page()
        log_in(other, server, "ivan", "pw-ivan-1")
        evidence = server.review(session_id)
        assert evidence["stage"] == "evidence"
        other.goto(f"{server.url}/reviews/{evidence['id']}/")
        choice = other.get_by_label("Sign my decision with my passkey")
        expect(other.locator(".unsigned-note")).to_be_hidden()
        choice.uncheck()
        expect(other.locator(".unsigned-note")).to_be_visible()
        expect(other.locator(".unsigned-note")).to_contain_text(
            "This decision will be recorded unsigned")
        assert_accessible(other)
        screenshot(other, "passkey-unsigned-choice-1280")
        other.get_by_role("button", name="Approve", exact=True).click()
        expect(other.get_by_text("the contract is active")).to_be_visible(timeout=CEREMONY_MS)
        expect(other.locator("dd.signed")).to_contain_text(
            "unsigned recorded by the server only")
        assert_accessible(other)
        screenshot(other, "passkey-unsigned-decision-1280")
    finally:
        phone.close()
    assert server.status(session_id)["state"] == "active"
    page.goto(f"{server.url}/sessions/{session_id}/")  # the timeline says it of each review
    reviews = page.get_by_role("region", name="Reviews (2)")
    expect(reviews.locator(".signed").nth(0)).to_contain_text("signed ivan with “laptop key”")
    expect(reviews.locator(".signed").nth(1)).to_have_text("unsigned")
    assert_accessible(page)

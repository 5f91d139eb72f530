"""A reviewer who can judge the work (issue 15) in a real browser: the person's request beside
the agent's reading, the conversation with its tool output collapsed and inert, the one decision
box (a reason to reject, a confirmation with or without JavaScript, nothing typed lost), focus
where the answer is, and axe-core finding no violation on any of these pages."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser import (
    DESKTOP,
    NARROW,
    SCREENSHOTS,
    Server,
    assert_accessible,
    log_in,
    screenshot,
)
from tests.harness_builders import Trace
from tests.pages import contract_body

pytestmark = pytest.mark.browser

ASKED = "Add an Install section to README.md that names pip; keep the rest"
HOSTILE = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'


def propose_after_work(server: Server) -> tuple[str, str]:
    """A session in which the person asked, the agent worked (one tool call whose output is
    hostile HTML) and then proposed its contract for review: (session id, review id)."""
    workspace = server.live.workspace_root / f"session-{len(server.workspaces) + 1}"
    workspace.mkdir()
    session_id = server.agent.post("/sessions", json={
        "workspace": {"kind": "path", "path": str(workspace)}}).json()["id"]
    server.workspaces[session_id] = workspace
    trace = Trace().start_turn(ASKED)
    trace.tool("read_file", '{"path": "README.md"}', text=HOSTILE)
    trace.say("I will add the section.")
    assert server.agent.post(f"/sessions/{session_id}/events",
                             json={"events": trace.flush()}).status_code == 200
    begun = server.agent.post(f"/sessions/{session_id}/contracts", json=contract_body())
    assert begun.status_code == 202, begun.text
    return session_id, begun.json()["review"]["id"]


def test_the_login_page_is_accessible(server: Server, page: Page) -> None:
    page.goto(f"{server.url}/reviews/")  # a reviewer who is not signed in is sent to log in
    expect(page.get_by_label("Username")).to_be_visible()
    assert_accessible(page)


def test_the_request_beside_the_intent_and_the_conversation(server: Server, page: Page) -> None:
    session_id, review_id = propose_after_work(server)
    log_in(page, server, "rita", "rita-password-1")
    assert_accessible(page)  # the inbox
    page.goto(f"{server.url}/reviews/{review_id}/")
    asked = page.get_by_role("region", name="What the person asked")
    intends = page.get_by_role("region", name="What the agent intends")
    expect(asked).to_contain_text(ASKED)
    expect(intends).to_contain_text("Keep the existing sections of README.md")
    left, right = asked.bounding_box(), intends.bounding_box()
    assert left and right and left["x"] < right["x"] and abs(left["y"] - right["y"]) < 2
    assert_accessible(page)
    screenshot(page, "intent-with-request-1280")

    asked.get_by_role("link", name="The whole conversation").click()
    conversation = page.get_by_role("region", name="Conversation")
    expect(conversation).to_contain_text(ASKED)
    result = conversation.locator("details", has=page.get_by_text("Result", exact=True))
    expect(result.locator("pre")).to_be_hidden()  # collapsed
    result.locator("summary").click()
    expect(result.locator("pre")).to_have_text(HOSTILE)  # shown as text, never run
    assert page.evaluate("window.pwned") is None
    assert_accessible(page)
    conversation.screenshot(path=str(SCREENSHOTS / "conversation-1280.png"))
    conversation.get_by_role("link", name="Raw event table").click()
    expect(page.get_by_role("heading", name="Events")).to_be_in_viewport()
    assert page.url.endswith("#events")
    events = page.locator("table.events td[data-label='Time']")
    expect(events.first).to_have_text("—")  # sent without a time


def test_reject_needs_a_reason_and_a_confirmation_and_focus_follows(
    server: Server, page: Page
) -> None:
    session_id, review_id = server.propose()
    log_in(page, server, "rita", "rita-password-1")
    page.goto(f"{server.url}/reviews/{review_id}/")
    reject = page.get_by_role("button", name="Reject", exact=True)
    reject.click()
    comment = page.get_by_label("Comment for the agent")
    expect(page.get_by_text("a reason is required to reject")).to_be_visible()
    expect(page.locator(".notice.error")).to_be_focused()
    assert_accessible(page)
    comment.fill("Out of scope: the task was README only.")
    reject.click()
    expect(page.get_by_text("Reject this proposal?")).to_be_visible()
    expect(page.locator(".notice.warning")).to_be_focused()
    expect(comment).to_have_value("Out of scope: the task was README only.")
    assert server.review(session_id)["status"] == "pending"
    assert_accessible(page)
    page.locator("#decision").screenshot(path=str(SCREENSHOTS / "confirm-reject-1280.png"))
    page.get_by_role("button", name="Confirm rejection").click()
    expect(page.get_by_text("The proposal was rejected.")).to_be_visible()
    expect(page.get_by_text("Your decision was recorded.")).to_be_focused()
    review = server.review(session_id)
    assert review["status"] == "rejected" and review["feedback"].startswith("Out of scope")


def test_without_javascript_reject_is_confirmed_and_a_refusal_keeps_the_comment(
    server: Server, browser: Browser
) -> None:
    session_id, review_id = server.propose()
    context = browser.new_context(viewport=DESKTOP, java_script_enabled=False)
    try:
        page = context.new_page()
        log_in(page, server, "rita", "rita-password-1")
        page.goto(f"{server.url}/reviews/{review_id}/")
        page.get_by_label("Comment for the agent").fill("Not what was asked.")
        with page.expect_navigation() as asked:
            page.get_by_role("button", name="Reject", exact=True).click()
        assert asked.value is not None and asked.value.status == 200
        expect(page.get_by_text("Reject this proposal?")).to_be_visible()
        assert server.review(session_id)["status"] == "pending"

        server.agent.delete(f"/sessions/{session_id}/review")  # the agent withdraws meanwhile
        with page.expect_navigation() as refused:
            page.get_by_role("button", name="Confirm rejection").click()
        assert refused.value is not None and refused.value.status == 409
        expect(page.get_by_label(re.compile("Your comment, not sent"))).to_have_value(
            "Not what was asked.")
        assert server.review(session_id)["status"] == "cancelled"
    finally:
        context.close()


def test_a_withdrawn_proposal_links_to_its_replacement(server: Server, page: Page) -> None:
    session_id, review_id = server.propose()
    assert server.agent.delete(f"/sessions/{session_id}/review").status_code == 200
    again = server.agent.post(f"/sessions/{session_id}/contracts", json=contract_body())
    log_in(page, server, "rita", "rita-password-1")
    page.goto(f"{server.url}/reviews/{review_id}/")
    page.get_by_role("link", name="the proposal that replaced this one").click()
    assert page.url.endswith(f"/reviews/{again.json()['review']['id']}/")
    expect(page.get_by_role("button", name="Approve", exact=True)).to_be_visible()
    assert_accessible(page)


def test_the_evidence_page_badge_carries_the_warnings(server: Server, page: Page) -> None:
    session_id, review_id = server.propose()
    log_in(page, server, "rita", "rita-password-1")
    page.goto(f"{server.url}/reviews/{review_id}/")
    page.get_by_role("button", name="Approve", exact=True).click()
    page.get_by_role("link", name="review the evidence plan").click()
    plan = page.get_by_role("region", name="Evidence plan")
    badge = plan.get_by_role("link", name=re.compile("^ready"))
    expect(badge).to_have_text("ready · 3 warnings")
    badge.click()
    expect(page.locator("#coverage-findings")).to_be_in_viewport()
    assert_accessible(page)
    page.goto(f"{server.url}/sessions/{session_id}/")
    assert_accessible(page)


def test_the_next_round_remembers_the_feedback_and_carries_the_approval(
    server: Server, page: Page
) -> None:
    session_id, review_id = server.propose()
    log_in(page, server, "rita", "rita-password-1")
    page.goto(f"{server.url}/reviews/{review_id}/")
    page.get_by_role("button", name="Approve", exact=True).click()
    page.get_by_role("link", name="review the evidence plan").click()
    page.get_by_label("Comment for the agent").fill("Check that README.md names pipx too.")
    page.get_by_role("button", name="Request revision").click()
    expect(page.get_by_text("A revision was requested.")).to_be_visible()
    again = server.agent.post(f"/sessions/{session_id}/contracts", json=contract_body(checks=3))
    assert again.status_code == 202, again.text

    page.goto(f"{server.url}/reviews/{again.json()['review']['id']}/")
    memory = page.get_by_role("region", name="Since the previous proposal")
    expect(memory).to_contain_text("Check that README.md names pipx too.")
    expect(memory).to_contain_text("added check readme-has-2")
    expect(page.get_by_text("You approved exactly this intent")).to_be_visible()
    assert_accessible(page)
    page.screenshot(path=str(SCREENSHOTS / "revision-1280.png"), full_page=True)
    page.get_by_role("button", name="Approve again").click()
    expect(page.get_by_text("The evidence plan is now waiting")).to_be_visible()
    assert server.review(session_id)["stage"] == "evidence"


def test_the_api_docs_render_without_internet(server: Server, page: Page) -> None:
    local = server.url + "/"
    page.route(re.compile(r"^(?!" + re.escape(local) + ")"), lambda route: route.abort())
    page.goto(server.url + "/api/v1/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Reliability Governor")
    expect(page.locator(".opblock").first).to_be_visible()


CONTRAST = """element => {
  const rgb = text => text.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map(v => v / 255).map(
      v => v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4)
    .reduce((sum, v, i) => sum + v * [0.2126, 0.7152, 0.0722][i], 0);
  let behind = element.parentElement;
  while (behind && getComputedStyle(behind).backgroundColor.match(/rgba\\(.*, 0\\)$/)) {
    behind = behind.parentElement;
  }
  const ring = lum(rgb(getComputedStyle(element).outlineColor));
  const ground = lum(rgb(behind ? getComputedStyle(behind).backgroundColor : "rgb(255,255,255)"));
  return (Math.max(ring, ground) + 0.05) / (Math.min(ring, ground) + 0.05);
}"""


def test_the_focus_ring_has_3_to_1_contrast_and_the_inbox_refresh_keeps_focus(
    server: Server, page: Page
) -> None:
    _, review_id = server.propose()
    log_in(page, server, "rita", "rita-password-1")
    link = page.locator(f"#open-{review_id}")
    link.focus()
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")  # focus by keyboard, as :focus-visible needs
    expect(link).to_be_focused()
    assert link.evaluate(CONTRAST) >= 3
    header_link = page.get_by_role("navigation", name="Site").get_by_role("link", name="Sessions")
    header_link.focus()
    assert header_link.evaluate(CONTRAST) >= 3
    assert page.locator("#inbox-list").get_attribute("aria-live") is None
    expect(page.locator("#inbox-status")).to_have_attribute("role", "status")

    link.focus()
    with page.expect_response(lambda response: "/reviews/live?" in response.url
                              and response.status == 200, timeout=15_000):
        server.propose()  # the list waiting on the server is swapped for one with it
    page.wait_for_timeout(300)  # the swap settles
    expect(page.locator(f"#open-{review_id}")).to_be_focused()


def test_the_sessions_list_filters_by_state(server: Server, browser: Browser) -> None:
    session_id, _ = server.propose()
    for viewport in (DESKTOP, NARROW):
        context = browser.new_context(viewport=viewport)
        try:
            page = context.new_page()
            log_in(page, server, "rita", "rita-password-1")
            page.get_by_role("link", name="Sessions").click()
            page.get_by_label("State").select_option("review-pending")
            page.get_by_role("button", name="Filter").click()
            expect(page.get_by_role("link", name=session_id)).to_be_visible()
            assert int(page.evaluate("document.documentElement.scrollWidth")) <= viewport["width"]
            assert_accessible(page)
        finally:
            context.close()

"""The revision loop of a delivered change in a real browser (issue 40): a reviewer comments on a
line and requests a revision on a page that says how many attempts the agent has left; the
agent's next stop on the unchanged tree spends nothing and is steered with the comment and the
line comment as path:line; the timeline warns that one attempt remains; the next delivery marks
the comment answered and warns it is the last attempt; its approval reaches the agent's long
poll and its next stop as certified with the terminal receipt. axe-core finds no violation, at
1280 and 390 px."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.api.test_contracts import readme_contract
from tests.browser import Server, assert_accessible, log_in, screenshot
from tests.browser.test_delivery import deliveries  # noqa: F401 - the fixture

pytestmark = pytest.mark.browser

DELIVERED = "# Demo\n\nA small demo package.\n\n## Install\n\n    pip install demo\n"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}


def both_widths(page: Page, name: str) -> None:
    """The page as it is, at 1280 px and at 390 px, each checked by axe-core."""
    for width, viewport in (("1280", DESKTOP), ("390", PHONE)):
        page.set_viewport_size(viewport)  # type: ignore[arg-type]
        assert_accessible(page)
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"], \
            f"{name} scrolls sideways at {width} px"
        screenshot(page, f"{name}-{width}")
    page.set_viewport_size(DESKTOP)  # type: ignore[arg-type]


def stop(server: Server, session_id: str) -> dict[str, Any]:
    response = server.agent.post(f"/sessions/{session_id}/turn-stop")
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_issue_40_from_the_reviewers_comment_to_the_agents_next_answer(
        deliveries: Server, page: Page) -> None:  # noqa: F811
    server = deliveries
    workspace = server.live.workspace_root / "revision-loop"
    workspace.mkdir()
    (workspace / "README.md").write_text("# Demo\n\nA small demo package.\n")
    session_id = server.agent.post("/sessions", json={
        "workspace": {"kind": "path", "path": str(workspace)}}).json()["id"]
    begun = server.agent.post(f"/sessions/{session_id}/contracts",
                              json=readme_contract(max_attempts=2))
    assert begun.status_code == 201, begun.text
    (workspace / "README.md").write_text(DELIVERED)
    delivered = stop(server, session_id)
    assert "If the person asks for changes, 1 attempt of 2 remains, and it is the last." \
        in delivered["message"]
    review_id = server.review(session_id)["id"]

    # The reviewer: the page warns that a revision request leaves the last attempt.
    log_in(page, server, "rita", "rita-password-1")
    page.goto(f"{server.url}/reviews/{review_id}/")
    expect(page.locator("p.budget")).to_contain_text(
        "A revision request leaves the agent its last attempt (this is attempt 1 of 2)")
    page.get_by_role("link", name="Comment on line 7 of README.md").click()
    page.locator("#comment-form").get_by_label("Comment on line 7 of README.md").fill(
        "Pin the version: pip install demo==1.0")
    page.locator("#comment-form").get_by_role("button", name="Add comment").click()
    expect(page.locator("tr.line-comment")).to_contain_text("Pin the version")
    both_widths(page, "revision-loop-delivery")
    page.get_by_label("Comment for the agent").fill("Pin the version, see my line comment.")
    page.get_by_role("button", name="Request revision").click()
    expect(page.locator("#decision")).to_contain_text(
        "The contract went back to active with its last attempt (1 of 2 used).")
    expect(page.locator("#decision")).not_to_contain_text("while its repair budget lasts")
    both_widths(page, "revision-loop-revision-requested")

    # The agent stops without changing anything: no attempt, the person's words, path:line.
    steer = stop(server, session_id)
    assert steer["action"] == "steer" and steer["attempt"] is None, steer
    assert "> Pin the version, see my line comment." in steer["message"]
    assert "- README.md:7: Pin the version: pip install demo==1.0" in steer["message"]
    assert "1 of 2 attempts used: 1 remains, and it is the last" in steer["message"]
    status = server.status(session_id)
    assert status["state"] == "active" and len(status["attempts"]) == 1

    # The timeline says the next attempt is the last.
    page.goto(f"{server.url}/sessions/{session_id}/")
    expect(page.locator("p.budget")).to_contain_text("1 of 2 attempts used: 1 remains, the last")
    expect(page.locator("p.revision-request")).to_contain_text(
        "A person asked for changes to the delivered change")
    both_widths(page, "revision-loop-timeline")

    # The agent answers the comment; the next delivery marks it answered, the last attempt.
    (workspace / "README.md").write_text(DELIVERED.replace("pip install demo",
                                                           "pip install demo==1.0"))
    again = stop(server, session_id)
    assert "This was your last attempt (2 of 2)" in again["message"], again
    second = server.review(session_id)
    assert second["status"] == "pending" and second["id"] != review_id
    page.goto(f"{server.url}/reviews/{second['id']}/")
    answered = page.locator(".round-comments li")
    expect(answered).to_contain_text("Pin the version: pip install demo==1.0")
    expect(answered.locator(".badge")).to_have_text("answered")
    expect(page.locator("p.budget")).to_contain_text("This is the agent's last attempt")
    both_widths(page, "revision-loop-next-round")
    # The agent waits on the long poll while the person approves.
    polled: dict[str, Any] = {}
    waiting = threading.Thread(target=lambda: polled.update(server.agent.get(
        f"/sessions/{session_id}/review", params={"wait": 30}).json()))
    waiting.start()
    time.sleep(0.5)  # the wait is held by now
    page.get_by_role("button", name="Approve", exact=True).click()
    expect(page.get_by_text("The delivered change is approved: the contract is certified."))\
        .to_be_visible()
    waiting.join(timeout=35)
    assert polled["review"]["status"] == "approved", polled
    assert polled["terminal"]["status"] == "certified"
    assert f"cite the terminal receipt {polled['terminal']['receipt']}" in polled["message"]

    # The approval reaches the agent's next stop: certified, with the receipt to cite.
    certified = stop(server, session_id)
    assert certified["action"] == "steer" and certified["terminal"]["status"] == "certified"
    assert certified["terminal"] == polled["terminal"]
    assert f"cite the terminal receipt {certified['terminal']['receipt']}" \
        in certified["message"]
    assert stop(server, session_id)["action"] == "allow"

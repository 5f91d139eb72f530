"""Revision rounds side by side (issue 28 item 4): the next round shows the old and the new text
of every changed intent item, claim, check parameter and the repair budget, the words that
changed marked (struck through and underlined, not by colour alone). axe-core finds no
violation."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.browser import Server, assert_accessible, log_in, screenshot
from tests.pages import INTENT, contract_body

pytestmark = pytest.mark.browser


def test_the_next_round_shows_old_and_new_text_with_the_changed_words_marked(
        server: Server, page: Page) -> None:
    session_id, review_id = server.propose()
    log_in(page, server, "rita", "rita-password-1")
    page.goto(f"{server.url}/reviews/{review_id}/")
    page.get_by_role("button", name="Approve", exact=True).click()
    page.get_by_role("link", name="review the evidence plan").click()
    page.get_by_label("Comment for the agent").fill("Name pipx, and allow one more attempt.")
    page.get_by_role("button", name="Request revision").click()
    expect(page.get_by_text("A revision was requested.")).to_be_visible()

    body = contract_body(max_attempts=2, intent={
        **INTENT, "assumptions": ["README.md may be missing yet"]})
    body["checks"][1]["text"] = "## Section 1 with pipx"
    body["claims"][0]["statement"] = "README.md satisfies requirement 0 and names pipx"
    again = server.agent.post(f"/sessions/{session_id}/contracts", json=body)
    assert again.status_code == 202, again.text
    page.goto(f"{server.url}/reviews/{again.json()['review']['id']}/")

    rounds = page.locator("table.rounds")
    assumption = rounds.get_by_role("row").filter(has_text="Assumption")
    expect(assumption.locator("del.word")).to_have_text("not exist")
    expect(assumption.locator("ins.word")).to_have_text("be missing")
    check = rounds.get_by_role("row").filter(has_text="Check readme-has-1: text")
    expect(check.locator("td").nth(0)).to_have_text('"## Section 1"')
    expect(check.locator("ins.word")).to_contain_text("pipx")
    claim = rounds.get_by_role("row").filter(has_text="Claim claim-0: statement")
    expect(claim.locator("ins.word")).to_contain_text("names pipx")
    budget = rounds.get_by_role("row").filter(has_text="Repair budget")
    expect(budget.locator("del.word")).to_have_text("3")
    expect(budget.locator("ins.word")).to_have_text("2")
    assert_accessible(page)
    screenshot(page, "revision-rounds-1280")

"""The delivered change in a real browser (issue 28 item 2): a project that reviews deliveries
shows the reviewer the diff from the contract-start tree and what proved each claim, axe-core
finds no violation, and Approve certifies the contract."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.api.test_contracts import readme_contract
from tests.browser import Server, assert_accessible, log_in, screenshot

pytestmark = pytest.mark.browser

DELIVERY = """
from governor.models import Project
Project.objects.filter(slug="demo").update(delivery_review="{mode}", review_mode="{review}")
"""


@pytest.fixture
def deliveries(server: Server) -> Iterator[Server]:
    server.shell(DELIVERY.format(mode="required", review="off"))
    yield server
    server.shell(DELIVERY.format(mode="off", review="required"))


def delivered(server: Server) -> tuple[str, str]:
    """A session whose contract's checks all pass: (session id, delivery review id)."""
    workspace = server.live.workspace_root / "delivered"
    workspace.mkdir()
    (workspace / "README.md").write_text("# Demo\n\nA small demo package.\n")
    session_id = server.agent.post("/sessions", json={
        "workspace": {"kind": "path", "path": str(workspace)}}).json()["id"]
    begun = server.agent.post(f"/sessions/{session_id}/contracts", json=readme_contract())
    assert begun.status_code == 201, begun.text
    (workspace / "README.md").write_text(
        "# Demo\n\nA small demo package.\n\n## Install\n\n    pip install demo\n")
    stop = server.agent.post(f"/sessions/{session_id}/turn-stop").json()
    assert stop["action"] == "allow" and "not certified yet" in stop["message"], stop
    review = server.review(session_id)
    assert review["stage"] == "delivery", review
    return session_id, review["id"]


def test_a_reviewer_sees_the_delivered_change_and_approving_it_certifies(
        deliveries: Server, page: Page) -> None:
    server = deliveries
    session_id, review_id = delivered(server)
    log_in(page, server, "rita", "rita-password-1")
    page.goto(f"{server.url}/reviews/{review_id}/")
    expect(page.get_by_role("heading", name=re.compile("^Delivered change"))).to_be_visible()
    expect(page.locator("#changes")).to_contain_text("1 file changed")
    expect(page.locator("#changes tr.line-added").filter(has_text="## Install")).to_have_count(1)
    expect(page.locator(".claim-proved")).to_contain_text("readme-install")
    assert_accessible(page)
    screenshot(page, "delivery-1280")
    page.get_by_role("button", name="Approve", exact=True).click()
    expect(page.get_by_text("The delivered change is approved: the contract is certified."))\
        .to_be_visible()
    assert server.status(session_id)["state"] == "certified"

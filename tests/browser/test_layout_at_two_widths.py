"""What a newcomer saw go wrong in the layout (issue 40), in a real browser at 1280 and 390 px:
the facts box of a proposal keeps each label beside its value (the expiry pair an htmx swap
replaces included), and a side-by-side diff keeps its code lines whole — a long one scrolls
inside the file's own box, never the page — and breaks a file name only after a "/"; the
evidence page shows a trusted run's command shell-quoted and its limits as sizes.
axe-core finds no violation."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Locator, Page, ViewportSize, expect

from tests.api.test_contracts import readme_contract
from tests.browser import DESKTOP, Server, assert_accessible, log_in, screenshot
from tests.browser.test_delivery import deliveries  # noqa: F401 - the fixture
from tests.browser.test_review_flow import approve_intent_and_open_the_evidence
from tests.pages import contract_body

pytestmark = pytest.mark.browser

PHONE: ViewportSize = {"width": 390, "height": 844}
LONG = "    return " + " + ".join(f"value_{n}" for n in range(24)) + "\n"


@pytest.fixture
def phone(browser: Browser) -> Page:
    return browser.new_context(viewport=PHONE).new_page()


def box(locator: Locator) -> dict[str, float]:
    found = locator.bounding_box()
    assert found is not None
    return dict(found)


def facts_aligned(page: Page) -> None:
    """Every dt of the facts box starts where the first does, every dd where the first does,
    and each dd stands on its dt's row."""
    facts = page.locator("dl.facts").first
    labels, values = facts.locator("dt"), facts.locator("dd")
    assert labels.count() == values.count() == 5
    first_label, first_value = box(labels.nth(0)), box(values.nth(0))
    for index in range(5):
        label, value = box(labels.nth(index)), box(values.nth(index))
        assert label["x"] == first_label["x"], labels.nth(index).inner_text()
        assert value["x"] == first_value["x"], labels.nth(index).inner_text()
        assert abs(label["y"] - value["y"]) < 2, labels.nth(index).inner_text()


def test_the_facts_box_keeps_each_label_beside_its_value_before_and_after_the_decision(
        server: Server, page: Page) -> None:
    _, review_id = server.propose()
    log_in(page, server, "rita", "rita-password-1")
    page.goto(f"{server.url}/reviews/{review_id}/")
    expect(page.locator("dl.facts dt").nth(4)).to_have_text("Proposal receipt")
    facts_aligned(page)
    assert_accessible(page)
    screenshot(page, "facts-box-1280")
    page.get_by_role("button", name="Approve", exact=True).click()  # htmx swaps the expiry pair
    expect(page.locator("#expiry")).to_contain_text("Would have expired")
    facts_aligned(page)
    assert_accessible(page)


def test_the_facts_box_stacks_each_label_over_its_value_on_a_phone(
        server: Server, phone: Page) -> None:
    _, review_id = server.propose()
    log_in(phone, server, "rita", "rita-password-1")
    phone.goto(f"{server.url}/reviews/{review_id}/")
    facts = phone.locator("dl.facts").first
    receipt_label = facts.get_by_text("Proposal receipt", exact=True)
    expiry_value = facts.locator("#expiry dd")
    assert box(expiry_value)["y"] < box(receipt_label)["y"] < box(facts.locator("dd").nth(4))["y"]
    screenshot(phone, "facts-box-390")


def delivered_with_a_long_line(server: Server, name: str) -> str:
    workspace = server.live.workspace_root / name
    (workspace / "src" / "calculator").mkdir(parents=True)
    (workspace / "README.md").write_text("# Demo\n")
    calc = workspace / "src" / "calculator" / "calc.py"
    calc.write_text("def total(values):\n    return sum(values)\n")
    session_id = server.agent.post("/sessions", json={
        "workspace": {"kind": "path", "path": str(workspace)}}).json()["id"]
    begun = server.agent.post(f"/sessions/{session_id}/contracts", json=readme_contract())
    assert begun.status_code == 201, begun.text
    (workspace / "README.md").write_text("# Demo\n\n## Install\n\n    pip install demo\n")
    calc.write_text("def total(values):\n" + LONG)
    server.agent.post(f"/sessions/{session_id}/turn-stop")
    review = server.review(session_id)
    assert review["stage"] == "delivery", review
    return str(review["id"])


def name_whole(page: Page, link: Locator) -> None:
    """"calc.py", the link's last text after a "/", stands on one line ("calc.\npy" did)."""
    expect(link).to_have_text("src/calculator/calc.py")
    assert page.evaluate("""(link) => {
        const range = document.createRange(); const text = link.lastChild;
        range.setStart(text, 0); range.setEnd(text, text.length);
        return range.getClientRects().length; }""", link.element_handle()) == 1


def code_stays_whole(page: Page) -> None:
    name_whole(page, page.locator("table.file-list a", has_text="calc.py"))
    change = page.locator("li.change", has_text="calc.py").first
    name_whole(page, change.locator("h3 a.path"))
    added = change.locator("td.code.line-added, tr.line-added td.code").last
    context = change.locator("td.code").first
    assert box(added)["height"] < 1.5 * box(context)["height"]  # the long line did not wrap
    scroller = change.locator(".diff-scroll")
    widths = scroller.evaluate("(el) => [el.scrollWidth, el.clientWidth]")
    assert widths[0] > widths[1]  # it scrolls inside its own box ...
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]


@pytest.mark.parametrize("view", ["split", "unified"])
def test_a_long_code_line_scrolls_in_its_own_box_and_a_file_name_breaks_only_at_a_slash(
        deliveries: Server, browser: Browser, view: str) -> None:  # noqa: F811 - the fixture
    server = deliveries
    review_id = delivered_with_a_long_line(server, f"long-line-{view}")
    for viewport, width in ((PHONE, "390"), (DESKTOP, "1280")):
        page = browser.new_context(viewport=viewport).new_page()
        log_in(page, server, "rita", "rita-password-1")
        page.goto(f"{server.url}/reviews/{review_id}/?diff={view}#changes")
        code_stays_whole(page)
        assert_accessible(page)
        screenshot(page, f"diff-long-line-{view}-{width}")
        page.context.close()


README_PRESENT = """
from governor.domain.profiles import validate_profile
from governor.models import Project
from governor.services.profiles import profile_store
from verification.models import VerifierProfile
profile_store(model=VerifierProfile, project=Project.objects.get(slug="demo"),
              validated=validate_profile({
                  "id": "readme-present", "description": "README.md is there",
                  "argv": ["/bin/sh", "-c", "test -f README.md"],
                  "limits": {"memory_bytes": 268435456}}))
"""


def test_the_evidence_page_quotes_the_command_and_reads_limits_as_sizes(
        server: Server, page: Page) -> None:
    server.shell(README_PRESENT)
    body = contract_body()
    body["checks"].append({"id": "present", "kind": "code_verification_succeeded",
                           "profile": "readme-present"})
    body["claims"][0]["check_ids"].append("present")
    _, review_id = server.propose(body)
    log_in(page, server, "rita", "rita-password-1")
    approve_intent_and_open_the_evidence(page, server, review_id)
    shown = page.locator(".check", has_text="present").locator(".profile-shown")
    expect(shown.locator("code.command")).to_have_text("/bin/sh -c 'test -f README.md'")
    memory = shown.locator("code", has_text="memoryBytes")
    expect(memory).to_have_text("memoryBytes 256 MiB")
    expect(memory).to_have_attribute("title", "268,435,456 bytes")
    assert_accessible(page)
    screenshot(page, "evidence-profile-1280")
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    screenshot(page, "evidence-profile-390")

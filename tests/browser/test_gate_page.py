"""rules §19.2 in a real browser at 1280 and 390 px: a gated change's page — its verdict, base
and head, what proved each rule, the findings and the diff — opened from the inbox, with no
horizontal scroll of the page and no axe-core violation; and the reliability page's count."""

from __future__ import annotations

import hashlib
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser import DESKTOP, Server, assert_accessible, log_in, screenshot
from tests.browser.test_layout_at_two_widths import PHONE

pytestmark = pytest.mark.browser

GATED = """
from django.contrib.auth import get_user_model
from governor.models import Membership, Project, Role
from governor.services.tokens import token_create
gated, _ = Project.objects.get_or_create(slug="gated", defaults={"name": "Gated project"})
rita = get_user_model().objects.get(username="rita")
Membership.objects.get_or_create(user=rita, project=gated, role=Role.REVIEWER)
print(token_create(project=gated, name="ci", owner=rita, kind="gate")[1])
"""


def blob(data: bytes) -> str:
    return hashlib.sha256(b"blob %d\0" % len(data) + data).hexdigest()


def gated_change(server: Server, head: dict[str, str], observe: bool = False) -> str:
    token = server.shell(GATED).strip().splitlines()[-1]
    base = {"calc.py": "def mul(a, b):\n    return a + b\n", "tests/test_calc.py":
            "from calc import mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n",
            ".governor-gate.toml": 'protected_paths = ["tests/**"]\n'}
    with httpx.Client(base_url=server.url + "/api/v1", timeout=60,
                      headers={"Authorization": f"Bearer {token}"}) as client:
        def entries(files: dict[str, str]) -> list[dict[str, Any]]:
            for data in files.values():
                client.put(f"/blobs/{blob(data.encode())}", content=data.encode(),
                           headers={"Content-Type": "application/octet-stream"})
            return [{"path": p, "mode": "100644", "blob": blob(d.encode())}
                    for p, d in files.items()]
        answer = client.post("/changes", json={
            "base": {"commit": "a" * 40, "entries": entries(base)},
            "head": {"commit": "b" * 40, "entries": entries({**base, **head})},
            "observe": observe})
        assert answer.status_code == 201, answer.text
        decided = client.get(f"/changes/{answer.json()['id']}", params={"wait": 10}).json()
        assert decided["status"] != "running", decided
        return str(decided["id"])


def no_page_scroll(page: Page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= page.viewport_size["width"], width  # type: ignore[index]


def test_rule_19_2_a_gated_changes_page_opens_from_the_inbox_at_1280_and_390_px(
        server: Server, page: Page, browser: Browser) -> None:
    gated_change(server, {"calc.py": "def mul(a, b):\n    return a * b\n"})
    cheat = gated_change(server, {"tests/test_calc.py": "def test_mul():\n    pass\n",
                                  "calc.py": "def mul(a, b):\n    return a * b\n"},
                         observe=True)
    log_in(page, server, "rita", "rita-password-1")
    page.locator(f"a[href='/projects/gated/changes/{cheat}/']").first.click()
    expect(page.get_by_role("heading", name="Findings")).to_be_visible()
    expect(page.locator("ul.findings")).to_contain_text("tests/test_calc.py (modified)")
    expect(page.get_by_text("observe mode").first).to_be_visible()
    no_page_scroll(page)
    assert_accessible(page)
    screenshot(page, "gated-change-1280")
    phone = browser.new_context(viewport=PHONE).new_page()
    log_in(phone, server, "rita", "rita-password-1")
    phone.goto(f"{server.url}/projects/gated/changes/{cheat}/")
    no_page_scroll(phone)
    assert_accessible(phone)
    screenshot(phone, "gated-change-390")
    page.goto(f"{server.url}/projects/gated/reliability")
    section = page.locator("#gate")
    expect(section).to_contain_text("Not certified")
    expect(section.locator("code", has_text="protected-paths")).to_be_visible()
    screenshot(page, "gated-reliability-1280")
    assert DESKTOP["width"] == 1280

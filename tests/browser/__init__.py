"""Browser specifications of the reviewer flows, and what they share: the server under test
(`Server`), logging in and screenshots."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, ViewportSize, expect

from tests.live import ROOT, Live
from tests.pages import contract_body

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
SCREENSHOTS = ROOT / "var" / "screenshots"
DESKTOP: ViewportSize = {"width": 1280, "height": 900}
NARROW: ViewportSize = {"width": 375, "height": 812}

PEOPLE = """
from django.contrib.auth import get_user_model
from governor.models import Membership, Project, Role
users = get_user_model().objects
demo = Project.objects.get(slug="demo")
Project.objects.filter(pk=demo.pk).update(max_checks=100)
rita = users.create_user("rita", "rita@example.com", "rita-password-1")
Membership.objects.create(user=rita, project=demo, role=Role.REVIEWER)
other = Project.objects.create(slug="other", name="Other project", review_mode="required")
otto = users.create_user("otto", "otto@example.com", "otto-password-1")
Membership.objects.create(user=otto, project=other, role=Role.REVIEWER)
"""

SIGNED_APPROVALS = """
Project.objects.filter(pk=demo.pk).update(require_signed_approvals=True)
"""


@dataclass
class Server:
    live: Live
    agent: httpx.Client
    workspaces: dict[str, Path] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.live.url

    def shell(self, code: str) -> str:
        return self.live.manage("shell", "-c", code)

    def propose(self, body: dict[str, Any] | None = None, **shape: Any) -> tuple[str, str]:
        """A new agent session whose contract (`body`, or `contract_body(**shape)`) waits for
        review: (session id, review id)."""
        workspace = self.live.workspace_root / f"session-{len(self.workspaces) + 1}"
        workspace.mkdir()
        session = self.agent.post("/sessions", json={
            "workspace": {"kind": "path", "path": str(workspace)}})
        assert session.status_code == 201, session.text
        session_id = session.json()["id"]
        self.workspaces[session_id] = workspace
        begun = self.agent.post(f"/sessions/{session_id}/contracts",
                                json=body or contract_body(**shape))
        assert begun.status_code == 202, begun.text
        return session_id, begun.json()["review"]["id"]

    def review(self, session_id: str) -> dict[str, Any]:
        """The agent's view of its session's latest review (GET …/review)."""
        response = self.agent.get(f"/sessions/{session_id}/review")
        assert response.status_code == 200, response.text
        return dict(response.json()["review"])

    def status(self, session_id: str) -> dict[str, Any]:
        return dict(self.agent.get(f"/sessions/{session_id}").json())

    def expire(self, review_id: str) -> None:
        self.shell(
            "from datetime import timedelta\n"
            "from django.utils import timezone\n"
            "from reviews.models import Review\n"
            f"Review.objects.filter(pk={json.dumps(review_id)})"
            ".update(expires_at=timezone.now() - timedelta(seconds=1))\n")


def log_in(page: Page, server: Server, username: str, password: str) -> None:
    page.goto(server.url + "/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Review inbox")).to_be_visible()


def assert_accessible(page: Page) -> None:
    """axe-core (bundled by axe-playwright-python, no network) finds no violation on the page
    as it is now."""
    results = Axe().run(page)
    assert results.violations_count == 0, f"{page.url}\n{results.generate_report()}"


def screenshot(page: Page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path

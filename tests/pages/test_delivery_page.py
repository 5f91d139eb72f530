"""The delivery page (issue 28 item 2): once every check passed, the reviewer sees what was
delivered — the change from the contract-start tree with its diff, the passing attempt and what
proved each claim — and approving it on the page certifies the contract."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from governor.models import Project
from reviews.models import Review
from tests.api.test_contracts import readme_contract
from tests.conftest import AgentClient
from tests.pages import diff_text, press, reviewer_client
from tests.pages.test_review_pages import url


@pytest.fixture
def rita(reviewer: Any, project: Project) -> Client:
    project.delivery_review = "required"  # the intent and plan are not reviewed here
    project.save(update_fields=["delivery_review"])
    return reviewer_client("rita", "rita-password-1")


def delivered(agent: AgentClient, workspace: Path) -> tuple[str, Review]:
    (workspace / "README.md").write_text("# Demo\n")
    session_id = agent.create_session(workspace)["id"]
    assert agent.post(f"/sessions/{session_id}/contracts",
                      readme_contract()).status_code == 201
    (workspace / "README.md").write_text("# Demo\n\n## Install\n\npip install demo\n")
    agent.post(f"/sessions/{session_id}/turn-stop")
    return session_id, Review.objects.get(stage="delivery")


def test_the_delivery_page_shows_the_change_and_what_proved_each_claim(
        agent: AgentClient, workspace: Path, rita: Client) -> None:
    _, review = delivered(agent, workspace)
    page = rita.get(url(review)).content.decode()
    assert "What was delivered" in page
    assert "1 file changed" in page and "README.md" in page
    assert "+## Install" in diff_text(page)  # the diff itself
    assert "+pip install demo" in diff_text(page)
    assert "<code>readme-install</code>" in page and "README.md documents installation" in page
    assert review.receipt in page  # the form binds exactly this proposal


def test_approving_the_delivery_on_the_page_certifies_the_contract(
        agent: AgentClient, workspace: Path, rita: Client) -> None:
    session_id, review = delivered(agent, workspace)
    response = press(rita, url(review), "Approve")
    assert response.status_code == 302, response.content
    assert agent.get(f"/sessions/{session_id}").json()["state"] == "certified"
    assert Review.objects.get(pk=review.pk).status == "approved"
    timeline = rita.get(f"/sessions/{session_id}/").content.decode()
    assert "Delivery review: approved" in timeline


def test_a_second_delivery_remembers_the_revision_it_answers(
        agent: AgentClient, workspace: Path, rita: Client) -> None:
    session_id, first = delivered(agent, workspace)
    assert press(rita, url(first), "Request revision",
                 feedback="Say which Python it needs").status_code == 302
    (workspace / "README.md").write_text("# Demo\n\n## Install\n\nPython 3.11: pip install demo\n")
    agent.post(f"/sessions/{session_id}/turn-stop")
    second = Review.objects.get(stage="delivery", status="pending")
    page = rita.get(url(second)).content.decode()
    assert "Say which Python it needs" in page
    assert "was attempt 1; this one is attempt 2" in page
    assert "+Python 3.11: pip install demo" in diff_text(page)

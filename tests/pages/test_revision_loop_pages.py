"""The revision loop on the pages (issue 40): the delivery page and the timeline say how many
attempts remain and warn before the last; a decided revision request says what it did to the
contract — never that it is active again when the budget was spent; the next round judges each
line comment against its line; a decision on a decided delivery changes nothing and says why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from governor.models import Project
from reviews.models import Review
from tests.api.test_contracts import readme_contract
from tests.conftest import AgentClient
from tests.pages import press, reviewer_client
from tests.pages.test_review_pages import url

pytestmark = pytest.mark.django_db

DELIVERED = "# Demo\n\n## Install\n\npip install demo\n"


@pytest.fixture
def rita(reviewer: Any, project: Project) -> Client:
    project.delivery_review = "required"
    project.save(update_fields=["delivery_review"])
    return reviewer_client("rita", "rita-password-1")


def delivered(agent: AgentClient, workspace: Path, *, max_attempts: int = 3,
              text: str = DELIVERED) -> tuple[str, Review]:
    session_id = agent.create_session(workspace)["id"]
    assert agent.post(f"/sessions/{session_id}/contracts",
                      readme_contract(max_attempts=max_attempts)).status_code == 201
    (workspace / "README.md").write_text(text)
    agent.post(f"/sessions/{session_id}/turn-stop")
    return session_id, Review.objects.get(stage="delivery", status="pending")


def page_of(client: Client, review: Review) -> str:
    response = client.get(url(review))
    assert response.status_code == 200
    return " ".join(response.content.decode().split())


def test_issue_40_the_delivery_page_counts_what_a_revision_request_leaves(
        agent: AgentClient, workspace: Path, rita: Client) -> None:
    _, review = delivered(agent, workspace)
    page = page_of(rita, review)
    assert "attempt 1 of 3" in page
    assert "This is attempt 1 of 3: a revision request leaves the agent 2 more." in page


def test_issue_40_the_delivery_page_warns_when_it_is_the_agents_last_attempt(
        agent: AgentClient, workspace: Path, rita: Client) -> None:
    _, review = delivered(agent, workspace, max_attempts=1)
    page = page_of(rita, review)
    assert ("<strong>This is the agent's last attempt</strong> (attempt 1 of 1): a revision "
            "request ends the contract exhausted, as a rejection does.") in page


def test_issue_40_a_revision_with_the_budget_spent_says_the_contract_ended_exhausted(
        agent: AgentClient, workspace: Path, rita: Client) -> None:
    session_id, review = delivered(agent, workspace, max_attempts=1)
    assert press(rita, url(review), "Request revision", feedback="Pin it.").status_code == 302
    page = page_of(rita, review)
    assert ("The repair budget was spent (1 of 1 attempts), so the contract ended "
            "<strong>exhausted</strong>.") in page
    assert "active again" not in page and "went back to active" not in page
    assert agent.get(f"/sessions/{session_id}").json()["state"] == "exhausted"


def test_issue_40_a_revision_with_attempts_left_says_how_many(
        agent: AgentClient, workspace: Path, rita: Client) -> None:
    session_id, review = delivered(agent, workspace)
    assert press(rita, url(review), "Request revision", feedback="Pin it.").status_code == 302
    page = page_of(rita, review)
    assert "The contract went back to active with 2 of 3 attempts left." in page
    assert "while its repair budget lasts" not in page
    timeline = " ".join(rita.get(f"/sessions/{session_id}/").content.decode().split())
    assert "1 of 3 attempts used: 2 remain." in timeline
    assert (f'A person asked for changes to the <a href="/reviews/{review.pk}/">delivered '
            "change</a>") in timeline
    assert "a stop on the tree they reviewed makes no attempt" in timeline


def test_issue_40_the_timeline_warns_before_the_last_attempt(
        agent: AgentClient, workspace: Path, rita: Client) -> None:
    session_id = agent.create_session(workspace)["id"]
    assert agent.post(f"/sessions/{session_id}/contracts",
                      readme_contract(max_attempts=2)).status_code == 201
    agent.post(f"/sessions/{session_id}/turn-stop")  # README.md is missing: attempt 1 fails
    timeline = " ".join(rita.get(f"/sessions/{session_id}/").content.decode().split())
    assert ("1 of 2 attempts used: <strong>1 remains, the last</strong> — if it fails, or a "
            "person asks for changes to what it delivers, the contract ends exhausted.") \
        in timeline


def test_issue_40_the_next_round_judges_each_comment_by_its_line(
        agent: AgentClient, workspace: Path, rita: Client) -> None:
    from governor.services.reviews import review_comment_add, review_decide

    session_id, first = delivered(agent, workspace)
    user = first.session.project.memberships.get().user
    review_comment_add(user=user, review=first, path="README.md", spot="n5", body="Pin it.")
    review_comment_add(user=user, review=first, path="README.md", spot="n1", body="Rename.")
    review_decide(user=user, review=first, receipt=first.receipt,
                  decision="revision-requested", feedback="See the comments.")
    (workspace / "README.md").write_text(DELIVERED.replace("demo\n", "demo==1.0\n"))
    agent.post(f"/sessions/{session_id}/turn-stop")
    second = Review.objects.get(stage="delivery", status="pending")
    page = page_of(rita, second)
    assert '<span class="badge ok">answered</span> <code>README.md</code> line 5' in page
    assert ('<span class="badge warn">file changed elsewhere</span> <code>README.md</code> '
            'line 1') in page


def test_issue_40_a_revision_request_on_an_approved_delivery_changes_nothing_and_says_why(
        agent: AgentClient, workspace: Path, rita: Client) -> None:
    session_id, review = delivered(agent, workspace)
    stale = rita.get(url(review)).content.decode()  # loaded before another tab approved it
    assert press(rita, url(review), "Approve").status_code == 302
    refused = press(rita, url(review), "Request revision", feedback="One more thing",
                    html=stale)
    assert refused.status_code == 409
    page = " ".join(refused.content.decode().split())
    assert "Nothing was changed." in page
    assert ("Why: This proposal was already approved, so it is not the session&#x27;s current "
            "pending proposal and a revision request changes nothing") in page
    assert Review.objects.get(pk=review.pk).status == "approved"
    assert agent.get(f"/sessions/{session_id}").json()["state"] == "certified"


def test_security_issue_40_an_abstain_citing_the_decision_does_not_rewrite_the_review_page(
        agent: AgentClient, workspace: Path, rita: Client) -> None:
    """Attack: after a revision request with attempts left, the agent abstains with a reason
    naming the decision's receipt (its review route gives it). The page of that decision must
    not then say the person's request spent the budget and ended the contract."""
    session_id, review = delivered(agent, workspace)
    assert press(rita, url(review), "Request revision", feedback="Pin it.").status_code == 302
    review.refresh_from_db()
    assert agent.post(f"/sessions/{session_id}/abstain",
                      {"reason": f"Done (decision {review.decision_receipt})."}).status_code == 200
    page = page_of(rita, review)
    assert "The repair budget was spent" not in page and "ended <strong>abstained" not in page
    assert "The contract went back to active with 2 of 3 attempts left." in page

"""Separation of duties (rules §6): nobody approves a proposal sent with an agent token they
own, whichever session it was sent into, nor one in a session their token created. The attack
runs the way a dishonest reviewer would run it: through the agent API and the review pages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from governor.models import AgentToken, Membership, Project, Role, Session
from governor.selectors.sessions import session_status
from governor.services.tokens import token_create
from reviews.models import Review, Stage, Status
from tests.conftest import AgentClient
from tests.pages import contract_body, press, propose, reviewer_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def ritas_agent(reviewer: Any, review_project: Project) -> AgentClient:
    """An agent token of the project that the reviewer rita owns."""
    _, secret = token_create(project=review_project, name="rita's agent", owner=reviewer)
    return AgentClient(secret)


@pytest.fixture
def sam(review_project: Project) -> Client:
    """A second reviewer, who owns no token."""
    user = get_user_model().objects.create_user("sam", "sam@example.com", "sam-password-1")
    Membership.objects.create(user=user, project=review_project, role=Role.REVIEWER)
    return reviewer_client("sam", "sam-password-1")


def begin(agent: AgentClient, session_id: str) -> Review:
    response = agent.post(f"/sessions/{session_id}/contracts", contract_body())
    assert response.status_code == 202, response.content
    return Review.objects.get(pk=response.json()["review"]["id"])


def url(review: Review) -> str:
    return f"/reviews/{review.pk}/"


def assert_refused(client: Client, review: Review, why: str) -> None:
    response = press(client, url(review), "Approve")
    assert response.status_code == 409
    page = response.content.decode()
    assert "Nothing was approved." in page
    assert f"You own the agent token that {why}, so you may not approve this proposal" in page
    review.refresh_from_db()
    assert review.status == Status.PENDING and not review.approvals.exists()


def test_a_proposal_sent_with_the_reviewers_token_into_another_session_is_not_theirs(
    rita: Client, sam: Client, agent: AgentClient, ritas_agent: AgentClient, workspace: Path
) -> None:
    session_id = agent.create_session(workspace)["id"]  # created by ada's token
    intent = begin(ritas_agent, session_id)  # sent with rita's
    assert intent.proposed_by == AgentToken.objects.get(name="rita's agent")
    assert_refused(rita, intent, "sent it")
    assert press(sam, url(intent), "Approve").status_code == 302
    evidence = Review.objects.get(session_id=session_id, stage=Stage.EVIDENCE)
    assert evidence.proposed_by == intent.proposed_by  # the second stage keeps its proposer
    assert_refused(rita, evidence, "sent it")
    assert session_status(Session.objects.get(pk=session_id))["state"] == "review-pending"


def test_another_reviewer_approves_both_stages_of_that_proposal(
    rita: Client, sam: Client, agent: AgentClient, ritas_agent: AgentClient, workspace: Path
) -> None:
    session_id = agent.create_session(workspace)["id"]
    intent = begin(ritas_agent, session_id)
    assert press(sam, url(intent), "Approve").status_code == 302
    evidence = Review.objects.get(session_id=session_id, stage=Stage.EVIDENCE)
    assert press(sam, url(evidence), "Approve").status_code == 302
    assert session_status(Session.objects.get(pk=session_id))["state"] == "active"


def test_a_proposal_in_a_session_the_reviewers_token_created_is_not_theirs_to_approve(
    rita: Client, agent: AgentClient, ritas_agent: AgentClient, workspace: Path
) -> None:
    session_id = ritas_agent.create_session(workspace)["id"]
    intent = begin(agent, session_id)  # sent with ada's token into rita's session
    assert_refused(rita, intent, "created its session")


def test_the_reviewer_still_approves_what_other_tokens_propose(
    rita: Client, agent: AgentClient, ritas_agent: AgentClient, workspace: Path
) -> None:
    _, intent = propose(agent, workspace)
    assert press(rita, url(intent), "Approve").status_code == 302
    assert Review.objects.get(pk=intent.pk).status == Status.APPROVED


def test_the_reviewer_may_still_send_their_own_proposal_back(
    rita: Client, agent: AgentClient, ritas_agent: AgentClient, workspace: Path
) -> None:
    session_id = agent.create_session(workspace)["id"]
    intent = begin(ritas_agent, session_id)
    response = press(rita, url(intent), "Request revision", feedback="name the package manager")
    assert response.status_code == 302
    assert Review.objects.get(pk=intent.pk).status == Status.REVISION_REQUESTED

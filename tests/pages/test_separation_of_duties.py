"""Separation of duties at every stage (rules §6.5, §17.10): nobody approves what an agent
token they own took part in — created the session, began the contract (whichever session it was
sent into), or made any of its attempts — at the intent, the evidence or the delivery stage. The
attack runs the way a dishonest reviewer would run it: through the agent API and the review
pages."""

from __future__ import annotations

from html import unescape
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from governor.models import AgentToken, Event, Membership, Project, Role, Session
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
    """The approval is refused on the page, naming the reviewer's token and what it did, and
    nothing is written."""
    events = Event.objects.filter(session_id=review.session_id).count()
    response = press(client, url(review), "Approve")
    assert response.status_code == 409
    page = unescape(response.content.decode())
    assert "Nothing was approved." in page
    assert f"Why: {why}, so you may not approve this proposal: another reviewer must" in page
    review.refresh_from_db()
    assert review.status == Status.PENDING and not review.approvals.exists()
    assert Event.objects.filter(session_id=review.session_id).count() == events


def test_a_proposal_sent_with_the_reviewers_token_into_another_session_is_not_theirs(
    rita: Client, sam: Client, agent: AgentClient, ritas_agent: AgentClient, workspace: Path
) -> None:
    session_id = agent.create_session(workspace)["id"]  # created by ada's token
    intent = begin(ritas_agent, session_id)  # sent with rita's
    assert intent.proposed_by == AgentToken.objects.get(name="rita's agent")
    assert_refused(rita, intent, "Your agent token 'rita's agent' began the contract")
    assert press(sam, url(intent), "Approve").status_code == 302
    evidence = Review.objects.get(session_id=session_id, stage=Stage.EVIDENCE)
    assert evidence.proposed_by == intent.proposed_by  # the second stage keeps its proposer
    assert_refused(rita, evidence, "Your agent token 'rita's agent' began the contract")
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
    assert_refused(rita, intent, "Your agent token 'rita's agent' created the session")


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


# --- the delivery stage (rules §17.10) ---------------------------------------------------------


@pytest.fixture
def delivery_project(review_project: Project) -> Project:
    """Contracts begin at once (review off) and a person approves every delivery: the road
    where no intent or evidence review stands before the delivery."""
    review_project.review_mode = "off"
    review_project.delivery_review = "required"
    review_project.save(update_fields=["review_mode", "delivery_review"])
    return review_project


def deliver(began: AgentClient, attempted: AgentClient, session_id: str,
            workspace: Path) -> Review:
    """`began` begins the README contract; the work is done; `attempted` stops, making the
    passing attempt: a delivery review waits."""
    body = {key: value for key, value in contract_body().items() if key != "intent"}
    assert began.post(f"/sessions/{session_id}/contracts", body).status_code == 201
    (workspace / "README.md").write_text("# Demo\n\n## Section 1\n")
    answer = attempted.post(f"/sessions/{session_id}/turn-stop").json()
    assert answer["action"] == "allow" and answer["attempt"]["passed"] is True, answer
    return Review.objects.get(session_id=session_id, stage=Stage.DELIVERY)


def state(session_id: str) -> str:
    return str(session_status(Session.objects.get(pk=session_id))["state"])


def test_rule_17_10_a_reviewer_whose_token_began_and_did_the_work_may_not_approve_the_delivery(
    delivery_project: Project, rita: Client, agent: AgentClient, ritas_agent: AgentClient,
    workspace: Path
) -> None:
    session_id = agent.create_session(workspace)["id"]  # created by ada's token
    delivery = deliver(ritas_agent, ritas_agent, session_id, workspace)  # rita's did the rest
    assert_refused(rita, delivery, "Your agent token 'rita's agent' began the contract and "
                                   "made attempt 1")
    assert state(session_id) == "delivery-pending"
    mine = {"id": AgentToken.objects.get(name="rita's agent").pk, "name": "rita's agent"}
    assert delivery.proposal["tokens"] == [{"token": mine, "did": "began the contract"},
                                           {"token": mine, "did": "made attempt 1"}]
    assert delivery.proposed_by is not None and delivery.proposed_by.name == "rita's agent"
    page = unescape(rita.get(url(delivery)).content.decode())
    assert "<code>rita's agent</code> made attempt 1" in page  # the reviewer sees who did it


def test_rule_17_10_a_reviewer_whose_token_only_made_an_attempt_may_not_approve_the_delivery(
    delivery_project: Project, rita: Client, agent: AgentClient, ritas_agent: AgentClient,
    workspace: Path
) -> None:
    session_id = agent.create_session(workspace)["id"]
    delivery = deliver(agent, ritas_agent, session_id, workspace)
    assert_refused(rita, delivery, "Your agent token 'rita's agent' made attempt 1")


def test_rule_17_10_the_person_whose_token_only_created_the_session_may_not_approve_either(
    delivery_project: Project, agent_owner: Any, agent: AgentClient, ritas_agent: AgentClient,
    workspace: Path
) -> None:
    Membership.objects.create(user=agent_owner, project=delivery_project, role=Role.REVIEWER)
    ada = reviewer_client("ada", "ada-password-1")
    session_id = agent.create_session(workspace)["id"]  # ada's token only created it
    delivery = deliver(ritas_agent, ritas_agent, session_id, workspace)
    assert_refused(ada, delivery, "Your agent token 'agent' created the session")


def test_rule_17_10_an_uninvolved_reviewer_certifies_the_delivery(
    delivery_project: Project, rita: Client, sam: Client, agent: AgentClient,
    ritas_agent: AgentClient, workspace: Path
) -> None:
    session_id = agent.create_session(workspace)["id"]
    delivery = deliver(ritas_agent, ritas_agent, session_id, workspace)
    assert_refused(rita, delivery, "Your agent token 'rita's agent' began the contract and "
                                   "made attempt 1")
    assert press(sam, url(delivery), "Approve").status_code == 302
    assert state(session_id) == "certified"


def test_rule_17_10_the_token_that_began_a_reviewed_contract_bars_its_owner_at_delivery(
    review_project: Project, rita: Client, sam: Client, agent: AgentClient,
    ritas_agent: AgentClient, workspace: Path
) -> None:
    """Two-stage review, then the delivery: rita's token began it (sam approved both stages),
    ada's token made the attempt; the contract names its begin, so rita is still refused."""
    review_project.delivery_review = "required"
    review_project.save(update_fields=["delivery_review"])
    session_id = agent.create_session(workspace)["id"]
    intent = begin(ritas_agent, session_id)
    assert press(sam, url(intent), "Approve").status_code == 302
    evidence = Review.objects.get(session_id=session_id, stage=Stage.EVIDENCE)
    assert press(sam, url(evidence), "Approve").status_code == 302
    (workspace / "README.md").write_text("# Demo\n\n## Section 1\n")
    assert agent.post(f"/sessions/{session_id}/turn-stop").json()["attempt"]["passed"] is True
    delivery = Review.objects.get(session_id=session_id, stage=Stage.DELIVERY)
    assert_refused(rita, delivery, "Your agent token 'rita's agent' began the contract")
    assert press(sam, url(delivery), "Approve").status_code == 302
    assert state(session_id) == "certified"

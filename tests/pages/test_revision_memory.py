"""Revision memory (issue 15, item 3; rules §13): after "Request revision" the next proposal
shows the feedback it answers and what changed against the previous proposal of its stage; an
intent whose receipt equals one this reviewer already approved in the session says so and is
re-approved in one step, recorded with `carriedFrom`; the token-owner rule still holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from governor.models import Event, Membership, Project, Role
from reviews.models import Approval, Review, Stage, Status
from tests.conftest import AgentClient
from tests.pages import contract_body, press, propose, reviewer_client

pytestmark = pytest.mark.django_db

FEEDBACK = "Check that README.md names pipx too."


@pytest.fixture
def rita(reviewer: Any) -> Client:
    return reviewer_client("rita", "rita-password-1")


def url(review: Review) -> str:
    return f"/reviews/{review.pk}/"


def revised(rita: Client, agent: AgentClient, workspace: Path, project: Project
            ) -> tuple[Review, Review, Review]:
    """Intent 1 approved, its evidence plan sent back with FEEDBACK, and the agent's second
    begin (one more check, so claim-0 lists it too): (intent 1, evidence 1, intent 2)."""
    Project.objects.filter(pk=project.pk).update(review_mode="required")
    session_id, first = propose(agent, workspace)
    assert press(rita, url(first), "Approve").status_code == 302
    evidence = Review.objects.get(session_id=session_id, stage=Stage.EVIDENCE)
    assert press(rita, url(evidence), "Request revision", feedback=FEEDBACK).status_code == 302
    again = agent.post(f"/sessions/{session_id}/contracts", contract_body(checks=3))
    assert again.status_code == 202, again.content
    second = Review.objects.get(pk=again.json()["review"]["id"])
    first.refresh_from_db()
    return first, evidence, second


def test_the_next_proposal_shows_the_feedback_and_what_changed(
    rita: Client, agent: AgentClient, workspace: Path, project: Project
) -> None:
    first, evidence, second = revised(rita, agent, workspace, project)
    html = rita.get(url(second)).content.decode()
    memory = html.split('id="revision-heading"')[1].split("</section>")[0]
    assert "rita's" in memory and "revision request" in memory
    assert FEEDBACK in memory and f'href="/reviews/{evidence.pk}/"' in memory
    assert f'href="/reviews/{first.pk}/">the previous intent proposal' in memory
    assert '(<span class="badge ok">approved</span>)' in memory  # issue 40: not "(approved )"
    assert '<span class="badge ok">added</span> check <code>readme-has-2</code>' in memory
    assert '<span class="badge warn">changed</span> claim <code>claim-0</code>: checkIds' in memory
    assert "The objective changed" not in memory and "removed" not in memory


def test_a_first_proposal_has_no_revision_memory(
    rita: Client, agent: AgentClient, workspace: Path, project: Project
) -> None:
    Project.objects.filter(pk=project.pk).update(review_mode="required")
    _, first = propose(agent, workspace)
    assert 'id="revision-heading"' not in rita.get(url(first)).content.decode()


def test_an_intent_approved_before_is_re_approved_in_one_step_with_carried_from(
    rita: Client, agent: AgentClient, workspace: Path, project: Project
) -> None:
    first, _, second = revised(rita, agent, workspace, project)
    assert second.receipt == first.receipt  # same objective, intent and authorship
    html = rita.get(url(second)).content.decode()
    assert "You approved exactly this intent" in html
    assert f'name="carried_from" value="{first.decision_receipt}"' in html
    assert press(rita, url(second), "Approve again", html=html).status_code == 302
    second.refresh_from_db()
    assert second.status == Status.APPROVED
    assert Approval.objects.get(review=second).carried_from == first.decision_receipt
    event = Event.objects.filter(session_id=second.session_id,
                                 type="reliability/intent-review").order_by("-seq").first()
    assert event is not None and event.data["carriedFrom"] == [first.decision_receipt]
    assert event.data["receipt"] == second.decision_receipt
    assert Review.objects.filter(session_id=second.session_id, stage=Stage.EVIDENCE,
                                 status=Status.PENDING).exists()


def test_another_reviewers_approval_is_not_carried(
    rita: Client, agent: AgentClient, workspace: Path, project: Project
) -> None:
    first, _, second = revised(rita, agent, workspace, project)
    sam = get_user_model().objects.create_user("sam", "sam@example.com", "sam-password-1")
    Membership.objects.create(user=sam, project=project, role=Role.REVIEWER)
    sams = reviewer_client("sam", "sam-password-1")
    html = sams.get(url(second)).content.decode()
    assert "You approved exactly this intent" not in html and "carried_from" not in html
    forged = html.replace('<input type="hidden" name="receipt"',
                          f'<input type="hidden" name="carried_from" '
                          f'value="{first.decision_receipt}"><input type="hidden" name="receipt"')
    refused = press(sams, url(second), "Approve", html=forged)
    assert refused.status_code == 409 and "is not yours of exactly this receipt" in (
        refused.content.decode())
    assert Review.objects.get(pk=second.pk).status == Status.PENDING
    assert not Approval.objects.filter(review=second).exists()


def test_the_token_owner_cannot_carry_an_approval(
    rita: Client, agent: AgentClient, workspace: Path, project: Project, agent_owner: Any
) -> None:
    first, _, second = revised(rita, agent, workspace, project)
    Approval.objects.filter(review=first).update(user=agent_owner)  # as if ada had approved
    Membership.objects.create(user=agent_owner, project=project, role=Role.REVIEWER)
    ada = reviewer_client("ada", "ada-password-1")
    html = ada.get(url(second)).content.decode()
    assert "You approved exactly this intent" in html
    refused = press(ada, url(second), "Approve again", html=html)
    assert refused.status_code == 409
    assert ("Your agent token &#x27;agent&#x27; created the session and began the contract"
            in refused.content.decode())
    assert Review.objects.get(pk=second.pk).status == Status.PENDING

"""The one decision box (issue 15, item 4): a comment and Approve / Request revision / Reject in
one form; a reason is required to reject or request a revision; Reject asks for confirmation on
the server, so also without JavaScript; nothing typed is lost when a decision is refused; a
decided, withdrawn or expired proposal links to the one that replaced it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from governor.models import Event, Membership, Project, Role
from reviews.models import Review, Status
from tests.conftest import AgentClient
from tests.pages import contract_body, press, propose, reject, reviewer_client

pytestmark = pytest.mark.django_db

REASON = "The Install section must name pipx; this plan never checks it."


@pytest.fixture
def rita(reviewer: Any) -> Client:
    return reviewer_client("rita", "rita-password-1")


@pytest.fixture
def intent_review(agent: AgentClient, workspace: Path, project: Project) -> Review:
    Project.objects.filter(pk=project.pk).update(review_mode="required")
    return propose(agent, workspace)[1]


def url(review: Review) -> str:
    return f"/reviews/{review.pk}/"


def nothing_decided(review: Review) -> bool:
    return (Review.objects.get(pk=review.pk).status == Status.PENDING
            and not Event.objects.filter(session_id=review.session_id,
                                         type__startswith="reliability/intent").exists())


@pytest.mark.parametrize(("button", "verb"), [("Reject", "reject"),
                                              ("Request revision", "request a revision")])
def test_a_reason_is_required_to_reject_or_request_a_revision(
    rita: Client, intent_review: Review, button: str, verb: str
) -> None:
    response = press(rita, url(intent_review), button, feedback="   ")
    assert response.status_code == 400
    assert f"a reason is required to {verb}" in response.content.decode()
    assert nothing_decided(intent_review)


def test_approving_needs_no_comment(rita: Client, intent_review: Review) -> None:
    assert press(rita, url(intent_review), "Approve").status_code == 302
    assert Review.objects.get(pk=intent_review.pk).status == Status.APPROVED


def test_reject_asks_for_confirmation_on_the_server_and_keeps_the_reason(
    rita: Client, intent_review: Review
) -> None:
    asked = press(rita, url(intent_review), "Reject", feedback=REASON)
    assert asked.status_code == 200
    html = asked.content.decode()
    assert "Reject this proposal?" in html and "Confirm rejection</button>" in html
    assert f">{REASON}</textarea>" in html
    assert nothing_decided(intent_review)
    done = press(rita, url(intent_review), "Confirm rejection", html=html)
    assert done.status_code == 302
    review = Review.objects.get(pk=intent_review.pk)
    assert review.status == Status.REJECTED and review.feedback == REASON


def test_htmx_reject_asks_for_confirmation_in_the_panel(
    rita: Client, intent_review: Review
) -> None:
    asked = press(rita, url(intent_review), "Reject", feedback=REASON, **{"HX-Request": "true"})
    html = asked.content.decode()
    assert asked.status_code == 200 and html.lstrip().startswith('<section id="decision"')
    assert "Confirm rejection</button>" in html and nothing_decided(intent_review)


def test_a_refused_decision_keeps_what_was_typed(rita: Client, intent_review: Review) -> None:
    shown = rita.get(url(intent_review)).content.decode()
    assert press(rita, url(intent_review), "Approve").status_code == 302  # another tab
    refused = press(rita, url(intent_review), "Request revision", feedback=REASON, html=shown)
    assert refused.status_code == 409
    html = refused.content.decode()
    assert "Nothing was changed." in html  # issue 40: a revision request approves nothing
    assert "already approved" in html  # and says what became of the proposal
    assert "Your comment, not sent" in html and f">{REASON}</textarea>" in html


def test_a_too_long_comment_is_refused_and_kept(rita: Client, intent_review: Review) -> None:
    text = "x" * 2001
    refused = press(rita, url(intent_review), "Request revision", feedback=text)
    assert refused.status_code == 400 and f">{text}</textarea>" in refused.content.decode()


def test_the_token_owners_refused_approval_keeps_the_comment(
    intent_review: Review, agent_owner: Any
) -> None:
    Membership.objects.create(user=agent_owner, project=intent_review.session.project,
                              role=Role.REVIEWER)
    ada = reviewer_client("ada", "ada-password-1")
    refused = press(ada, url(intent_review), "Approve", feedback="looks right to me")
    assert refused.status_code == 409
    html = refused.content.decode()
    assert "Your agent token &#x27;agent&#x27; created the session and began" in html
    assert ">looks right to me</textarea>" in html


def test_a_withdrawn_proposal_links_to_the_one_that_replaced_it(
    rita: Client, agent: AgentClient, intent_review: Review
) -> None:
    session_id = str(intent_review.session_id)
    assert agent.delete(f"/sessions/{session_id}/review").status_code == 200
    again = agent.post(f"/sessions/{session_id}/contracts", contract_body())
    assert again.status_code == 202, again.content
    html = rita.get(url(intent_review)).content.decode()
    assert "The agent withdrew this proposal." in html
    assert f'<a href="/reviews/{again.json()["review"]["id"]}/">the proposal that replaced' in html


def test_a_rejected_proposal_links_to_the_next_one(
    rita: Client, agent: AgentClient, intent_review: Review
) -> None:
    assert reject(rita, url(intent_review), REASON).status_code == 302
    html = rita.get(url(intent_review)).content.decode()
    assert "the proposal that replaced" not in html  # none yet
    again = agent.post(f"/sessions/{intent_review.session_id}/contracts", contract_body())
    html = rita.get(url(intent_review)).content.decode()
    assert f'<a href="/reviews/{again.json()["review"]["id"]}/">the proposal that replaced' in html
    assert REASON in html


def test_decision_buttons_are_one_form(rita: Client, intent_review: Review) -> None:
    html = rita.get(url(intent_review)).content.decode()
    assert html.count("<textarea") == 1
    assert html.count('name="decision"') == 3

"""The agent's side of two-stage review (rules §6): begin answers 202 with the review URL,
the agent reads the state and feedback, may withdraw, and turn-stop never certifies meanwhile."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core import mail
from django.utils import timezone

from governor.models import Event, Project
from governor.services.reviews import review_decide
from reviews.models import Review
from tests.api.test_contracts import readme_contract
from tests.conftest import INTENT, AgentClient


@pytest.fixture
def required(project: Project) -> Project:
    project.review_mode = "required"
    project.save(update_fields=["review_mode"])
    return project


def begin(agent: AgentClient, session: dict, **extra: Any) -> Any:
    return agent.post(f"/sessions/{session['id']}/contracts",
                      readme_contract(intent=INTENT, **extra))


def review_events(session: dict) -> list[Event]:
    return list(Event.objects.filter(session_id=session["id"], type__endswith="-review"))


def test_rule_6_begin_requires_an_intent_when_review_is_required(
    required: Project, agent: AgentClient, session: dict
) -> None:
    response = agent.post(f"/sessions/{session['id']}/contracts", readme_contract())
    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["path"] == "intent"


def test_rule_6_begin_returns_202_with_the_review_url_and_writes_no_contract(
    required: Project, agent: AgentClient, session: dict
) -> None:
    response = begin(agent, session)
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "review-pending"
    assert body["review_url"].startswith(settings.PUBLIC_URL + "/reviews/")
    assert body["review"]["review_url"] == body["review_url"]  # absolute everywhere
    assert body["review"]["stage"] == "intent"
    assert body["review"]["proposal_receipt"].startswith("sha256:")
    assert not Event.objects.filter(session_id=session["id"], type="reliability/contract")
    status = agent.get(f"/sessions/{session['id']}").json()
    assert status["state"] == "review-pending"


def test_rule_6_a_second_begin_while_a_review_is_pending_is_409(
    required: Project, agent: AgentClient, session: dict
) -> None:
    begin(agent, session)
    assert begin(agent, session).status_code == 409


def test_rule_7_turn_stop_while_review_pending_allows_without_verified_claim(
    required: Project, agent: AgentClient, session: dict
) -> None:
    begin(agent, session)
    answer = agent.post(f"/sessions/{session['id']}/turn-stop").json()
    assert answer["action"] == "allow"
    assert "no completion contract is active" in answer["message"]


def test_reviewers_get_an_email_when_a_proposal_waits(
    required: Project, agent: AgentClient, session: dict, reviewer: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        begin(agent, session)
    assert [m.to for m in mail.outbox] == [["rita@example.com"]]
    assert "/reviews/" in mail.outbox[0].body


def test_withdrawing_appends_a_cancelled_decision(
    required: Project, agent: AgentClient, session: dict
) -> None:
    begin(agent, session)
    response = agent.delete(f"/sessions/{session['id']}/review")
    assert response.status_code == 200
    assert response.json()["review"]["status"] == "cancelled"
    [event] = review_events(session)
    assert event.data["decision"] == "cancelled"
    assert event.data["decidedBy"] == {"kind": "agent"}
    assert agent.delete(f"/sessions/{session['id']}/review").status_code == 409


def test_rule_6_revision_feedback_reaches_the_agent_but_never_the_log(
    required: Project, agent: AgentClient, session: dict, reviewer: Any
) -> None:
    begin(agent, session)
    review = Review.objects.get()
    feedback = "Please name the exact README heading — secret-marker-42"
    review_decide(user=reviewer, review=review, receipt=review.receipt,
                  decision="revision-requested", feedback=feedback)
    answer = agent.get(f"/sessions/{session['id']}/review").json()["review"]
    assert answer["status"] == "revision-requested"
    assert answer["feedback"] == feedback
    [event] = review_events(session)
    assert event.data["feedbackBytes"] == len(feedback.encode())
    assert event.data["feedbackReceipt"].startswith("sha256:")
    assert event.data["decidedBy"] == {"kind": "reviewer", "userId": reviewer.pk}
    export = b"".join(agent.get(f"/sessions/{session['id']}/export").streaming_content)
    assert b"secret-marker-42" not in export
    assert all("secret-marker-42" not in str(e.data) for e in Event.objects.all())


def test_rule_6_approving_both_stages_activates_a_version_5_contract(
    required: Project, agent: AgentClient, session: dict, reviewer: Any
) -> None:
    begin(agent, session)
    intent = Review.objects.get()
    review_decide(user=reviewer, review=intent, receipt=intent.receipt, decision="approved")
    evidence = Review.objects.get(stage="evidence")
    assert evidence.proposal["approvedIntent"]["proposalReceipt"] == intent.receipt
    answer = agent.get(f"/sessions/{session['id']}/review").json()["review"]
    assert (answer["stage"], answer["status"]) == ("evidence", "pending")
    review_decide(user=reviewer, review=evidence, receipt=evidence.receipt, decision="approved")
    status = agent.get(f"/sessions/{session['id']}").json()
    contract = status["contract"]
    assert status["state"] == "active"
    assert contract["version"] == 5
    intent_event, evidence_event = review_events(session)
    assert contract["review"]["intentReviewReceipt"] == intent_event.data["receipt"]
    assert contract["review"]["contractReviewReceipt"] == evidence_event.data["receipt"]
    assert evidence_event.data["intentProposalReceipt"] == intent.receipt
    assert contract["contractId"] == evidence.proposal["contractId"]
    assert contract["intent"]["nonGoals"] == ["no new dependencies"]


def test_rule_6_a_stale_receipt_approves_nothing(
    required: Project, agent: AgentClient, session: dict, reviewer: Any
) -> None:
    from governor.services.reviews import StaleReceipt

    begin(agent, session)
    review = Review.objects.get()
    with pytest.raises(StaleReceipt):
        review_decide(user=reviewer, review=review, receipt="sha256:" + "0" * 64,
                      decision="approved")
    assert Review.objects.get().status == "pending"
    assert review_events(session) == []


def test_rule_6_an_expired_proposal_fails_closed(
    required: Project, agent: AgentClient, session: dict, reviewer: Any
) -> None:
    from governor.services.reviews import StaleReceipt

    begin(agent, session)
    Review.objects.update(expires_at=timezone.now())
    review = Review.objects.get()
    with pytest.raises(StaleReceipt):
        review_decide(user=reviewer, review=review, receipt=review.receipt, decision="approved")
    assert Review.objects.get().status == "expired"
    [event] = review_events(session)
    assert event.data["decision"] == "expired"
    assert agent.get(f"/sessions/{session['id']}").json()["state"] == "idle"


def test_rule_6_expiry_happens_even_when_nobody_looks(
    required: Project, agent: AgentClient, session: dict
) -> None:
    from reviews.tasks import expire_due_reviews

    begin(agent, session)
    Review.objects.update(expires_at=timezone.now())
    assert expire_due_reviews() == 1
    assert Review.objects.get().status == "expired"


def test_rule_6_n_approvals_need_n_distinct_reviewers(
    required: Project, agent: AgentClient, session: dict, reviewer: Any
) -> None:
    from django.contrib.auth import get_user_model

    from governor.models import Membership

    required.required_approvals = 2
    required.save(update_fields=["required_approvals"])
    second = get_user_model().objects.create_user("sam", "sam@example.com", "sam-password-1")
    Membership.objects.create(user=second, project=required, role="reviewer")
    begin(agent, session)
    review = Review.objects.get()
    review_decide(user=reviewer, review=review, receipt=review.receipt, decision="approved")
    review_decide(user=reviewer, review=review, receipt=review.receipt, decision="approved")
    assert Review.objects.get(pk=review.pk).status == "pending"
    review_decide(user=second, review=review, receipt=review.receipt, decision="approved")
    assert Review.objects.get(pk=review.pk).status == "approved"
    [event] = review_events(session)
    assert event.data["decidedBy"] == {"kind": "reviewers", "userIds": [reviewer.pk, second.pk]}


def test_rule_6_any_rejection_ends_the_stage(
    required: Project, agent: AgentClient, session: dict, reviewer: Any
) -> None:
    required.required_approvals = 2
    required.save(update_fields=["required_approvals"])
    begin(agent, session)
    review = Review.objects.get()
    review_decide(user=reviewer, review=review, receipt=review.receipt, decision="approved")
    review_decide(user=reviewer, review=review, receipt=review.receipt, decision="rejected")
    assert Review.objects.get(pk=review.pk).status == "rejected"
    assert agent.get(f"/sessions/{session['id']}").json()["state"] == "idle"


def test_long_poll_returns_the_current_state_after_its_wait(
    required: Project, agent: AgentClient, session: dict
) -> None:
    begin(agent, session)
    answer = agent.get(f"/sessions/{session['id']}/review", wait=1).json()
    assert answer["review"]["status"] == "pending"


def test_a_non_reviewer_cannot_decide(
    required: Project, agent: AgentClient, session: dict, workspace: Path
) -> None:
    from django.contrib.auth import get_user_model

    from governor.lib.errors import NotFound

    outsider = get_user_model().objects.create_user("olga", "o@example.com", "olga-password-1")
    begin(agent, session)
    review = Review.objects.get()
    with pytest.raises(NotFound):
        review_decide(user=outsider, review=review, receipt=review.receipt, decision="approved")


def test_rule_6_the_agent_tokens_owner_cannot_approve_its_proposal(
    required: Project, workspace: Path, reviewer: Any
) -> None:
    from governor.services.reviews import OwnAgent
    from governor.services.tokens import token_create

    _, secret = token_create(project=required, name="rita's agent", owner=reviewer)
    own = AgentClient(secret)
    session = own.create_session(workspace)
    begin(own, session)
    review = Review.objects.get()
    with pytest.raises(OwnAgent):
        review_decide(user=reviewer, review=review, receipt=review.receipt, decision="approved")
    assert Review.objects.get().status == "pending"


def test_verify_or_abstain_while_a_proposal_waits_says_so_and_names_the_review_page(
    required: Project, agent: AgentClient, session: dict
) -> None:
    """Not "there is no contract": one waits for a person, and the answer says where."""
    begin(agent, session)
    review = Review.objects.get(session_id=session["id"])
    for route, body, action in (("verify", {}, "verify"),
                                ("abstain", {"reason": "r"}, "abstain from")):
        answer = agent.post(f"/sessions/{session['id']}/{route}", body)
        assert answer.status_code == 409
        assert answer.json()["error"]["message"] == (
            f"a contract is waiting for review (intent stage), so none is active yet and there "
            f"is nothing to {action}: a reviewer decides at "
            f"{settings.PUBLIC_URL}/reviews/{review.pk}/")

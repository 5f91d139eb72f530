"""Approvals (rules §6, docs/security.md): an agent token cannot reach the review pages or
decide anything, even when its owner is a reviewer who could decide through a login. The
attack runs as an agent would run it: the token in `Authorization: Bearer`, a valid CSRF cookie
and field, and the exact receipt of the proposal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from governor.models import Event, Membership, Project, Role
from governor.services.tokens import token_create
from reviews.models import Review, Status
from tests.conftest import AgentClient
from tests.pages import press, propose, reviewer_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def sams_secret(review_project: Project) -> str:
    """The secret of an agent token owned by sam, a reviewer of the project: logged in, sam
    could approve what another token proposes."""
    sam = get_user_model().objects.create_user("sam", "sam@example.com", "sam-password-1")
    Membership.objects.create(user=sam, project=review_project, role=Role.REVIEWER)
    return token_create(project=review_project, name="sam's agent", owner=sam)[1]


@pytest.fixture
def intent_review(agent: AgentClient, workspace: Path, review_project: Project) -> Review:
    return propose(agent, workspace)[1]  # sent with ada's token, not sam's


def bearer_client(secret: str) -> Client:
    """A client holding only the token, and the CSRF cookie any visitor gets from the login
    page (so a refused POST is refused for who sent it, not for a missing CSRF token)."""
    client = Client(enforce_csrf_checks=True, headers={"Authorization": f"Bearer {secret}"})
    assert client.get("/accounts/login/").status_code == 200
    return client


def is_login_redirect(response: Any) -> bool:
    return response.status_code == 302 and response["Location"].startswith(
        "/accounts/login/?next=")


def assert_nothing_decided(review: Review) -> None:
    review.refresh_from_db()
    assert review.status == Status.PENDING
    assert not review.approvals.exists()
    assert not Event.objects.filter(session_id=review.session_id,
                                    type__in=["intent-review", "intent-feedback"]).exists()
    assert not Review.objects.exclude(pk=review.pk).exists()  # no evidence proposal opened


def test_control_the_tokens_owner_logged_in_approves(
    sams_secret: str, intent_review: Review
) -> None:
    """What the token must not reach: its owner, logged in, decides this proposal."""
    sam = reviewer_client("sam", "sam-password-1")
    assert press(sam, f"/reviews/{intent_review.pk}/", "Approve").status_code == 302
    intent_review.refresh_from_db()
    assert intent_review.status == Status.APPROVED


@pytest.mark.parametrize("path", ["/reviews/", "/reviews/{review}/", "/sessions/{session}/",
                                  "/sessions/{session}/export"])
def test_a_bearer_token_reaches_no_review_page(
    sams_secret: str, intent_review: Review, path: str
) -> None:
    client = bearer_client(sams_secret)
    target = path.format(review=intent_review.pk, session=intent_review.session_id)
    for headers in ({}, {"HX-Request": "true"}):
        response = client.get(target, headers=headers)
        assert is_login_redirect(response), (target, response.status_code)
        assert intent_review.receipt not in response.content.decode()


@pytest.mark.parametrize("decision", [Status.APPROVED, Status.REVISION_REQUESTED, Status.REJECTED])
def test_a_bearer_token_posting_the_exact_receipt_decides_nothing(
    sams_secret: str, intent_review: Review, decision: str
) -> None:
    client = bearer_client(sams_secret)
    fields = {"receipt": intent_review.receipt, "decision": decision, "feedback": "fine",
              "csrfmiddlewaretoken": client.cookies["csrftoken"].value}
    for headers in ({}, {"HX-Request": "true"}):
        response = client.post(f"/reviews/{intent_review.pk}/", fields, headers=headers)
        assert is_login_redirect(response), response.status_code
    assert_nothing_decided(intent_review)


def test_the_agent_api_offers_no_way_to_decide(sams_secret: str, intent_review: Review) -> None:
    agent = AgentClient(sams_secret)
    body = {"receipt": intent_review.receipt, "decision": "approved"}
    for path in (f"/sessions/{intent_review.session_id}/review",
                 f"/sessions/{intent_review.session_id}/review/approve",
                 f"/reviews/{intent_review.pk}", f"/reviews/{intent_review.pk}/decision"):
        assert agent.post(path, body).status_code in (404, 405), path
    assert_nothing_decided(intent_review)

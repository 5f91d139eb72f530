"""Line comments on a delivery (issue 28 item 3), without a browser: only a reviewer of the
project may add one, only while the delivery waits, only with text; they reach the agent with
the decision, and the decision event binds them by count and receipt, never their text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from governor.models import Event, Project
from reviews.models import LineComment
from tests.conftest import AgentClient
from tests.html_forms import forms_on
from tests.pages import press, reviewer_client
from tests.pages.test_delivery_page import delivered
from tests.pages.test_review_pages import url

pytestmark = pytest.mark.django_db


@pytest.fixture
def rita(reviewer: Any, project: Project) -> Client:
    project.delivery_review = "required"
    project.save(update_fields=["delivery_review"])
    return reviewer_client("rita", "rita-password-1")


def comment(client: Client, review: Any, body: str, spot: str = "n3") -> Any:
    page = client.get(f"{url(review)}?path=README.md&comment={spot}").content.decode()
    (form,) = [form for form in forms_on(page) if "Add comment" in form["buttons"]]
    return client.post(f"/reviews/{review.pk}/comments",
                       {**form["fields"], "body": body})


def test_a_comment_waits_on_its_line_then_reaches_the_agent_with_the_revision_request(
        agent: AgentClient, workspace: Path, rita: Client) -> None:
    session_id, review = delivered(agent, workspace)
    response = comment(rita, review, "Name the Python version.")
    assert response.status_code == 302 and "#comment-" in response["Location"]
    assert agent.get(f"/sessions/{session_id}/review").json()["review"]["comments"] == []
    assert press(rita, url(review), "Request revision", feedback="See the comment.") \
        .status_code == 302
    answer = agent.get(f"/sessions/{session_id}/review").json()["review"]
    assert [(c["path"], c["side"], c["line"], c["body"]) for c in answer["comments"]] == [
        ("README.md", "new", 3, "Name the Python version.")]
    event = Event.objects.filter(session_id=session_id,
                                 type="reliability/delivery-review").get()
    assert event.data["commentsCount"] == 1 and "Name the Python" not in str(event.data)


def test_an_empty_comment_or_one_on_a_decided_delivery_adds_nothing(
        agent: AgentClient, workspace: Path, rita: Client) -> None:
    _, review = delivered(agent, workspace)
    page = rita.get(f"{url(review)}?path=README.md&comment=n1").content.decode()
    (form,) = [form for form in forms_on(page) if "Add comment" in form["buttons"]]
    comment(rita, review, "   ")
    assert not LineComment.objects.exists()
    assert press(rita, url(review), "Approve").status_code == 302
    response = rita.post(f"/reviews/{review.pk}/comments", {**form["fields"], "body": "late"})
    assert response.status_code == 302 and not LineComment.objects.exists()


def test_someone_who_does_not_review_the_project_cannot_comment(
        agent: AgentClient, workspace: Path, rita: Client) -> None:
    _, review = delivered(agent, workspace)
    other = Client()
    other.force_login(get_user_model().objects.create_user("olga", password="olga-pw-1"))
    response = other.post(f"/reviews/{review.pk}/comments",
                          {"path": "README.md", "spot": "n1", "body": "hi"})
    assert response.status_code == 404 and not LineComment.objects.exists()

"""The sessions list (issue 15, item 6): the sessions of the member's projects, filtered by
project, state, agent token and date, searched by session id or receipt; a fixed number of
queries whatever the number of sessions."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from governor.models import Project, Session
from governor.services.tokens import token_create
from tests.conftest import AgentClient
from tests.pages import propose, reviewer_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def rita(reviewer: Any) -> Client:
    return reviewer_client("rita", "rita-password-1")


def listed(client: Client, query: str = "") -> list[str]:
    response = client.get(f"/sessions/{query}")
    assert response.status_code == 200, response.status_code
    return re.findall(r'<a href="/sessions/([0-9a-f-]{36})/" class="mono">',
                      response.content.decode())


def test_filters_and_search(
    rita: Client, agent: AgentClient, workspace: Path, project: Project, agent_owner: Any,
    other_agent: AgentClient
) -> None:
    idle = agent.create_session(workspace)["id"]
    Project.objects.filter(pk=project.pk).update(review_mode="required")
    waiting, review = propose(agent, workspace)
    token, secret = token_create(project=project, name="second agent", owner=agent_owner)
    second = AgentClient(secret).create_session(workspace)["id"]
    other_agent.create_session(workspace.parent)  # another project: never listed

    assert set(listed(rita)) == {idle, waiting, second}
    assert listed(rita, "?state=review-pending") == [waiting]
    assert set(listed(rita, "?state=idle")) == {idle, second}
    assert listed(rita, f"?token={token.pk}") == [second]
    assert set(listed(rita, f"?project={project.pk}")) == {idle, waiting, second}
    assert listed(rita, f"?q={idle}") == [idle]
    assert listed(rita, f"?q={review.receipt}") == [waiting]
    today = timezone.now().date().isoformat()
    assert len(listed(rita, f"?since={today}&until={today}")) == 3
    assert listed(rita, "?since=2999-01-01") == []
    refused = rita.get("/sessions/?q=not-an-id").content.decode()
    assert "Not a session id (a UUID) or a receipt" in refused


def test_another_projects_token_is_not_a_choice(
    rita: Client, other_agent: AgentClient, workspace: Path
) -> None:
    session_id = other_agent.create_session(workspace.parent)["id"]
    token_id = Session.objects.get(pk=session_id).created_by_id
    response = rita.get(f"/sessions/?token={token_id}").content.decode()
    assert "Select a valid choice" in response and session_id not in response


@pytest.mark.parametrize("count", [3, 30])
def test_the_list_reads_a_fixed_number_of_queries(
    rita: Client, agent: AgentClient, workspace: Path, count: int,
    django_assert_num_queries: Any
) -> None:
    for _ in range(count):
        agent.create_session(workspace)
    # session, user, the sessions (with project, token, state and pending), the form's
    # project and token choices (and, when any of the page has one, its latest proposals)
    with django_assert_num_queries(5):
        assert len(listed(rita)) == count

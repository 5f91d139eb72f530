"""What operators and newcomers meet first (issue 15, item 8): the API docs page needs no
internet (django-ninja's own Swagger UI files), and every review URL an agent, a webhook or an
e-mail passes on is absolute."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.test import Client

from governor.models import Project
from reviews.notifications import waiting_payload
from tests.conftest import AgentClient
from tests.pages import press, propose, reviewer_client

pytestmark = pytest.mark.django_db


def test_the_api_docs_page_loads_swagger_from_this_server() -> None:
    html = Client().get("/api/v1/docs").content.decode()
    for asset in ("ninja/swagger-ui-bundle.js", "ninja/swagger-ui-init.js",
                  "ninja/swagger-ui.css"):
        assert f"/static/{asset}" in html
        assert finders.find(asset) is not None  # collectstatic ships it
    assert "cdn." not in html and "https://" not in html


def test_the_review_url_is_absolute_everywhere(
    agent: AgentClient, workspace: Path, project: Project
) -> None:
    Project.objects.filter(pk=project.pk).update(review_mode="required")
    session_id, review = propose(agent, workspace)
    expected = f"{settings.PUBLIC_URL}/reviews/{review.pk}/"
    assert agent.get(f"/sessions/{session_id}/review").json()["review"]["review_url"] == expected
    assert agent.get(f"/sessions/{session_id}").json()["review"]["review_url"] == expected
    assert waiting_payload(review)["url"] == expected


def test_the_front_door_and_the_admins_view_site_lead_to_the_inbox(reviewer: Any) -> None:
    response = Client().get("/")
    assert response.status_code == 302 and response["Location"] == "/reviews/"
    admin = get_user_model().objects.create_superuser("root", "r@example.com", "root-pass-1")
    client = Client()
    client.force_login(admin)
    page = client.get("/admin/").content.decode()
    assert '<a href="/">View site</a>' in page


def test_the_bootstrap_secrets_stand_out_in_a_banner(db: Any) -> None:
    out = StringIO()
    call_command("governor_bootstrap", stdout=out, no_color=True)
    lines = out.getvalue().splitlines()
    top, bottom = (index for index, line in enumerate(lines) if line == "=" * 78)
    inside = "\n".join(lines[top:bottom])
    assert "SAVE THESE NOW: shown once" in inside
    assert re.search(r"admin login:  \S+ / \S+", inside)
    assert re.search(r"agent token:  \S+", inside)


def test_the_inbox_lists_recently_decided_proposals(
    agent: AgentClient, workspace: Path, project: Project, reviewer: Any
) -> None:
    Project.objects.filter(pk=project.pk).update(review_mode="required")
    _, first = propose(agent, workspace)
    rita = reviewer_client("rita", "rita-password-1")
    empty = rita.get("/reviews/").content.decode()
    assert "No proposal in your projects has been decided yet." in empty
    assert press(rita, f"/reviews/{first.pk}/", "Approve").status_code == 302
    html = rita.get("/reviews/").content.decode()
    decided = html.split('id="decided-heading"')[1].split("</section>")[0]
    assert f'href="/reviews/{first.pk}/"' in decided
    assert '<span class="badge ok">approved</span>' in decided and "by rita" in decided


def test_a_reviewer_without_an_email_address_is_told_on_the_inbox_and_in_the_log(
    agent: AgentClient, workspace: Path, project: Project, reviewer: Any,
    django_capture_on_commit_callbacks: Any, caplog: pytest.LogCaptureFixture,
) -> None:
    Project.objects.filter(pk=project.pk).update(review_mode="required")
    rita = reviewer_client("rita", "rita-password-1")
    assert "Your account has no e-mail address" not in rita.get("/reviews/").content.decode()
    get_user_model().objects.filter(username="rita").update(email="")
    assert "Your account has no e-mail address" in rita.get("/reviews/").content.decode()
    with caplog.at_level("WARNING", logger="reviews.tasks"), \
            django_capture_on_commit_callbacks(execute=True):
        _, review = propose(agent, workspace)
    assert (f"reviewers of {project.slug} with no e-mail address are not told that review "
            f"{review.pk} waits: rita") in caplog.text

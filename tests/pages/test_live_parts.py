"""The live parts of the pages (`/reviews/live`, `/sessions/<id>/live`): the same access rules
as their pages, a clear refusal of a bad `wait`, an answer at the end of the wait when nothing
changed, and the per-person cap on waits. (tests/api/test_page_wakeups.py wakes them with a
commit from another thread, on PostgreSQL; tests/browser/test_live_pages.py in a browser.)"""

from __future__ import annotations

import re
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from governor.models import Project, Role, WaitSlot
from reviews.models import Review
from tests.api.test_wait_slots import wait_slot
from tests.conftest import AgentClient
from tests.harness_builders import Trace
from tests.pages import propose
from tests.pages.test_review_pages import member

pytestmark = pytest.mark.django_db


def live_url(html: str, part: str) -> str:
    """The address the page's live part waits on, as htmx would ask it."""
    found = re.search(rf'<section id="{part}"[^>]*hx-get="([^"]+)"', html)
    assert found, f"no live part #{part}"
    return found.group(1).replace("&amp;", "&")


def test_the_inbox_answers_204_when_nothing_changed_by_the_end_of_the_wait(
    rita: Client, intent_review: Review
) -> None:
    address = live_url(rita.get("/reviews/").content.decode(), "inbox-list")
    assert "wait=30" in address
    started = time.monotonic()
    response = rita.get(address.replace("wait=30", "wait=1"), headers={"HX-Request": "true"})
    assert response.status_code == 204 and response.content == b""
    assert time.monotonic() - started >= 1
    assert not WaitSlot.objects.exists()  # its slot was given back


def test_the_inbox_answers_the_fresh_list_when_it_changed_before_the_wait(
    rita: Client, agent: AgentClient, workspace: Path, intent_review: Review
) -> None:
    address = live_url(rita.get("/reviews/").content.decode(), "inbox-list")
    newer = propose(agent, workspace, objective="Add a CHANGELOG entry")[1]
    response = rita.get(address, headers={"HX-Request": "true"})
    assert response.status_code == 200
    html = response.content.decode()
    assert f'id="open-{newer.pk}"' in html and f'id="open-{intent_review.pk}"' in html
    assert "2 proposals waiting" in html
    assert live_url(html, "inbox-list") != address  # it next waits from what it shows now


def test_the_timeline_answers_the_runs_once_events_were_appended(
    rita: Client, agent: AgentClient, workspace: Path, review_project: Project
) -> None:
    session_id = agent.create_session(workspace)["id"]
    address = live_url(rita.get(f"/sessions/{session_id}/").content.decode(), "runs")
    events = Trace().start_turn().flush()  # the turn's start and the person's message
    appended = agent.append(session_id, events)
    assert appended.status_code == 200, appended.content
    response = rita.get(address, headers={"HX-Request": "true"})
    assert response.status_code == 200
    assert "2 events appended since this page was loaded" in response.content.decode()


def test_a_person_outside_the_project_gets_404_and_learns_nothing(
    agent: AgentClient, workspace: Path, review_project: Project, tmp_path: Path
) -> None:
    session_id = agent.create_session(workspace)["id"]
    outsider = member("olga", Project.objects.create(slug="elsewhere", name="Elsewhere",
                                                     workspace_roots=[str(tmp_path)]),
                      Role.REVIEWER)
    response = outsider.get(f"/sessions/{session_id}/live", {"version": "x", "wait": 1})
    assert response.status_code == 404
    assert session_id not in response.content.decode()


def test_the_inbox_of_a_person_who_reviews_nothing_lists_nothing(
    intent_review: Review, review_project: Project
) -> None:
    operator = member("oscar", review_project, Role.OPERATOR)
    response = operator.get("/reviews/live", {"version": "x", "wait": 0})
    assert response.status_code == 200
    assert "Nothing is waiting for your review" in response.content.decode()


def test_a_signed_out_request_is_refused_and_told_to_reload_the_page(
    intent_review: Review
) -> None:
    for address in ("/reviews/live", f"/sessions/{intent_review.session_id}/live"):
        response = Client().get(address, {"version": "x", "wait": 1},
                                headers={"HX-Request": "true"})
        assert response.status_code == 403, address
        assert response["HX-Refresh"] == "true"  # the page's login check then takes over
        assert intent_review.receipt not in response.content.decode()


@pytest.mark.parametrize("wait", ["abc", "-1", "61", "1.5"])
def test_a_bad_wait_is_refused_naming_the_field(rita: Client, wait: str) -> None:
    response = rita.get("/reviews/live", {"version": "x", "wait": wait})
    assert response.status_code == 400
    assert response.content.decode().startswith("wait: whole seconds from 0 to 60")


def test_only_get_is_answered(reviewer: Any) -> None:
    client = Client()  # past the CSRF check, as a same-site form would be
    client.force_login(reviewer)
    for address in ("/reviews/live", "/sessions/00000000-0000-0000-0000-000000000000/live"):
        assert client.post(address).status_code == 405


def test_a_person_holding_every_wait_slot_is_answered_at_once_and_asked_to_come_back_later(
    rita: Client, reviewer: Any, intent_review: Review, settings: Any
) -> None:
    assert settings.GOVERNOR_MAX_WAITS_PER_USER == 4
    address = live_url(rita.get("/reviews/").content.decode(), "inbox-list")
    with ExitStack() as stack:
        for _ in range(4):  # four other tabs wait already
            stack.enter_context(wait_slot(reviewer, 30))
        started = time.monotonic()
        response = rita.get(address, headers={"HX-Request": "true"})
    assert time.monotonic() - started < 1
    assert response.status_code == 200
    assert 'hx-trigger="load delay:5s,' in response.content.decode()  # the old timer's pace

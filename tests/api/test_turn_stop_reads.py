"""A turn-stop reads the session state once and the session's reviews once, under the session's
lock, and passes what it read down (issue 36 item 2): with nothing open, repairing, certifying,
and while a person reviews the delivery."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from governor.models import Project
from tests.api.test_contracts import readme_contract
from tests.conftest import AgentClient

pytestmark = pytest.mark.django_db


def turn_stop(agent: AgentClient, session: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The answer, and the tables each SELECT of the turn-stop read (FROM and JOIN)."""
    with CaptureQueriesContext(connection) as queries:
        response = agent.post(f"/sessions/{session['id']}/turn-stop")
    assert response.status_code == 200, response.content
    return response.json(), [table for query in queries.captured_queries
                             if query["sql"].lstrip().upper().startswith("SELECT")
                             for table in re.findall(r'(?:FROM|JOIN) "(\w+)"', query["sql"])]


def assert_read_once(tables: list[str]) -> None:
    assert tables.count("governor_sessionstate") == 1, tables
    assert tables.count("reviews_review") == 1, tables


def test_each_turn_stop_reads_the_session_state_and_the_reviews_once(
        agent: AgentClient, session: dict[str, Any], workspace: Path) -> None:
    answer, tables = turn_stop(agent, session)
    assert answer["action"] == "allow"  # nothing open yet
    assert_read_once(tables)
    begun = agent.post(f"/sessions/{session['id']}/contracts", readme_contract(max_attempts=3))
    assert begun.status_code == 201, begun.content
    answer, tables = turn_stop(agent, session)
    assert answer["action"] == "steer" and answer["attempt"]["passed"] is False
    assert_read_once(tables)
    (workspace / "README.md").write_text("# Demo\n\n## Install\n")
    answer, tables = turn_stop(agent, session)
    assert answer["terminal"]["status"] == "certified"
    assert_read_once(tables)
    answer, tables = turn_stop(agent, session)
    assert answer == {"action": "allow", "message": ""}  # ended: nothing open
    assert_read_once(tables)


def test_a_turn_stop_while_a_person_reviews_the_delivery_reads_each_once(
        project: Project, agent: AgentClient, session: dict[str, Any], workspace: Path) -> None:
    project.delivery_review = "required"
    project.save(update_fields=["delivery_review"])
    begun = agent.post(f"/sessions/{session['id']}/contracts", readme_contract())
    assert begun.status_code == 201, begun.content
    (workspace / "README.md").write_text("# Demo\n\n## Install\n")
    opened, _ = turn_stop(agent, session)  # (the reviewers' notification reads it as it is sent)
    assert "not certified yet" in opened["message"]
    answer, tables = turn_stop(agent, session)
    assert answer["action"] == "allow" and "not certified yet" in answer["message"]
    assert_read_once(tables)

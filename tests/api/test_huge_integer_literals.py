"""An integer literal too long for Python's `int()` (over 4,300 digits) is refused like any other
unsafe integer, on every route that reads JSON: a named 422, never a server error, nothing
written."""

from __future__ import annotations

from typing import Any

import pytest
import zstandard

from governor.models import Event, Session
from tests.conftest import AgentClient

HUGE = "9" * 5000  # past sys.get_int_max_str_digits() (4300)


@pytest.fixture
def agent_sees_500s(agent: AgentClient) -> AgentClient:
    """A server error answers 500 here, as it would in production, instead of raising."""
    agent.client.raise_request_exception = False
    return agent


def assert_refused(response: Any, path: str) -> None:
    assert response.status_code == 422, response.content[:300]
    error = response.json()["error"]
    assert error["code"] == "INVALID_JSON"
    assert error["details"] == [{"path": path, "message": "integer beyond ±(2^53−1)"}]


@pytest.mark.parametrize("literal", [HUGE, "-" + HUGE])
def test_a_session_create_with_a_huge_integer_is_invalid_json(
    agent_sees_500s: AgentClient, workspace: Any, literal: str
) -> None:
    text = ('{"workspace": {"kind": "path", "path": "' + str(workspace) + '"}, '
            '"header": {"n": ' + literal + "}}")
    assert_refused(agent_sees_500s.post("/sessions", raw=text), "/header/n")
    assert not Session.objects.exists()


def test_an_unparsable_session_create_is_invalid_json(agent_sees_500s: AgentClient) -> None:
    response = agent_sees_500s.post("/sessions", raw='{"workspace": {"kind": "path", "pa')
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "INVALID_JSON"
    assert "invalid JSON" in response.json()["error"]["message"]


def test_an_event_with_a_huge_integer_is_invalid_json(
    agent_sees_500s: AgentClient, session: dict
) -> None:
    text = ('{"events": [{"type": "x/n", "ignorable": true, "time": 0, "data": {"n": '
            + HUGE + "}}]}")
    response = agent_sees_500s.post(f"/sessions/{session['id']}/events", raw=text)
    assert_refused(response, "/events/0/data/n")
    assert not Event.objects.filter(session_id=session["id"]).exists()


@pytest.mark.parametrize("route", ["contracts", "code-contracts", "assess", "drafts", "abstain",
                                   "code-verifications"])
def test_a_contract_route_with_a_huge_integer_is_invalid_json(
    agent_sees_500s: AgentClient, session: dict, route: str
) -> None:
    response = agent_sees_500s.post(f"/sessions/{session['id']}/{route}",
                                    raw='{"max_attempts": ' + HUGE + "}")
    assert_refused(response, "/max_attempts")


IMPORT_LINE = ('{"seq": 0, "type": "x/n", "ignorable": true, "time": 0, "data": {"n": '
               + HUGE + "}}\n").encode()


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "zstd"])
def test_an_import_with_a_huge_integer_is_refused_at_its_line(
    agent_sees_500s: AgentClient, compressed: bool
) -> None:
    body = zstandard.ZstdCompressor().compress(IMPORT_LINE) if compressed else IMPORT_LINE
    response = agent_sees_500s.post(
        "/sessions/import", raw=body,
        content_type="application/zstd" if compressed else "application/x-ndjson")
    assert response.status_code == 422, response.content[:300]
    error = response.json()["error"]
    assert error["code"] == "INVARIANT"
    assert error["details"]["rule"] == "json" and error["details"]["index"] == 1
    assert "/data/n: integer beyond ±(2^53−1)" in error["message"]
    assert not Session.objects.exists()

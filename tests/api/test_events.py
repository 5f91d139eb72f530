"""Appending to a session log through the API: all-or-nothing, lossless, replay-safe."""

from __future__ import annotations

import json
from typing import Any

import pytest

from governor.domain.chain import GENESIS, event_hash
from governor.models import Event, SessionState
from tests.conftest import AgentClient
from tests.harness_builders import Trace


def one_turn() -> list[dict[str, Any]]:
    return Trace().start_turn().tool("bash", '{"cmd": "ls"}').say().end_turn().flush()


def stored(session: dict) -> list[Event]:
    return list(Event.objects.filter(session_id=session["id"]).order_by("seq"))


def test_append_assigns_contiguous_seqs_and_chains_hashes(
    agent: AgentClient, session: dict
) -> None:
    events = one_turn()
    response = agent.append(session["id"], events)
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["first_seq"], body["last_seq"]) == (0, len(events) - 1)
    rows = stored(session)
    assert [row.seq for row in rows] == list(range(len(events)))
    prev = GENESIS
    for row in rows:
        assert row.prev_hash == prev
        assert row.hash == event_hash(session=session["id"], seq=row.seq, type=row.type,
                                      time=row.time, origin=row.origin, data=row.data,
                                      prev=prev, meta=row.meta)
        prev = row.hash
    assert body["head"] == prev == SessionState.objects.get(session_id=session["id"]).head


def test_raw_json_text_of_each_agent_event_is_kept(agent: AgentClient, session: dict) -> None:
    events = one_turn()
    text = '{"events": [' + ",\n ".join(json.dumps(e, indent=1) for e in events) + "]}"
    assert agent.post(f"/sessions/{session['id']}/events", raw=text).status_code == 200
    rows = stored(session)
    assert rows[0].raw == json.dumps(events[0], indent=1)
    assert all(json.loads(row.raw) == event for row, event in zip(rows, events, strict=True))


def test_tool_events_are_indexed_for_evidence_queries(agent: AgentClient, session: dict) -> None:
    agent.append(session["id"], one_turn())
    call = Event.objects.get(session_id=session["id"], type="tool/call")
    result = Event.objects.get(session_id=session["id"], type="tool/result")
    assert (call.tool_name, call.governor_tool) == ("bash", False)
    assert (result.call_id, result.is_error) == (call.call_id, False)
    assert SessionState.objects.get(session_id=session["id"]).last_mutation_seq == call.seq


def test_read_events_pages_in_order(agent: AgentClient, session: dict) -> None:
    agent.append(session["id"], one_turn())
    page = agent.get(f"/sessions/{session['id']}/events", after=2, limit=3).json()
    assert [e["seq"] for e in page["events"]] == [3, 4, 5]
    assert page["next_after"] == 5


def test_replayed_batch_returns_first_answer_and_stores_nothing_twice(
    agent: AgentClient, session: dict
) -> None:
    events = one_turn()
    first = agent.append(session["id"], events, expected_seq=0)
    again = agent.append(session["id"], events, expected_seq=0)
    assert first.status_code == again.status_code == 200
    assert first.json() == again.json()
    assert len(stored(session)) == len(events)


def test_idempotency_key_makes_a_replay_safe_without_expected_seq(
    agent: AgentClient, session: dict
) -> None:
    events = one_turn()
    headers = {"Idempotency-Key": "batch-1"}
    first = agent.post(f"/sessions/{session['id']}/events", {"events": events}, headers=headers)
    again = agent.post(f"/sessions/{session['id']}/events", {"events": events}, headers=headers)
    assert first.json() == again.json()
    assert len(stored(session)) == len(events)


def test_expected_seq_conflict_is_409_and_stores_nothing(agent: AgentClient, session: dict) -> None:
    agent.append(session["id"], one_turn(), expected_seq=0)
    trace = Trace(next_seq=0)
    response = agent.append(session["id"], trace.start_turn().flush(), expected_seq=3)
    assert response.status_code == 409
    assert response.json()["error"]["details"]["next_seq"] == len(one_turn())


def test_a_different_batch_under_a_used_key_is_a_conflict(
    agent: AgentClient, session: dict
) -> None:
    agent.append(session["id"], one_turn(), expected_seq=0)
    response = agent.append(session["id"], Trace().start_turn().flush(), expected_seq=0)
    assert response.status_code == 409


# --- bad input: each a 4xx naming the field and reason, and nothing stored -----------------------


def assert_refused(response: Any, status: int, session: dict, *, mentions: str = "") -> dict:
    assert response.status_code == status, response.content
    error = response.json()["error"]
    if mentions:
        assert mentions in json.dumps(error), error
    assert stored(session) == []
    return error


def test_body_over_the_size_cap_is_413(
    agent: AgentClient, session: dict, settings: Any
) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048
    events = Trace().start_turn("x" * 4000).flush()
    assert_refused(agent.append(session["id"], events), 413, session)


def test_batch_over_1000_events_is_refused(agent: AgentClient, session: dict) -> None:
    events = [{"type": "turn/start", "time": 0, "data": {"turn": 1}}] * 1001
    error = assert_refused(agent.append(session["id"], events), 422, session, mentions="1001")
    assert error["details"][0]["path"] == "events"


def test_invalid_json_is_refused(agent: AgentClient, session: dict) -> None:
    response = agent.post(f"/sessions/{session['id']}/events", raw='{"events": [')
    assert_refused(response, 422, session, mentions="invalid JSON")


@pytest.mark.parametrize(
    ("literal", "reason"),
    [("NaN", "NaN"), ("Infinity", "Infinity"), ("-0", "negative zero"),
     ("9007199254740992", "2^53"), ('"\\ud800"', "lone surrogate")],
)
def test_non_lossless_json_values_are_refused(
    agent: AgentClient, session: dict, literal: str, reason: str
) -> None:
    text = ('{"events": [{"type": "turn/start", "time": 0, "data": {"turn": 1, "x": '
            + literal + "}}]}")
    response = agent.post(f"/sessions/{session['id']}/events", raw=text)
    assert_refused(response, 422, session, mentions=reason)


def invariant(response: Any, session: dict, rule: str) -> dict:
    error = assert_refused(response, 422, session)
    assert error["code"] == "INVARIANT"
    assert error["details"]["rule"] == rule, error
    return error


def test_unknown_envelope_key_is_refused(agent: AgentClient, session: dict) -> None:
    events = Trace().start_turn().flush()
    events[0]["colour"] = "red"
    error = invariant(agent.append(session["id"], events), session, "envelope")
    assert "colour" in error["message"]


def test_unknown_type_without_ignorable_is_refused(agent: AgentClient, session: dict) -> None:
    events = Trace().start_turn().flush() + [{"type": "x/custom", "time": 0, "data": {}}]
    error = invariant(agent.append(session["id"], events), session, "type-catalog")
    assert error["details"]["index"] == 2


def test_unknown_type_with_ignorable_is_stored(agent: AgentClient, session: dict) -> None:
    events = Trace().start_turn().flush() + [{"type": "x/custom", "time": 0, "data": {},
                                              "ignorable": True}]
    assert agent.append(session["id"], events).status_code == 200
    assert stored(session)[-1].meta == {"ignorable": True}


def test_agent_may_not_write_reliability_events(agent: AgentClient, session: dict) -> None:
    events = [{"type": "reliability/terminal", "time": 0,
               "data": {"contractId": "c", "status": "certified"}}]
    invariant(agent.append(session["id"], events), session, "type-catalog")


def test_source_seq_going_backwards_is_refused(agent: AgentClient, session: dict) -> None:
    events = Trace().start_turn().flush()
    events[0]["seq"], events[1]["seq"] = 10, 9
    invariant(agent.append(session["id"], events), session, "S1")


@pytest.mark.parametrize(
    ("rule", "events"),
    [
        ("S2", [{"type": "turn/start", "time": 0, "data": {"turn": 1}}] * 2),
        ("S3", [{"type": "turn/start", "time": 0, "data": {"turn": 2}}]),
        ("S4", [{"type": "turn/start", "time": 0, "data": {"turn": 1}},
                {"type": "turn/end", "time": 0, "data": {"turn": 2}}]),
        ("S5", [{"type": "turn/start", "time": 0, "data": {"turn": 1}},
                {"type": "step/start", "time": 0, "data": {"turn": 1, "step": 1}},
                {"type": "turn/end", "time": 0, "data": {"turn": 1}}]),
        ("S6", [{"type": "turn/start", "time": 0, "data": {"turn": 1}},
                {"type": "step/start", "time": 0, "data": {"turn": 2, "step": 1}}]),
        ("S7", [{"type": "turn/start", "time": 0, "data": {"turn": 1}},
                {"type": "step/start", "time": 0, "data": {"turn": 1, "step": 1}},
                {"type": "step/start", "time": 0, "data": {"turn": 1, "step": 2}}]),
        ("S8", [{"type": "turn/start", "time": 0, "data": {"turn": 1}},
                {"type": "step/start", "time": 0, "data": {"turn": 1, "step": 2}}]),
        ("S9", [{"type": "turn/start", "time": 0, "data": {"turn": 1}},
                {"type": "step/end", "time": 0, "data": {"turn": 1, "step": 1}}]),
        ("S12", [{"type": "todo/write", "time": 0, "data": {"todos": []}}]),
    ],
)
def test_turn_and_step_rules_are_enforced(
    agent: AgentClient, session: dict, rule: str, events: list[dict]
) -> None:
    invariant(agent.append(session["id"], events), session, rule)


def test_S10_tool_result_without_a_call_is_refused(agent: AgentClient, session: dict) -> None:
    events = Trace().start_turn().tool("bash").flush()
    without_call = [e for e in events if e["type"] != "tool/call"]
    for event in without_call:
        event.pop("sourceEventSeqs", None) if event["type"] == "tool/result" else None
    error = invariant(agent.append(session["id"], without_call), session, "S10")
    assert error["details"]["index"] == next(
        i for i, e in enumerate(without_call) if e["type"] == "tool/result")


def test_S11_replacing_tool_result_outside_a_turn_is_refused(
    agent: AgentClient, session: dict
) -> None:
    trace = Trace()
    events = trace.start_turn().tool("bash").end_turn().flush()
    assert agent.append(session["id"], events).status_code == 200
    result_seq = next(i for i, e in enumerate(events) if e["type"] == "tool/result")
    replacement = json.loads(json.dumps(events[result_seq]))
    replacement["surfaceOp"] = {"op": "replace", "start": result_seq, "end": result_seq}
    replacement["sourceEventSeqs"] = [result_seq]
    before = len(stored(session))
    response = agent.append(session["id"], [replacement])
    assert response.status_code == 422
    assert response.json()["error"]["details"]["rule"] == "S11"
    assert len(stored(session)) == before


def test_a_refused_batch_stores_nothing_even_when_its_first_events_were_valid(
    agent: AgentClient, session: dict
) -> None:
    events = one_turn() + [{"type": "turn/end", "time": 0, "data": {"turn": 1}}]
    invariant(agent.append(session["id"], events), session, "S4")
    assert SessionState.objects.get(session_id=session["id"]).next_seq == 0

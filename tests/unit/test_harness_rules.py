"""rules §2: Harness session-log rules — envelope, S1–S12, surface, message shape, type
catalog, batches, trace state, log parsing and governor tool names."""

from __future__ import annotations

import json
from typing import Any

import pytest

from governor.domain.harness import (
    HARNESS_TYPES,
    InvariantError,
    TraceState,
    check_log_complete,
    is_governor_tool,
    parse_log,
    parse_stream,
    tool_call_info,
    tool_result_info,
    validate_batch,
    validate_event,
    validate_log,
)

# --- a small valid session, built event by event ------------------------------------------------


def event(event_type: str, data: dict[str, Any], **envelope: Any) -> dict[str, Any]:
    return {"type": event_type, "time": 0, "data": data, **envelope}


def turn_start(turn: int = 1) -> dict[str, Any]:
    return event("turn/start", {"turn": turn})


def turn_end(turn: int = 1) -> dict[str, Any]:
    return event("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def step_start(turn: int = 1, step: int = 1) -> dict[str, Any]:
    return event("step/start", {"turn": turn, "step": step})


def step_end(turn: int = 1, step: int = 1) -> dict[str, Any]:
    return event("step/end", {"turn": turn, "step": step})


def chunk(turn: int = 1, step: int = 1) -> dict[str, Any]:
    delta = {"type": "text-delta", "index": 0, "text": "ok"}
    return event("assistant/chunk", {"turn": turn, "step": step, "chunk": delta})


def user_message(message_id: str = "u1", **envelope: Any) -> dict[str, Any]:
    envelope.setdefault("surfaceOp", "append")
    data = {
        "role": "user",
        "id": message_id,
        "content": [{"type": "text", "text": "do it"}],
        "source": {"kind": "user"},
    }
    return event("user/message", data, **envelope)


def assistant_message(turn: int = 1, step: int = 1, **envelope: Any) -> dict[str, Any]:
    envelope.setdefault("surfaceOp", "append")
    message = {
        "role": "assistant",
        "id": f"a{turn}.{step}",
        "content": [{"type": "text", "text": "ok"}],
        "source": {"kind": "model", "provider": "deepseek", "model": "deepseek-v4-flash"},
    }
    return event("assistant/message", {"turn": turn, "step": step, "message": message}, **envelope)


def tool_call(turn: int = 1, step: int = 1, call_id: str = "call-1") -> dict[str, Any]:
    data = {"turn": turn, "step": step, "callId": call_id, "name": "bash", "arguments": "{}"}
    return event("tool/call", data)


def tool_result(
    turn: int = 1,
    step: int = 1,
    call_id: str = "call-1",
    *,
    text: str = "done",
    is_error: bool = False,
    error: dict[str, Any] | None = None,
    **envelope: Any,
) -> dict[str, Any]:
    envelope.setdefault("surfaceOp", "append")
    block = {
        "type": "tool-result",
        "toolCallId": call_id,
        "content": [{"type": "text", "text": text}],
        "isError": is_error,
    }
    message = {
        "role": "user",
        "id": f"r-{call_id}",
        "content": [block],
        "source": {"kind": "tool", "callId": call_id},
    }
    data: dict[str, Any] = {"turn": turn, "step": step, "message": message}
    if error is not None:
        data["error"] = error
    return event("tool/result", data, **envelope)


def tool_turn(turn: int = 1) -> list[dict[str, Any]]:
    """One complete turn with a tool round trip; positions 0–8 when it opens the session."""
    return [
        turn_start(turn),  # 0
        user_message(f"u{turn}"),  # 1
        step_start(turn, 1),  # 2
        chunk(turn, 1),  # 3
        assistant_message(turn, 1, sourceEventSeqs=[3]),  # 4
        tool_call(turn, 1),  # 5
        tool_result(turn, 1, sourceEventSeqs=[5]),  # 6
        step_end(turn, 1),  # 7
        turn_end(turn),  # 8
    ]


def accept(events: list[dict[str, Any]], state: TraceState | None = None, **kw: Any) -> TraceState:
    return validate_batch(state or TraceState(), events, **kw)


def refusal(events: list[dict[str, Any]], state: TraceState | None = None, **kw: Any):
    with pytest.raises(InvariantError) as caught:
        validate_batch(state or TraceState(), events, **kw)
    return caught.value


def open_step(turn: int = 1, step: int = 1) -> list[dict[str, Any]]:
    return [turn_start(turn), step_start(turn, step)]


# --- the happy path and the error itself ---------------------------------------------------------


def test_a_complete_tool_turn_is_accepted() -> None:
    state = accept(tool_turn())
    assert state.count == 9
    assert (state.open_turn, state.turns, state.open_step) == (None, 1, None)
    assert [node if type(node) is int else node[0] for node in state.surface] == [1, 4, 6]


def test_invariant_error_names_rule_event_and_seq() -> None:
    error = InvariantError("S4", 12, 40, "turn/end.turn is 2 but the open turn is 1")
    assert str(error) == "S4 at event 12 (seq 40): turn/end.turn is 2 but the open turn is 1"
    assert (error.rule, error.index, error.seq) == ("S4", 12, 40)
    assert str(InvariantError("json", 3, None, "bad")) == "json at event 3: bad"


# --- envelope ------------------------------------------------------------------------------------


def test_envelope_refuses_unknown_keys() -> None:
    error = refusal([event("turn/start", {"turn": 1}, meta={"x": 1})])
    assert error.rule == "envelope"
    assert "meta" in error.message


def test_envelope_requires_data_as_an_object() -> None:
    assert refusal([{"type": "turn/start", "time": 0}]).message == "data is required"
    assert refusal([{"type": "turn/start", "data": [1]}]).message == "data must be an object"


@pytest.mark.parametrize("value", [False, "true", 1])
def test_envelope_ignorable_may_only_be_true(value: Any) -> None:
    assert refusal([event("turn/start", {"turn": 1}, ignorable=value)]).rule == "envelope"


@pytest.mark.parametrize("value", [1.5, "0", True])
def test_envelope_time_must_be_an_integer(value: Any) -> None:
    assert refusal([dict(turn_start(), time=value)]).rule == "envelope"


def test_envelope_time_is_informational_and_need_not_increase() -> None:
    events = tool_turn()
    events[3] = dict(events[3], time=-5)
    events.append(event("session/title", {"title": "t"}))  # no time at all
    accept(events)


@pytest.mark.parametrize("value", [-1, 1.0, "3", True])
def test_envelope_seq_must_be_a_non_negative_integer(value: Any) -> None:
    assert refusal([dict(turn_start(), seq=value)]).rule == "envelope"


# --- S1–S12 --------------------------------------------------------------------------------------


def test_S1_source_seq_must_strictly_increase() -> None:
    events = [dict(turn_start(), seq=10), dict(step_start(), seq=10)]
    error = refusal(events)
    assert (error.rule, error.index, error.seq) == ("S1", 1, 10)
    accept([dict(turn_start(), seq=10), step_start(), dict(chunk(), seq=11)])


def test_S2_turn_start_only_when_no_turn_is_open() -> None:
    error = refusal([turn_start(1), turn_start(2)])
    assert (error.rule, error.index) == ("S2", 1)


def test_S3_turns_are_numbered_one_two_three_across_the_session() -> None:
    assert refusal([turn_start(2)]).rule == "S3"
    assert refusal([turn_start(1), turn_end(1), turn_start(3)]).rule == "S3"
    accept(tool_turn(1) + tool_turn(2))


def test_S4_turn_end_must_name_the_open_turn() -> None:
    error = refusal([turn_start(1), turn_end(2)])
    assert (error.rule, error.index, error.seq) == ("S4", 1, 1)
    assert str(error) == "S4 at event 1 (seq 1): turn/end.turn is 2 but the open turn is 1"
    assert refusal([turn_end(1)]).rule == "S4"


def test_S5_no_step_may_be_open_at_turn_end() -> None:
    assert refusal([*open_step(), turn_end()]).rule == "S5"


def test_S6_step_start_must_name_the_open_turn() -> None:
    assert refusal([step_start(1, 1)]).rule == "S6"
    assert refusal([turn_start(1), step_start(2, 1)]).rule == "S6"


def test_S7_steps_do_not_nest() -> None:
    assert refusal([*open_step(), step_start(1, 2)]).rule == "S7"


def test_S8_steps_number_one_two_three_within_each_turn() -> None:
    assert refusal([turn_start(), step_start(1, 2)]).rule == "S8"
    assert refusal([*open_step(), step_end(), step_start(1, 3)]).rule == "S8"
    accept([*open_step(), step_end(), step_start(1, 2), step_end(1, 2), turn_end(), *open_step(2)])


@pytest.mark.parametrize(
    "make",
    [step_end, chunk, assistant_message, tool_call, tool_result],
    ids=["step/end", "assistant/chunk", "assistant/message", "tool/call", "tool/result"],
)
def test_S9_step_events_must_name_the_open_turn_and_step(make: Any) -> None:
    assert refusal([turn_start(), make(1, 1)]).rule == "S9"  # no step open
    assert refusal([*open_step(), make(1, 2)]).rule == "S9"
    assert refusal([*open_step(), make(2, 1)]).rule == "S9"


def test_S10_tool_result_needs_a_call_in_the_same_step() -> None:
    assert refusal([*open_step(), tool_result()]).rule == "S10"
    assert refusal([*open_step(), tool_call(call_id="other"), tool_result()]).rule == "S10"
    earlier_step = [*open_step(), tool_call(), step_end(), step_start(1, 2), tool_result(1, 2)]
    assert refusal(earlier_step).rule == "S10"
    accept([*open_step(), tool_call(), tool_result()])


def test_S10_synthetic_not_started_result_needs_no_call() -> None:
    not_started = {"name": "ToolNotStarted", "code": "TOOL_NOT_STARTED"}
    accept([*open_step(), tool_result(is_error=True, error=not_started)])
    # Both halves are needed: the error code and isError true.
    assert refusal([*open_step(), tool_result(error=not_started)]).rule == "S10"
    other = {"name": "Failed", "code": "TOOL_FAILED"}
    assert refusal([*open_step(), tool_result(is_error=True, error=other)]).rule == "S10"


def test_S11_replacing_tool_result_only_inside_an_open_turn() -> None:
    replacement = tool_result(
        text="[pruned]", surfaceOp={"op": "replace", "start": 6, "end": 6}, sourceEventSeqs=[6]
    )
    assert refusal([*tool_turn(), replacement]).rule == "S11"
    # Inside a later turn it may keep its original turn and step (S9 is for appended results).
    accept([*tool_turn(), turn_start(2), replacement])


@pytest.mark.parametrize("event_type", ["todo/write", "request/header", "request/context"])
def test_S12_todo_and_request_events_only_inside_an_open_turn(event_type: str) -> None:
    error = refusal([event(event_type, {})])
    assert (error.rule, error.index, error.seq) == ("S12", 0, 0)
    accept([turn_start(), event(event_type, {})])


# --- surface -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make", [user_message, assistant_message, tool_result], ids=["user", "assistant", "tool"]
)
def test_surface_messages_must_carry_surface_op(make: Any) -> None:
    message = make()
    del message["surfaceOp"]
    events = [*open_step(), tool_call(), message]
    assert refusal(events).rule == "surface"


def test_surface_op_is_append_or_a_replace_span() -> None:
    for op in ["replace", {"op": "replace", "start": 1}, {"op": "prune", "start": 1, "end": 1}]:
        assert refusal([user_message(surfaceOp=op)]).rule == "surface"


def test_surface_other_types_must_not_carry_surface_op_or_sources() -> None:
    assert refusal([event("turn/start", {"turn": 1}, surfaceOp="append")]).rule == "surface"
    assert refusal([event("session/title", {}, sourceEventSeqs=[0])]).rule == "surface"


def test_surface_sources_are_distinct_earlier_and_non_empty() -> None:
    base = [*open_step(), tool_call()]  # positions 0–2; the result is 3
    for sources in ([], [3], [4], [2, 2], [-1], ["2"]):
        assert refusal([*base, tool_result(sourceEventSeqs=sources)]).rule == "surface"
    accept([*base, tool_result(sourceEventSeqs=[2, 0])])


def test_surface_assistant_message_may_cite_no_sources() -> None:
    accept([*open_step(), assistant_message(sourceEventSeqs=[])])
    accept([*open_step(), assistant_message()])


def compaction(start: int, end: int, sources: list[int]) -> dict[str, Any]:
    return user_message(
        "summary", surfaceOp={"op": "replace", "start": start, "end": end}, sourceEventSeqs=sources
    )


def test_surface_replace_swaps_the_named_span_for_one_node() -> None:
    state = accept([*tool_turn(), turn_start(2), compaction(1, 4, [1, 4])])
    assert state.surface[0] == 10
    assert [node if type(node) is int else node[0] for node in state.surface] == [10, 6]


def test_surface_replace_names_existing_nodes_in_order() -> None:
    session = [*tool_turn(), turn_start(2)]  # surface nodes 1, 4, 6
    assert refusal([*session, compaction(2, 4, [2, 4])]).rule == "surface"  # 2 is no node
    assert refusal([*session, compaction(4, 1, [1, 4])]).rule == "surface"  # out of order
    # A shadowed node is no longer on the surface.
    replaced = [*session, compaction(1, 1, [1])]
    assert refusal([*replaced, compaction(1, 4, [1, 4])]).rule == "surface"


def test_surface_replace_cites_every_node_it_shadows() -> None:
    error = refusal([*tool_turn(), turn_start(2), compaction(1, 6, [1, 6])])
    assert error.rule == "surface"
    assert "missing [4]" in error.message


def test_surface_tool_result_replace_shadows_exactly_one_tool_result() -> None:
    session = [*tool_turn(), turn_start(2)]
    span = tool_result(text="x", surfaceOp={"op": "replace", "start": 4, "end": 6})
    assert refusal([*session, dict(span, sourceEventSeqs=[4, 6])]).rule == "surface"
    not_a_result = tool_result(text="x", surfaceOp={"op": "replace", "start": 4, "end": 4})
    assert refusal([*session, dict(not_a_result, sourceEventSeqs=[4])]).rule == "surface"


def test_surface_tool_result_replace_changes_only_the_result_content() -> None:
    session = [*tool_turn(), turn_start(2)]
    replace = {"surfaceOp": {"op": "replace", "start": 6, "end": 6}, "sourceEventSeqs": [6]}
    state = accept([*session, tool_result(text="[output pruned]", **replace)])
    assert state.surface[-1][0] == 10
    flipped = tool_result(text="[output pruned]", is_error=True, **replace)
    error = refusal([*session, flipped])
    assert (error.rule, "content[0].content" in error.message) == ("surface", True)


# --- message shape -------------------------------------------------------------------------------


def broken_tool_result(change: Any) -> dict[str, Any]:
    result = tool_result()
    change(result["data"]["message"])
    return result


@pytest.mark.parametrize(
    "change",
    [
        lambda m: m.update(role="tool"),
        lambda m: m["source"].update(kind="user"),
        lambda m: m["source"].pop("callId"),
        lambda m: m["content"].append(dict(m["content"][0])),
        lambda m: m["content"][0].update(type="text"),
        lambda m: m["content"][0].update(toolCallId="call-2"),
        lambda m: m["content"][0].pop("isError"),
        lambda m: m["content"][0].update(isError=0),
        lambda m: m.pop("id"),
    ],
    ids=[
        "role",
        "source-kind",
        "callId",
        "two-blocks",
        "block-type",
        "toolCallId",
        "isError-missing",
        "isError-int",
        "id",
    ],
)
def test_message_shape_of_tool_results(change: Any) -> None:
    error = refusal([*open_step(), tool_call(), broken_tool_result(change)])
    assert (error.rule, error.index) == ("message-shape", 3)


@pytest.mark.parametrize(
    "change",
    [
        lambda m: m["source"].update(kind="user"),
        lambda m: m["source"].pop("provider"),
        lambda m: m["source"].update(model=""),
        lambda m: m.update(role="user"),
    ],
    ids=["source-kind", "provider", "model", "role"],
)
def test_message_shape_of_assistant_messages(change: Any) -> None:
    message = assistant_message()
    change(message["data"]["message"])
    assert refusal([*open_step(), message]).rule == "message-shape"


def test_message_shape_refuses_pre_identity_messages() -> None:
    legacy_user = user_message()
    del legacy_user["data"]["id"], legacy_user["data"]["role"]
    error = refusal([turn_start(), legacy_user])
    assert (error.rule, error.index) == ("message-shape", 1)
    legacy_assistant = assistant_message()
    legacy_assistant["data"] = {"turn": 1, "step": 1, "content": [], "provenance": {}}
    assert refusal([*open_step(), legacy_assistant]).rule == "message-shape"


def test_message_shape_refuses_the_legacy_turn_trigger() -> None:
    trigger = {"kind": "message", "source": {"kind": "user"}}
    error = refusal([event("turn/start", {"turn": 1, "trigger": trigger})])
    assert (error.rule, "trigger" in error.message) == ("message-shape", True)


# --- type catalog --------------------------------------------------------------------------------


def test_the_catalog_holds_the_48_harness_0_1_1_types() -> None:
    assert len(HARNESS_TYPES) == 48
    assert {"turn/start", "tool/result", "plan/mode", "web/deepseek-search-llm-request"} <= (
        HARNESS_TYPES
    )
    assert not HARNESS_TYPES & {"session", "text-chunks", "system/message", "model/selection"}


def test_unknown_type_is_accepted_only_when_ignorable() -> None:
    error = refusal([event("vendor/thing", {})])
    assert (error.rule, error.index) == ("type-catalog", 0)
    state = accept([event("vendor/thing", {}, ignorable=True)])
    assert state.count == 1


def test_an_ignorable_unknown_event_is_never_interpreted() -> None:
    # It looks like a turn marker and carries a surfaceOp, but changes nothing but the count.
    odd = event("vendor/turn", {"turn": 7}, ignorable=True, surfaceOp="append")
    state = accept([odd, turn_start(1)])
    assert (state.turns, state.surface, state.count) == (1, [], 2)


def test_operator_registered_types_are_accepted() -> None:
    assert refusal([event("acme/audit", {})]).rule == "type-catalog"
    accept([event("acme/audit", {})], extra_types=frozenset({"acme/audit"}))


def test_agents_may_not_write_reliability_events() -> None:
    contract = event("reliability/contract", {"id": "c1"})
    error = refusal([contract])
    assert (error.rule, error.index) == ("type-catalog", 0)
    assert refusal([dict(contract, ignorable=True)]).rule == "type-catalog"


def test_import_may_carry_reliability_events() -> None:
    accept([event("reliability/contract", {"id": "c1"})], allow_reliability=True)


# --- batches and trace state ---------------------------------------------------------------------


def test_batch_is_all_or_nothing() -> None:
    before = accept([turn_start()])
    snapshot = before.to_json()
    error = refusal([step_start(), chunk(), step_start(1, 2)], before)
    assert (error.rule, error.index, error.seq) == ("S7", 2, 3)
    assert before.to_json() == snapshot


def test_batches_continue_from_the_previous_state() -> None:
    events = tool_turn() + tool_turn(2)
    state = TraceState()
    for start in range(0, len(events), 4):
        state = accept(events[start : start + 4], state)
    assert state == accept(events)


def test_validate_event_advances_the_state_in_place() -> None:
    state = TraceState()
    validate_event(state, turn_start(), index=0)
    assert (state.count, state.open_turn) == (1, 1)


def test_trace_state_round_trips_through_json() -> None:
    session = [*tool_turn(), turn_start(2), compaction(1, 4, [1, 4]), step_start(2, 1)]
    session.append(tool_call(2, 1, "call-9"))
    state = accept(session)
    stored = json.loads(json.dumps(state.to_json()))
    restored = TraceState.from_json(stored)
    assert restored == state
    # The restored state judges the next events exactly as the live one does.
    following = [tool_result(2, 1, "call-9", sourceEventSeqs=[12]), step_end(2, 1), turn_end(2)]
    assert accept(following, restored) == accept(following, state)
    assert refusal([turn_end(2)], restored).rule == "S5"


def test_trace_state_stores_surface_nodes_compactly() -> None:
    stored = accept(tool_turn()).to_json()
    assert stored["surface"][:2] == [1, 4]
    seq, fingerprint = stored["surface"][2]
    assert seq == 6 and isinstance(fingerprint, str) and len(fingerprint) <= 32


# --- whole logs ----------------------------------------------------------------------------------


def jsonl(rows: list[Any]) -> str:
    return "\n".join(json.dumps(row) for row in rows) + "\n"


HEADER = {"type": "session", "version": 0, "id": "s-1", "createdAt": 1, "cwd": "/w"}


def test_parse_log_splits_header_and_events() -> None:
    header, events = parse_log(jsonl([HEADER, *tool_turn()]))
    assert header == HEADER
    assert events == tool_turn()
    assert parse_log(jsonl(tool_turn())) == (None, tool_turn())


def test_parse_log_expands_packed_chunk_rows() -> None:
    rows = [
        {
            "type": "reasoning-chunks",
            "seq0": 3,
            "time0": 100,
            "data": {"turn": 1, "step": 1, "index": 0, "dt": [5, 7], "texts": ["a", "b", "c"]},
        },
        {
            "type": "tool-call-chunks",
            "data": {
                "turn": 1,
                "step": 1,
                "index": 1,
                "id": "c",
                "name": "read",
                "dt": [0],
                "args": ["{", "}"],
            },
        },
    ]
    _, events = parse_log(jsonl(rows))
    assert [e.get("seq") for e in events] == [3, 4, 5, None, None]
    assert [e.get("time") for e in events] == [100, 105, 112, None, None]
    assert events[1]["data"] == {
        "turn": 1,
        "step": 1,
        "chunk": {"type": "reasoning-delta", "index": 0, "text": "b"},
    }
    assert events[4]["data"]["chunk"] == {
        "type": "tool-call-delta",
        "index": 1,
        "id": "c",
        "name": "read",
        "argumentsDelta": "}",
    }


def test_parse_log_refuses_malformed_packed_rows() -> None:
    row = {"type": "text-chunks", "data": {"turn": 1, "step": 1, "index": 0, "dt": [], "texts": []}}
    with pytest.raises(InvariantError) as caught:
        parse_log(jsonl([HEADER, row]))
    assert (caught.value.rule, caught.value.index) == ("packed", 2)


def test_parse_log_names_the_unparsable_line() -> None:
    text = jsonl([HEADER, turn_start()]) + '{"type": "turn/end", "data": {"turn": 1, "turn": 2}}\n'
    with pytest.raises(InvariantError) as caught:
        parse_log(text)
    assert (caught.value.rule, caught.value.index) == ("json", 3)
    with pytest.raises(InvariantError) as caught:
        parse_log('{"type": "turn/start", "data": {"turn": NaN}}')
    assert caught.value.rule == "json"


def test_parse_log_keeps_line_separator_characters_inside_strings() -> None:
    message = user_message()
    message["data"]["content"][0]["text"] = "one\u2028two\x85three\u2029"
    _, events = parse_log(json.dumps(message, ensure_ascii=False) + "\r\n")
    assert events == [message]


def test_validate_log_needs_a_whole_session() -> None:
    validate_log(HEADER, tool_turn())
    assert pytest.raises(InvariantError, validate_log, HEADER, []).value.rule == "complete"
    open_at_end = tool_turn()[:-1]
    error = pytest.raises(InvariantError, validate_log, HEADER, open_at_end).value
    assert (error.rule, error.index) == ("complete", 8)
    with pytest.raises(InvariantError) as caught:
        check_log_complete(TraceState(), 0)
    assert caught.value.rule == "complete"


def test_validate_log_reads_only_format_0() -> None:
    for header in (dict(HEADER, version=1), {k: v for k, v in HEADER.items() if k != "version"}):
        assert pytest.raises(InvariantError, validate_log, header, tool_turn()).value.rule == (
            "header"
        )
    validate_log(None, tool_turn())


def test_parse_stream_reads_stream_json_and_json_rpc_events() -> None:
    first, second = turn_start(), user_message()
    text = jsonl(
        [
            {"type": "session_event", "sessionId": "s", "event": first},
            {"method": "session.status", "params": {"sessionId": "s", "status": "running"}},
            {"method": "session.event", "params": {"sessionId": "s", "event": second}},
            {"type": "result", "sessionId": "s", "output": "OK"},
        ]
    )
    assert parse_stream(text) == [first, second]


# --- tool indexing and governor tools ------------------------------------------------------------


def test_tool_call_info_reads_call_id_name_and_arguments() -> None:
    assert tool_call_info(tool_call(call_id="c7")) == ("c7", "bash", "{}")
    assert tool_call_info(turn_start()) is None


def test_tool_result_info_reads_call_id_and_error() -> None:
    assert tool_result_info(tool_result(call_id="c7")) == ("c7", False)
    assert tool_result_info(tool_result(is_error=True)) == ("call-1", True)
    error = {"name": "ToolNotStarted", "code": "TOOL_NOT_STARTED"}
    assert tool_result_info(tool_result(error=error)) == ("call-1", True)
    assert tool_result_info(tool_call()) is None


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("reliability_verify", True),
        ("mcp__governor__reliability_verify", True),
        ("governor.reliability_status", True),
        ("mcp__gov.reliability_begin_code", True),
        ("reliability_code_profiles", True),
        ("reliability_verify_all", False),
        ("my_reliability_verify", False),
        ("reliability_verify__shadow", False),
        ("reliability_verify.x", False),
        ("bash", False),
    ],
)
def test_is_governor_tool_reads_the_last_name_segment(name: str, expected: bool) -> None:
    assert is_governor_tool(name) is expected

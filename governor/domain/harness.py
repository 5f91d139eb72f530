"""rules §2: DeepSeek Harness session-log ingestion (format version 0).

Plain functions over plain data. `validate_event` checks one envelope against the session's
`TraceState` and advances it; `validate_batch` is the all-or-nothing form the append path uses;
`parse_log` / `validate_log` are the import path; `parse_stream` reads live wire captures.

Event references (`seq`, `sourceEventSeqs`, replace `start`/`end`) live in one seq space: an
event's agent-supplied `seq` when it sends one, otherwise its position in the session (the seq the
server assigns, contiguous from 0). Recorded logs carry both identically.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from governor.domain.canonical import JSONValueError, check_json_value, loads_strict

# The 48 event types of DeepSeek Harness 0.1.1 (session format version 0). The accepted fixture
# logs use 39 of them; the rest are the release's remaining vocabulary (approval, compaction,
# team, schedule, feedback, web-search and model-preset events). `session` (the header) and the
# packed chunk rows are storage records, not events, so they are not listed.
HARNESS_TYPES = frozenset(
    {
        "agent-preset/selected",
        "agent/inbox/spliced",
        "approval/asked",
        "approval/decided",
        "approval/policy",
        "assistant/chunk",
        "assistant/message",
        "command/done",
        "command/run",
        "compaction/end",
        "compaction/prune",
        "compaction/start",
        "compaction/summary",
        "feedback/record",
        "goal/change",
        "hook/invoked",
        "hook/result",
        "llm/retry",
        "llm/retry-started",
        "permission/preset",
        "plan/mode",
        "request/context",
        "request/header",
        "sandbox/mode",
        "schedule/change",
        "session/end-seed",
        "session/title",
        "session/title-llm-request",
        "step/end",
        "step/start",
        "subagent/descriptor",
        "team/member",
        "team/message/delivered",
        "team/message/queued",
        "team/task",
        "todo/write",
        "tool-workflow/agent-end",
        "tool-workflow/agent-start",
        "tool-workflow/run-end",
        "tool-workflow/run-start",
        "tool/call",
        "tool/code-dispatch",
        "tool/code-dispatch-start",
        "tool/result",
        "turn/end",
        "turn/start",
        "user/message",
        "web/deepseek-search-llm-request",
    }
)

RELIABILITY_PREFIX = "reliability/"
SURFACE_TYPES = frozenset({"user/message", "assistant/message", "tool/result"})
PACKED_ROW_TYPES = frozenset({"text-chunks", "reasoning-chunks", "tool-call-chunks"})
GOVERNOR_TOOL_NAMES = frozenset(
    {
        "reliability_assess",
        "reliability_draft",
        "reliability_begin",
        "reliability_begin_code",
        "reliability_verify",
        "reliability_status",
        "reliability_abstain",
        "reliability_code_profiles",
        "reliability_code_verify",
    }
)

_ENVELOPE_KEYS = frozenset(
    {"type", "seq", "time", "data", "ignorable", "surfaceOp", "sourceEventSeqs"}
)
_REPLACE_KEYS = frozenset({"op", "start", "end"})
_OPEN_TURN_ONLY = frozenset({"todo/write", "request/header", "request/context"})
_TOOL_NOT_STARTED = "TOOL_NOT_STARTED"
_STATE_VERSION = 1


class InvariantError(Exception):
    """A refused event: which rule, which event of the batch or log, and why."""

    def __init__(self, rule: str, index: int, seq: int | None, message: str) -> None:
        self.rule = rule
        self.index = index
        self.seq = seq
        self.message = message
        where = f"event {index}" if seq is None else f"event {index} (seq {seq})"
        super().__init__(f"{rule} at {where}: {message}")


# A surface node is its seq (user and assistant messages) or (seq, fingerprint) for a tool
# result, where the fingerprint covers everything a replacing result may not change.
SurfaceNode = int | tuple[int, str]


class TraceStateJSON(TypedDict):
    """A `TraceState` as the session's state row keeps it."""

    v: int
    count: int
    lastSourceSeq: int | None
    openTurn: int | None
    turns: int
    openStep: int | None
    steps: int
    stepCallIds: list[str]
    surface: list[int | list[object]]  # a tool result's node: [seq, fingerprint]


@dataclass
class TraceState:
    """What the relational rules need to judge the next event of a session, and nothing more."""

    count: int = 0  # events accepted so far = the position (server seq) of the next one
    last_source_seq: int | None = None
    open_turn: int | None = None
    turns: int = 0  # the last turn number started
    open_step: int | None = None
    steps: int = 0  # the last step number started within the current turn
    step_call_ids: list[str] = field(default_factory=list)  # tool/call ids of the open step
    surface: list[SurfaceNode] = field(default_factory=list)

    def copy(self) -> TraceState:
        # Surface nodes are immutable (int or tuple), so shallow list copies are deep enough.
        return TraceState(
            count=self.count,
            last_source_seq=self.last_source_seq,
            open_turn=self.open_turn,
            turns=self.turns,
            open_step=self.open_step,
            steps=self.steps,
            step_call_ids=list(self.step_call_ids),
            surface=list(self.surface),
        )

    def to_json(self) -> TraceStateJSON:
        return {
            "v": _STATE_VERSION,
            "count": self.count,
            "lastSourceSeq": self.last_source_seq,
            "openTurn": self.open_turn,
            "turns": self.turns,
            "openStep": self.open_step,
            "steps": self.steps,
            "stepCallIds": list(self.step_call_ids),
            "surface": [node if isinstance(node, int) else list(node) for node in self.surface],
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> TraceState:
        if value.get("v") != _STATE_VERSION:
            raise ValueError(f"trace state version {value.get('v')!r} is not {_STATE_VERSION}")
        surface: list[SurfaceNode] = [
            node if type(node) is int else (node[0], node[1]) for node in value["surface"]
        ]
        return cls(
            count=value["count"],
            last_source_seq=value["lastSourceSeq"],
            open_turn=value["openTurn"],
            turns=value["turns"],
            open_step=value["openStep"],
            steps=value["steps"],
            step_call_ids=list(value["stepCallIds"]),
            surface=surface,
        )


def is_governor_tool(name: str) -> bool:
    """rules §2, last paragraph: the last segment after `__` or `.` (or the whole name)."""
    return name.rsplit("__", 1)[-1].rsplit(".", 1)[-1] in GOVERNOR_TOOL_NAMES


def is_workspace_mutation(event_type: str, tool_name: object) -> bool:
    """Rule 4.10's boundary events: a tool call or code dispatch that is not the governor's."""
    return event_type in ("tool/call", "tool/code-dispatch-start") and not (
        isinstance(tool_name, str) and is_governor_tool(tool_name)
    )


def tool_call_info(envelope: Mapping[str, object]) -> tuple[str, str, str] | None:
    """(call id, tool name, arguments text) of a `tool/call` event, else None."""
    if envelope.get("type") != "tool/call":
        return None
    data = envelope.get("data")
    if type(data) is not dict:
        return None
    call_id, name, arguments = data.get("callId"), data.get("name"), data.get("arguments", "")
    if type(call_id) is not str or type(name) is not str or type(arguments) is not str:
        return None
    return call_id, name, arguments


def tool_result_info(envelope: Mapping[str, object]) -> tuple[str, bool] | None:
    """(call id, is_error) of a `tool/result` event, else None. An error is `content[0].isError`
    true or a `data.error` present."""
    if envelope.get("type") != "tool/result":
        return None
    data = envelope.get("data")
    if type(data) is not dict:
        return None
    message = data.get("message")
    if type(message) is not dict:
        return None
    source = message.get("source")
    call_id = source.get("callId") if type(source) is dict else None
    content = message.get("content")
    block = content[0] if type(content) is list and content else None
    if type(call_id) is not str:
        call_id = block.get("toolCallId") if type(block) is dict else None
        if type(call_id) is not str:
            return None
    flagged = type(block) is dict and block.get("isError") is True
    return call_id, flagged or data.get("error") is not None


# --- validation -------------------------------------------------------------------------------


def validate_batch(
    state: TraceState,
    envelopes: Sequence[object],
    *,
    allow_reliability: bool = False,
    extra_types: frozenset[str] = frozenset(),
) -> TraceState:
    """All-or-nothing: the state after every envelope, or the first InvariantError (and the
    caller's state untouched)."""
    new_state = state.copy()
    for index, envelope in enumerate(envelopes):
        validate_event(
            new_state,
            envelope,
            index=index,
            allow_reliability=allow_reliability,
            extra_types=extra_types,
        )
    return new_state


def validate_event(
    state: TraceState,
    envelope: object,
    *,
    index: int,
    allow_reliability: bool = False,
    extra_types: frozenset[str] = frozenset(),
) -> None:
    """Check one envelope (already parsed by `loads_strict`) and advance `state` in place.
    On refusal `state` may be partly advanced; `validate_batch` guards against that."""
    position = state.count
    if type(envelope) is not dict:
        raise InvariantError("envelope", index, None, "an event must be a JSON object")

    source_seq = envelope.get("seq")
    if source_seq is not None and (type(source_seq) is not int or source_seq < 0):
        raise InvariantError("envelope", index, None, "seq must be a non-negative integer")
    seq = position if source_seq is None else source_seq

    if not _ENVELOPE_KEYS.issuperset(envelope):
        unknown = sorted(set(envelope) - _ENVELOPE_KEYS)
        raise InvariantError("envelope", index, seq, f"unknown envelope key(s) {unknown}")
    event_type = envelope.get("type")
    if type(event_type) is not str or not event_type:
        raise InvariantError("envelope", index, seq, "type must be a non-empty string")
    time = envelope.get("time")
    if time is not None and type(time) is not int:
        raise InvariantError("envelope", index, seq, "time must be an integer (ms)")
    data = envelope.get("data")
    if type(data) is not dict:
        reason = "is required" if "data" not in envelope else "must be an object"
        raise InvariantError("envelope", index, seq, f"data {reason}")
    ignorable = envelope.get("ignorable")
    if ignorable is not None and ignorable is not True:
        raise InvariantError("envelope", index, seq, "ignorable may only be true")

    # Fail-closed type catalog.
    interpreted = True
    if event_type.startswith(RELIABILITY_PREFIX):
        if not allow_reliability:
            raise InvariantError(
                "type-catalog",
                index,
                seq,
                f"type {event_type}: agents may not write reliability/* events",
            )
    elif event_type not in HARNESS_TYPES and event_type not in extra_types:
        if ignorable is not True:
            raise InvariantError(
                "type-catalog",
                index,
                seq,
                f"type {event_type} is not a Harness 0.1.1 or registered type and is not ignorable",
            )
        interpreted = False

    # S1.
    if source_seq is not None:
        last = state.last_source_seq
        if last is not None and source_seq <= last:
            raise InvariantError(
                "S1", index, seq, f"seq {source_seq} does not increase on the previous seq {last}"
            )
        state.last_source_seq = source_seq

    if interpreted:
        if event_type in SURFACE_TYPES:
            _check_surface_event(state, envelope, event_type, data, index, seq)
        elif "surfaceOp" in envelope or "sourceEventSeqs" in envelope:
            key = "surfaceOp" if "surfaceOp" in envelope else "sourceEventSeqs"
            raise InvariantError(
                "surface", index, seq, f"{key} is only allowed on user, assistant and tool messages"
            )
        else:
            check = _RELATIONAL_CHECKS.get(event_type)
            if check is not None:
                check(state, data, index, seq)
    state.count = position + 1


# A relational rule: checks an event's data against the state and advances it.
RelationalCheck = Callable[["TraceState", Mapping[str, object], int, int], None]


# --- turn and step rules (S2–S9, S12) ---------------------------------------------------------


def _positive(value: object, label: str, rule: str, index: int, seq: int) -> int:
    if type(value) is not int or value < 1:
        raise InvariantError(rule, index, seq, f"{label} must be a positive integer")
    return value


def _turn_start(state: TraceState, data: Mapping[str, object], index: int, seq: int) -> None:
    turn = _positive(data.get("turn"), "turn/start.turn", "S3", index, seq)
    if len(data) != 1:
        # Pre-identity builds attributed a turn to its message with `trigger: {kind: "message",
        # source}`; format 0 identifies messages by id and turn/start carries only the number.
        extra = sorted(key for key in data if key != "turn")
        raise InvariantError(
            "message-shape",
            index,
            seq,
            f"turn/start.data may hold only turn; {extra} is the legacy pre-identity shape",
        )
    if state.open_turn is not None:
        raise InvariantError(
            "S2", index, seq, f"turn/start while turn {state.open_turn} is still open"
        )
    if turn != state.turns + 1:
        raise InvariantError(
            "S3", index, seq, f"turn/start.turn is {turn} but the next turn is {state.turns + 1}"
        )
    state.open_turn = turn
    state.turns = turn
    state.steps = 0


def _turn_end(state: TraceState, data: Mapping[str, object], index: int, seq: int) -> None:
    turn = _positive(data.get("turn"), "turn/end.turn", "S4", index, seq)
    if turn != state.open_turn:
        open_turn = _open(state.open_turn)
        raise InvariantError(
            "S4", index, seq, f"turn/end.turn is {turn} but the open turn is {open_turn}"
        )
    if state.open_step is not None:
        raise InvariantError(
            "S5", index, seq, f"turn/end while step {state.open_step} is still open"
        )
    state.open_turn = None


def _step_start(state: TraceState, data: Mapping[str, object], index: int, seq: int) -> None:
    turn = _positive(data.get("turn"), "step/start.turn", "S6", index, seq)
    step = _positive(data.get("step"), "step/start.step", "S8", index, seq)
    if turn != state.open_turn:
        raise InvariantError(
            "S6",
            index,
            seq,
            f"step/start.turn is {turn} but the open turn is {_open(state.open_turn)}",
        )
    if state.open_step is not None:
        raise InvariantError(
            "S7", index, seq, f"step/start while step {state.open_step} is still open"
        )
    if step != state.steps + 1:
        raise InvariantError(
            "S8", index, seq, f"step/start.step is {step} but the next step is {state.steps + 1}"
        )
    state.open_step = step
    state.steps = step
    state.step_call_ids = []


def _names_open_step(
    state: TraceState, data: Mapping[str, object], event_type: str, index: int, seq: int
) -> None:
    """S9: the event names the currently open turn and step."""
    turn, step = data.get("turn"), data.get("step")
    if state.open_step is None:
        raise InvariantError("S9", index, seq, f"{event_type} outside an open step")
    if type(turn) is not int or turn != state.open_turn:
        expected = f"the open turn is {state.open_turn}"
        raise InvariantError("S9", index, seq, f"{event_type}.turn is {turn!r} but {expected}")
    if type(step) is not int or step != state.open_step:
        expected = f"the open step is {state.open_step}"
        raise InvariantError("S9", index, seq, f"{event_type}.step is {step!r} but {expected}")


def _step_end(state: TraceState, data: Mapping[str, object], index: int, seq: int) -> None:
    _names_open_step(state, data, "step/end", index, seq)
    state.open_step = None
    state.step_call_ids = []


def _assistant_chunk(state: TraceState, data: Mapping[str, object], index: int, seq: int) -> None:
    _names_open_step(state, data, "assistant/chunk", index, seq)


def _tool_call(state: TraceState, data: Mapping[str, object], index: int, seq: int) -> None:
    _names_open_step(state, data, "tool/call", index, seq)
    call_id, name = data.get("callId"), data.get("name")
    if type(call_id) is not str or not call_id:
        raise InvariantError("S10", index, seq, "tool/call.callId must be a non-empty string")
    if type(name) is not str or not name:
        raise InvariantError("S10", index, seq, "tool/call.name must be a non-empty string")
    arguments = data.get("arguments")
    if arguments is not None and type(arguments) is not str:
        raise InvariantError("S10", index, seq, "tool/call.arguments must be a string")
    state.step_call_ids.append(call_id)


def _open_turn_only(event_type: str) -> RelationalCheck:
    def check(state: TraceState, data: Mapping[str, object], index: int, seq: int) -> None:
        if state.open_turn is None:
            raise InvariantError("S12", index, seq, f"{event_type} outside an open turn")

    return check


def _open(turn: int | None) -> str:
    return "none" if turn is None else str(turn)


_RELATIONAL_CHECKS: dict[str, RelationalCheck] = {
    "turn/start": _turn_start,
    "turn/end": _turn_end,
    "step/start": _step_start,
    "step/end": _step_end,
    "assistant/chunk": _assistant_chunk,
    "tool/call": _tool_call,
    **{event_type: _open_turn_only(event_type) for event_type in _OPEN_TURN_ONLY},
}


# --- messages and the surface -----------------------------------------------------------------


def _check_surface_event(
    state: TraceState,
    envelope: dict[str, Any],
    event_type: str,
    data: dict[str, Any],
    index: int,
    seq: int,
) -> None:
    if "surfaceOp" not in envelope:
        raise InvariantError("surface", index, seq, f"{event_type} must carry surfaceOp")
    op = envelope["surfaceOp"]
    replace: tuple[int, int] | None = None
    if op != "append":
        if (
            type(op) is not dict
            or op.keys() != _REPLACE_KEYS
            or op["op"] != "replace"
            or type(op["start"]) is not int
            or type(op["end"]) is not int
        ):
            raise InvariantError(
                "surface",
                index,
                seq,
                'surfaceOp must be "append" or {"op":"replace","start":<seq>,"end":<seq>}',
            )
        replace = (op["start"], op["end"])

    sources = envelope.get("sourceEventSeqs")
    if sources is not None:
        _check_sources(sources, event_type, index, seq)

    fingerprint: str | None = None
    if event_type == "user/message":
        _check_message(data, "user/message", "user", index, seq)
        source = data["source"]
        if type(source) is not dict or type(source.get("kind")) is not str or not source["kind"]:
            raise InvariantError(
                "message-shape", index, seq, "user/message.source.kind must be a non-empty string"
            )
    elif event_type == "assistant/message":
        _names_open_step(state, data, event_type, index, seq)
        _check_assistant_message(data.get("message"), index, seq)
    else:
        call_id = _check_tool_result(data.get("message"), index, seq)
        fingerprint = _tool_result_fingerprint(data)
        if replace is None:
            _names_open_step(state, data, event_type, index, seq)
            if call_id not in state.step_call_ids and not _not_started(data):
                raise InvariantError(
                    "S10",
                    index,
                    seq,
                    f"tool/result for call {call_id} has no tool/call with that id in step "
                    f"{state.open_step}",
                )
        elif state.open_turn is None:
            raise InvariantError("S11", index, seq, "replacing tool/result outside an open turn")

    node: SurfaceNode = seq if fingerprint is None else (seq, fingerprint)
    if replace is None:
        state.surface.append(node)
    else:
        _replace(state, replace, sources, fingerprint, node, index, seq)


def _check_sources(sources: object, event_type: str, index: int, seq: int) -> None:
    if type(sources) is not list:
        raise InvariantError("surface", index, seq, "sourceEventSeqs must be an array")
    if not sources and event_type != "assistant/message":
        raise InvariantError("surface", index, seq, "sourceEventSeqs must not be empty")
    for source in sources:
        if type(source) is not int or source < 0:
            raise InvariantError(
                "surface", index, seq, "sourceEventSeqs must hold non-negative integers"
            )
        if source >= seq:
            raise InvariantError(
                "surface", index, seq, f"sourceEventSeqs names {source}, not an earlier event"
            )
    if len(set(sources)) != len(sources):
        raise InvariantError("surface", index, seq, "sourceEventSeqs repeats a seq")


def _replace(
    state: TraceState,
    span: tuple[int, int],
    sources: list[int] | None,
    fingerprint: str | None,
    node: SurfaceNode,
    index: int,
    seq: int,
) -> None:
    start, end = span
    seqs = [item if isinstance(item, int) else item[0] for item in state.surface]
    try:
        first = seqs.index(start)
        last = seqs.index(end)
    except ValueError:
        missing = start if start not in seqs else end
        raise InvariantError(
            "surface", index, seq, f"surfaceOp replace names {missing}, not a current surface node"
        ) from None
    if first > last:
        raise InvariantError(
            "surface", index, seq, f"surfaceOp replace start {start} comes after end {end}"
        )
    cited = set(sources or ())
    uncited = [shadowed for shadowed in seqs[first : last + 1] if shadowed not in cited]
    if uncited:
        raise InvariantError(
            "surface",
            index,
            seq,
            f"sourceEventSeqs must cite every shadowed node; missing {uncited}",
        )
    if fingerprint is not None:
        shadowed = state.surface[first]
        if first != last or isinstance(shadowed, int):
            raise InvariantError(
                "surface", index, seq, "a tool/result replace must shadow exactly one tool result"
            )
        if shadowed[1] != fingerprint:
            raise InvariantError(
                "surface",
                index,
                seq,
                f"a tool/result replace may change only content[0].content of the result at "
                f"seq {shadowed[0]}",
            )
    state.surface[first : last + 1] = [node]


def _check_message(message: object, label: str, role: str, index: int, seq: int
                   ) -> dict[str, Any]:
    """Every current-shape message has an identity: id, role, content array and source."""
    if type(message) is not dict:
        raise InvariantError("message-shape", index, seq, f"{label} must be an object")
    message_id = message.get("id")
    if type(message_id) is not str or not message_id:
        raise InvariantError(
            "message-shape",
            index,
            seq,
            f"{label}.id must be a non-empty string (messages without one are the legacy "
            "pre-identity shape)",
        )
    if message.get("role") != role:
        raise InvariantError("message-shape", index, seq, f"{label}.role must be {role!r}")
    if type(message.get("content")) is not list:
        raise InvariantError("message-shape", index, seq, f"{label}.content must be an array")
    if type(message.get("source")) is not dict:
        raise InvariantError("message-shape", index, seq, f"{label}.source must be an object")
    return message


def _check_assistant_message(message: object, index: int, seq: int) -> None:
    source = _check_message(message, "assistant/message.message", "assistant", index, seq)["source"]
    if source.get("kind") != "model":
        raise InvariantError(
            "message-shape", index, seq, "assistant/message.message.source.kind must be 'model'"
        )
    for key in ("provider", "model"):
        value = source.get(key)
        if type(value) is not str or not value:
            raise InvariantError(
                "message-shape",
                index,
                seq,
                f"assistant/message.message.source.{key} must be a non-empty string",
            )


def _check_tool_result(message: Any, index: int, seq: int) -> str:
    label = "tool/result.message"
    source = _check_message(message, label, "user", index, seq)["source"]
    call_id = source.get("callId")
    if source.get("kind") != "tool" or type(call_id) is not str or not call_id:
        raise InvariantError(
            "message-shape", index, seq, f"{label}.source must be kind 'tool' with a callId"
        )
    content = message["content"]
    block = content[0] if len(content) == 1 else None
    if type(block) is not dict or block.get("type") != "tool-result":
        raise InvariantError(
            "message-shape", index, seq, f"{label}.content must be exactly one tool-result block"
        )
    if block.get("toolCallId") != call_id:
        raise InvariantError(
            "message-shape",
            index,
            seq,
            f"{label}.content[0].toolCallId {block.get('toolCallId')!r} is not source.callId "
            f"{call_id!r}",
        )
    if type(block.get("isError")) is not bool:
        raise InvariantError(
            "message-shape", index, seq, f"{label}.content[0].isError must be a boolean"
        )
    return call_id


def _not_started(data: dict[str, Any]) -> bool:
    """S10's exception: a synthetic result for a call that never started."""
    error = data.get("error")
    return (
        data["message"]["content"][0]["isError"] is True
        and type(error) is dict
        and error.get("code") == _TOOL_NOT_STARTED
    )


def _tool_result_fingerprint(data: dict[str, Any]) -> str:
    """Digest of a tool/result's data without `message.content[0].content`: the part a
    replacing result must keep."""
    message = dict(data["message"])
    block = dict(message["content"][0])
    del block["content"]
    message["content"] = [block]
    kept = dict(data)
    kept["message"] = message
    text = json.dumps(kept, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()


# --- whole logs --------------------------------------------------------------------------------


def check_log_complete(state: TraceState, index: int) -> None:
    """Import takes whole sessions: at least one turn, and none left open at the end."""
    if state.turns == 0:
        raise InvariantError(
            "complete", index, None, "the log has no turn/start: a replay script, not a session"
        )
    if state.open_turn is not None:
        raise InvariantError(
            "complete", index, None, f"the log ends with turn {state.open_turn} still open"
        )


def check_header(header: Mapping[str, object] | None) -> None:
    """The header line, when present, declares a format-0 session."""
    if header is None:
        return
    version = header.get("version")
    if type(version) is not int or version != 0:
        raise InvariantError(
            "header", 0, None, f"session header version is {version!r}; only format 0 is read"
        )
    session_id = header.get("id")
    if type(session_id) is not str or not session_id:
        raise InvariantError("header", 0, None, "session header id must be a non-empty string")


def validate_log(
    header: Mapping[str, object] | None,
    events: Sequence[object],
    *,
    extra_types: frozenset[str] = frozenset(),
) -> TraceState:
    """The import path: every event (reliability/* allowed), the header, then completeness.
    Events go first so that a log broken at a known event is refused by that event's rule."""
    state = validate_batch(TraceState(), events, allow_reliability=True, extra_types=extra_types)
    check_header(header)
    check_log_complete(state, len(events))
    return state


def _lines(text: str) -> list[tuple[int, str]]:
    """Non-blank lines with their 1-based numbers. Only `\n` ends a line: JSON strings may hold
    U+2028 and friends unescaped, which `str.splitlines` would cut."""
    return [(number, line) for number, line in enumerate(text.split("\n"), start=1) if line.strip()]


def _parse_line(line: str, number: int) -> Any:
    try:
        return loads_strict(line)
    except JSONValueError as exc:
        raise InvariantError("json", number, None, f"line {number}: {exc}") from None


class LogTooLong(Exception):
    """A log holding more events than `parse_log` was asked to take: refused at `line`, the
    first line past `cap`, before that line's events are made."""

    def __init__(self, line: int, cap: int) -> None:
        super().__init__(f"line {line}: the log holds more than {cap} events")
        self.line = line
        self.cap = cap


def _packed_count(row: Mapping[str, Any]) -> int:
    """The events a packed chunk row expands to (0 when malformed: `_expand_packed` says why)."""
    data = row.get("data")
    pieces = data.get("args" if row["type"] == "tool-call-chunks" else "texts") \
        if type(data) is dict else None
    return len(pieces) if type(pieces) is list else 0


def parse_log(text: str, *, max_events: int | None = None
              ) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Split a JSONL log into its header (or None) and its events, expanding packed chunk rows
    into one `assistant/chunk` each. Errors carry the 1-based line number as their index. With
    `max_events`, LogTooLong at the first line that would pass it: no line after it is parsed
    and no packed row past it expanded."""
    header: dict[str, Any] | None = None
    events: list[dict[str, Any]] = []
    first = True
    lines = _lines(text)
    # Every line but a header holds an event at least (or is refused): counted before parsing.
    if max_events is not None and len(lines) > max_events + 1:
        raise LogTooLong(lines[max_events + 1][0], max_events)
    for number, line in lines:
        row = _parse_line(line, number)
        if first and type(row) is dict and row.get("type") == "session":
            header = row
        elif type(row) is dict and row.get("type") in PACKED_ROW_TYPES:
            if max_events is not None and len(events) + _packed_count(row) > max_events:
                raise LogTooLong(number, max_events)
            expanded = _expand_packed(row, number)
            for event in expanded:  # computed seqs and times must be lossless JSON too
                try:
                    check_json_value(event)
                except JSONValueError as exc:
                    raise InvariantError("packed", number, None,
                                         f"line {number}: expanded chunk {exc}") from None
            events.extend(expanded)
        else:
            if max_events is not None and len(events) >= max_events:
                raise LogTooLong(number, max_events)
            events.append(row)
        first = False
    return header, events


def _expand_packed(row: dict[str, Any], number: int) -> list[dict[str, Any]]:
    kind = row["type"]
    tool = kind == "tool-call-chunks"
    payload_key = "args" if tool else "texts"
    data = row.get("data")

    def refuse(reason: str) -> InvariantError:
        return InvariantError("packed", number, None, f"line {number}: {kind} row {reason}")

    if not set(row) <= {"type", "seq0", "time0", "data"} or type(data) is not dict:
        raise refuse("must be {type, seq0?, time0?, data}")
    allowed = {"turn", "step", "index", "dt", payload_key} | ({"id", "name"} if tool else set())
    if not set(data) <= allowed or not {"turn", "step", "index", "dt", payload_key} <= set(data):
        raise refuse(f"data must have exactly {sorted(allowed)}")
    if tool and (type(data.get("id")) is not str or type(data.get("name", "")) is not str):
        raise refuse("id and name must be strings")
    pieces, gaps = data[payload_key], data["dt"]
    if (
        type(pieces) is not list
        or not pieces
        or any(type(piece) is not str for piece in pieces)
        or type(gaps) is not list
        or any(type(gap) is not int for gap in gaps)
        or len(gaps) + 1 != len(pieces)
    ):
        raise refuse(f"needs a non-empty {payload_key} string array and one dt per gap")
    seq0, time0 = row.get("seq0"), row.get("time0")
    if any(value is not None and type(value) is not int for value in (seq0, time0)):
        raise refuse("seq0 and time0 must be integers")

    turn, step, block_index = data["turn"], data["step"], data["index"]
    events = []
    time = time0
    for offset, piece in enumerate(pieces):
        if tool:
            chunk: dict[str, Any] = {
                "type": "tool-call-delta",
                "index": block_index,
                "id": data["id"],
            }
            if "name" in data:
                chunk["name"] = data["name"]
            chunk["argumentsDelta"] = piece
        else:
            delta = "text-delta" if kind == "text-chunks" else "reasoning-delta"
            chunk = {"type": delta, "index": block_index, "text": piece}
        event: dict[str, Any] = {"type": "assistant/chunk"}
        if seq0 is not None:
            event["seq"] = seq0 + offset
        if time is not None:
            if offset:
                time += gaps[offset - 1]
            event["time"] = time
        event["data"] = {"turn": turn, "step": step, "chunk": chunk}
        events.append(event)
    return events


def parse_stream(text: str) -> list[dict[str, Any]]:
    """Session events of a live capture: stream-json `session_event` lines and JSON-RPC
    `session.event` notifications, in order. Other lines (results, status) are ignored."""
    events: list[Any] = []
    for number, line in _lines(text):
        row = _parse_line(line, number)
        if type(row) is not dict:
            continue
        if row.get("type") == "session_event":
            events.append(row.get("event"))
        elif row.get("method") == "session.event" and type(row.get("params")) is dict:
            events.append(row["params"].get("event"))
    return events

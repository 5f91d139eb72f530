"""Harness-shaped events (format version 0) for what an agent does: the same turn/step/tool
vocabulary the governor validates strictly (rules §2).

An agent's actions are kept as small *records* (a prompt, a tool round trip, a message, the end
of a turn); `build_events` turns records into envelopes against the session's trace book (which
turn and step are open) and the seq the first of them will get. References between events
(`sourceEventSeqs`) are server seqs, so a batch is always built for a known `expected_seq` and
rebuilt when the log moved on in between (the governor appends events of its own).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal, NotRequired, TypedDict

MAX_ARGUMENTS_CHARS = 256 * 1024
MAX_OUTPUT_CHARS = 64 * 1024
PLUGIN_SOURCE = {"kind": "plugin", "plugin": "reliability-governor"}
NO_PROMPT_TEXT = "(turn opened by governor-agent: the agent acted without a recorded prompt)"


class ModelInfo(TypedDict):
    provider: str
    model: str


class PromptRecord(TypedDict):
    kind: Literal["prompt"]
    text: str
    source: dict[str, Any]  # {"kind": "user"} or the governor's plugin source


class ToolRecord(TypedDict):
    kind: Literal["tool"]
    call_id: str
    name: str
    arguments: str
    output: str
    is_error: bool
    error: NotRequired[dict[str, Any]]
    model: ModelInfo


class SayRecord(TypedDict):
    kind: Literal["say"]
    text: str
    model: ModelInfo


class EndRecord(TypedDict):
    kind: Literal["end"]
    reason: dict[str, Any]


class HookRecord(TypedDict):
    """What one of the agent's hooks decided on its own, e.g. a stop allowed unverified."""

    kind: Literal["hook"]
    point: str  # the hook event: Stop, …
    dialect: str  # claude-code | codex
    decision: Literal["pass", "block"]
    summary: str


Record = PromptRecord | ToolRecord | SayRecord | EndRecord | HookRecord


@dataclass
class TraceBook:
    """Where the session's Harness trace stands: the last turn and step numbers, and whether
    they are open."""

    turns: int = 0
    turn_open: bool = False
    steps: int = 0
    step_open: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> TraceBook:
        return cls(turns=int(value["turns"]), turn_open=bool(value["turn_open"]),
                   steps=int(value["steps"]), step_open=bool(value["step_open"]))

    @classmethod
    def from_log(cls, events: Iterable[Mapping[str, Any]]) -> TraceBook:
        """The book of a session log as the server holds it (agent events only count)."""
        book = cls()
        for event in events:
            if event.get("origin") == "governor":
                continue
            kind, data = event.get("type"), event.get("data") or {}
            if kind == "turn/start":
                book = cls(turns=data["turn"], turn_open=True)
            elif kind == "turn/end":
                book.turn_open = book.step_open = False
            elif kind == "step/start":
                book.steps, book.step_open = data["step"], True
            elif kind == "step/end":
                book.step_open = False
        return book


def prompt(text: str, *, source: Mapping[str, Any] | None = None) -> PromptRecord:
    return {"kind": "prompt", "text": text, "source": dict(source or {"kind": "user"})}


def tool(
    name: str,
    arguments: Any,
    output: Any,
    *,
    model: ModelInfo,
    is_error: bool = False,
    error: Mapping[str, Any] | None = None,
    call_id: str | None = None,
) -> ToolRecord:
    """One tool round trip. `arguments` and `output` may be text or any JSON value."""
    record: ToolRecord = {
        "kind": "tool", "call_id": call_id or f"call-{uuid.uuid4().hex[:16]}", "name": name,
        "arguments": _capped(_text(arguments), MAX_ARGUMENTS_CHARS),
        "output": _capped(_text(output), MAX_OUTPUT_CHARS),
        "is_error": is_error or error is not None, "model": model,
    }
    if error is not None:
        record["error"] = dict(error)
    return record


def say(text: str, *, model: ModelInfo) -> SayRecord:
    return {"kind": "say", "text": _capped(text, MAX_OUTPUT_CHARS), "model": model}


def end(reason: str = "completed") -> EndRecord:
    return {"kind": "end", "reason": {"kind": reason}}


def hook(point: str, dialect: str, decision: Literal["pass", "block"],
         summary: str) -> HookRecord:
    return {"kind": "hook", "point": point, "dialect": dialect, "decision": decision,
            "summary": _capped(summary, MAX_OUTPUT_CHARS)}


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _capped(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[… {len(text) - limit} characters cut by governor-agent]"


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:20]}"


class _Builder:
    def __init__(self, book: TraceBook, base_seq: int) -> None:
        self.book = TraceBook(**book.to_json())
        self.seq = base_seq
        self.events: list[dict[str, Any]] = []

    def add(self, kind: str, data: dict[str, Any], **envelope: Any) -> int:
        seq = self.seq
        self.events.append({"type": kind, "time": int(time.time() * 1000), "data": data,
                            **envelope})
        self.seq += 1
        return seq

    def close_step(self) -> None:
        if self.book.step_open:
            self.add("step/end", {"turn": self.book.turns, "step": self.book.steps})
            self.book.step_open = False

    def close_turn(self, reason: Mapping[str, Any]) -> None:
        self.close_step()
        if self.book.turn_open:
            self.add("turn/end", {"turn": self.book.turns, "reason": dict(reason)})
            self.book.turn_open = False

    def open_turn(self, text: str, source: Mapping[str, Any]) -> None:
        self.close_turn({"kind": "interrupted"})
        self.book.turns += 1
        self.book.turn_open, self.book.steps = True, 0
        self.add("turn/start", {"turn": self.book.turns})
        self.add("user/message", {"role": "user", "id": _id("u"),
                                  "content": [{"type": "text", "text": text}],
                                  "source": dict(source)}, surfaceOp="append")

    def open_step(self) -> tuple[int, int]:
        if not self.book.turn_open:
            self.open_turn(NO_PROMPT_TEXT, PLUGIN_SOURCE)
        self.close_step()
        self.book.steps += 1
        self.book.step_open = True
        turn, step = self.book.turns, self.book.steps
        self.add("step/start", {"turn": turn, "step": step})
        return turn, step

    def assistant(self, turn: int, step: int, content: list[dict[str, Any]],
                  model: ModelInfo) -> None:
        message = {"role": "assistant", "id": _id("a"), "content": content,
                   "source": {"kind": "model", "provider": model["provider"],
                              "model": model["model"]}}
        self.add("assistant/message", {"turn": turn, "step": step, "message": message},
                 surfaceOp="append", sourceEventSeqs=[])

    def tool(self, record: ToolRecord) -> None:
        turn, step = self.open_step()
        call_id, name, arguments = record["call_id"], record["name"], record["arguments"]
        self.assistant(turn, step, [{"type": "tool-call", "id": call_id, "name": name,
                                     "arguments": arguments}], record["model"])
        call_seq = self.add("tool/call", {"turn": turn, "step": step, "callId": call_id,
                                          "name": name, "arguments": arguments})
        block = {"type": "tool-result", "toolCallId": call_id,
                 "content": [{"type": "text", "text": record["output"]}],
                 "isError": record["is_error"]}
        result: dict[str, Any] = {
            "turn": turn, "step": step,
            "message": {"role": "user", "id": _id("r"), "content": [block],
                        "source": {"kind": "tool", "callId": call_id}}}
        if "error" in record:
            result["error"] = record["error"]
        self.add("tool/result", result, surfaceOp="append", sourceEventSeqs=[call_seq])
        self.close_step()

    def say(self, record: SayRecord) -> None:
        turn, step = self.open_step()
        self.assistant(turn, step, [{"type": "text", "text": record["text"]}], record["model"])
        self.close_step()

    def hook(self, record: HookRecord) -> None:
        """Harness's own record of a hook run: `hook/invoked`, then `hook/result`."""
        turn, point = self.book.turns, record["point"]
        handler = f"{record['dialect']}:{point}:governor-agent"
        self.add("hook/invoked", {"turn": turn, "point": point, "dialect": record["dialect"],
                                  "handlerId": handler})
        self.add("hook/result", {"turn": turn, "point": point, "handlerId": handler,
                                 "decision": record["decision"], "exitCode": 0,
                                 "stderrSummary": record["summary"]})


def build_events(records: Iterable[Record], book: TraceBook,
                 base_seq: int) -> tuple[list[dict[str, Any]], TraceBook]:
    """The envelopes for `records`, the first to be appended at `base_seq`, and the book after
    them. A tool or message outside a turn opens one (the agent continued without a prompt we
    saw); a new prompt while a turn is open ends that turn as interrupted."""
    builder = _Builder(book, base_seq)
    for record in records:
        if record["kind"] == "prompt":
            builder.open_turn(record["text"], record["source"])
        elif record["kind"] == "tool":
            builder.tool(record)
        elif record["kind"] == "say":
            builder.say(record)
        elif record["kind"] == "hook":
            builder.hook(record)
        else:
            builder.close_turn(record["reason"])
    return builder.events, builder.book

"""Valid Harness-shaped events as an agent would send them, for API-level tests."""

from __future__ import annotations

import itertools
from typing import Any

_ids = itertools.count(1)


class Trace:
    """Builds turns, steps and tool round trips; tracks server seqs so citations are right.

    Call `sync(next_seq)` when the governor has appended events of its own in between."""

    def __init__(self, next_seq: int = 0) -> None:
        self.next_seq = next_seq
        self.turn = 0
        self.step = 0
        self.pending: list[dict[str, Any]] = []

    def sync(self, next_seq: int) -> None:
        assert not self.pending
        self.next_seq = next_seq

    def _add(self, event_type: str, data: dict[str, Any], **envelope: Any) -> int:
        seq = self.next_seq + len(self.pending)
        self.pending.append({"type": event_type, "time": 0, "data": data, **envelope})
        return seq

    def flush(self) -> list[dict[str, Any]]:
        events, self.pending = self.pending, []
        self.next_seq += len(events)
        return events

    def start_turn(self, text: str = "please do the task") -> Trace:
        self.turn += 1
        self.step = 0
        self._add("turn/start", {"turn": self.turn})
        self._add("user/message", {"role": "user", "id": f"u{next(_ids)}",
                                   "content": [{"type": "text", "text": text}],
                                   "source": {"kind": "user"}}, surfaceOp="append")
        return self

    def tool(self, name: str, arguments: str = "{}", *, ok: bool = True,
             text: str = "done", error: dict[str, Any] | None = None) -> Trace:
        """One step in which the model calls `name` and gets its result."""
        self.step += 1
        turn, step, call_id = self.turn, self.step, f"call-{next(_ids)}"
        self._add("step/start", {"turn": turn, "step": step})
        message = {"role": "assistant", "id": f"a{next(_ids)}",
                   "content": [{"type": "tool-call", "id": call_id, "name": name,
                                "arguments": arguments}],
                   "source": {"kind": "model", "provider": "test", "model": "scripted"}}
        self._add("assistant/message", {"turn": turn, "step": step, "message": message},
                  surfaceOp="append", sourceEventSeqs=[])
        call_seq = self._add("tool/call", {"turn": turn, "step": step, "callId": call_id,
                                           "name": name, "arguments": arguments})
        block = {"type": "tool-result", "toolCallId": call_id,
                 "content": [{"type": "text", "text": text}], "isError": not ok}
        result: dict[str, Any] = {"turn": turn, "step": step,
                                  "message": {"role": "user", "id": f"r{next(_ids)}",
                                              "content": [block],
                                              "source": {"kind": "tool", "callId": call_id}}}
        if error is not None:
            result["error"] = error
        self._add("tool/result", result, surfaceOp="append", sourceEventSeqs=[call_seq])
        self._add("step/end", {"turn": turn, "step": step})
        return self

    def say(self, text: str = "done") -> Trace:
        self.step += 1
        turn, step = self.turn, self.step
        self._add("step/start", {"turn": turn, "step": step})
        message = {"role": "assistant", "id": f"a{next(_ids)}",
                   "content": [{"type": "text", "text": text}],
                   "source": {"kind": "model", "provider": "test", "model": "scripted"}}
        self._add("assistant/message", {"turn": turn, "step": step, "message": message},
                  surfaceOp="append", sourceEventSeqs=[])
        self._add("step/end", {"turn": turn, "step": step})
        return self

    def end_turn(self) -> Trace:
        self._add("turn/end", {"turn": self.turn, "reason": {"kind": "completed"}})
        return self

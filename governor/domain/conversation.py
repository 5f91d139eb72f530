"""A session log as a reviewer reads it: the person's requests, the assistant's messages, tool
calls with their arguments and results, verifier runs and the governor's verdicts, in log order.

Pure: it reads stored events (`seq`, `type`, `data`) and returns plain entries whose texts are
capped at `TEXT_CHARS` (the rest is counted, never shown). Nothing here is marked safe: the
templates escape every text, as they escape everything else an agent wrote."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from governor.domain import lifecycle

TEXT_CHARS = 4000
USER_MESSAGE = "user/message"
ASSISTANT_MESSAGE = "assistant/message"
TOOL_CALL = "tool/call"
TOOL_RESULT = "tool/result"
TYPES = (USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT, lifecycle.CONTRACT,
         lifecycle.ATTEMPT, lifecycle.TERMINAL, lifecycle.CODE_VERIFICATION,
         lifecycle.INTENT_REVIEW, lifecycle.CONTRACT_REVIEW, lifecycle.DELIVERY_REVIEW)


class Capped(TypedDict):
    text: str
    omitted: int  # characters left out


class GovernorLine(TypedDict):
    kind: str
    title: str
    detail: str
    ok: bool | None


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def capped(text: str, limit: int = TEXT_CHARS) -> Capped:
    """`text` cut to `limit` characters, with how many were left out."""
    return {"text": text[:limit], "omitted": max(0, len(text) - limit)}


def _parts_text(parts: object, kinds: tuple[str, ...] = ("text",)) -> str:
    """The text of content parts of the given kinds; any other part is named, not shown."""
    if isinstance(parts, str):
        return parts
    pieces = []
    for part in parts if isinstance(parts, list) else []:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind in kinds and isinstance(part.get("text"), str):
            pieces.append(part["text"])
        elif kind not in ("text", "reasoning", "tool-call"):
            pieces.append(f"[{kind or 'unknown'} part]")
    return "\n\n".join(pieces)


def user_request(data: Mapping[str, object]) -> str | None:
    """The text of a message the person typed (source kind `user`); None for messages a plugin
    or the harness put in the user's place (reminders, context)."""
    if _mapping(data.get("source")).get("kind") != "user":
        return None
    return _parts_text(data.get("content"))


def _arguments(raw: object) -> str:
    """Tool arguments as indented JSON when they parse, else exactly as sent."""
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            return raw
        return json.dumps(parsed, indent=2, ensure_ascii=False)
    return json.dumps(raw, indent=2, ensure_ascii=False)


def _tool_result(data: Mapping[str, object]) -> tuple[str, str, bool]:
    """(call id, result text, is error) of a tool/result event."""
    blocks = _mapping(data.get("message")).get("content")
    block = _mapping(blocks[0] if isinstance(blocks, list) and blocks else None)
    return (str(block.get("toolCallId", "")), _parts_text(block.get("content")),
            block.get("isError") is True)


def _governor(kind: str, data: Mapping[str, object]) -> GovernorLine:
    """A one-line account of a governor event."""
    if kind == lifecycle.CONTRACT:
        version = data.get("version")
        return {"kind": "contract", "title": "Contract activated",
                "detail": f"{data.get('contractId', '')} (format v{version})",
                "ok": None}
    if kind == lifecycle.ATTEMPT:
        results = data.get("results")
        judged = [_mapping(result) for result in results] if isinstance(results, list) else []
        passed = sum(1 for result in judged if result.get("passed") is True)
        title = f"Attempt {data.get('attempt')} ({data.get('trigger')})"
        return {"kind": "attempt", "title": title,
                "detail": f"{passed} of {len(judged)} checks passed",
                "ok": data.get("passed") is True}
    if kind == lifecycle.TERMINAL:
        status = str(data.get("status", ""))
        return {"kind": "terminal", "title": f"Verdict: {status}",
                "detail": str(data.get("reason", "")), "ok": status == "certified"}
    if kind == lifecycle.CODE_VERIFICATION:
        passed = data.get("passed") is True
        why = "" if passed else f" ({data.get('failureKind') or 'failed'})"
        return {"kind": "verification", "title": f"Verifier run: {data.get('profile')}",
                "detail": ("passed" if passed else "failed") + why, "ok": passed}
    if kind == lifecycle.REFERENCE:
        tree = _mapping(data.get("tree"))
        source = str(data.get("source", ""))
        return {"kind": "reference", "title": "Reference tree",
                "detail": f"{tree.get('id') or 'none'} ({source})", "ok": None}
    stage = {lifecycle.INTENT_REVIEW: "Intent",
             lifecycle.DELIVERY_REVIEW: "Delivery"}.get(str(kind), "Evidence plan")
    decision = str(data.get("decision", ""))
    return {"kind": "review", "title": f"{stage} review: {decision}",
            "detail": "", "ok": decision == "approved"}


def entries(events: Iterable[Mapping[str, Any]]) -> list[dict[str, object]]:
    """The conversation of `events` (each `{seq, type, time, data}`, in seq order): one entry
    per message, tool call (its result attached when it follows in these events) or governor
    event. Tool results whose call is not among them stand alone."""
    out: list[dict[str, object]] = []
    calls: dict[str, dict[str, Any]] = {}
    for event in events:
        kind, data = event["type"], _mapping(event["data"])
        base = {"seq": event["seq"], "time": event.get("time")}
        if kind == USER_MESSAGE:
            text = user_request(data)
            source = _mapping(data.get("source"))
            out.append({**base, "kind": "user" if text is not None else "context",
                        "source": source.get("plugin") or source.get("kind") or "unknown",
                        "body": capped(text if text is not None
                                       else _parts_text(data.get("content")))})
        elif kind == ASSISTANT_MESSAGE:
            content = _mapping(data.get("message")).get("content")
            text, reasoning = _parts_text(content), _parts_text(content, ("reasoning",))
            if text or reasoning:
                out.append({**base, "kind": "assistant", "body": capped(text),
                            "reasoning": capped(reasoning) if reasoning else None})
        elif kind == TOOL_CALL:
            call = {**base, "kind": "tool", "name": str(data.get("name", "")),
                    "call_id": str(data.get("callId", "")),
                    "arguments": capped(_arguments(data.get("arguments"))), "result": None}
            calls[call["call_id"]] = call
            out.append(call)
        elif kind == TOOL_RESULT:
            call_id, text, is_error = _tool_result(data)
            result = {"seq": event["seq"], "body": capped(text), "is_error": is_error}
            if call_id in calls and calls[call_id]["result"] is None:
                calls[call_id]["result"] = result
            else:
                out.append({**base, "kind": "tool", "name": "", "call_id": call_id,
                            "arguments": None, "result": result})
        elif kind in lifecycle.GOVERNOR_EVENT_TYPES:
            out.append({**base, **_governor(kind, data)})
    return out

"""Reading a drafting provider's answer (rules §9): its server-sent events, decoded as they
arrive, and each provider's stream read into the answer text, finish reason and usage. The
drafting service (`governor/services/drafts.py`) feeds it the response; what the answer must be
is decided in `governor/domain/drafting.py`."""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass, field
from typing import Any

from governor.domain.drafting import (
    IDENTIFIER_RE,
    OPENAI,
    STREAM,
    UPSTREAM,
    DraftError,
    provider_error_type,
)

# --- server-sent events -------------------------------------------------------------------------


@dataclass(frozen=True)
class SSEEvent:
    event: str
    data: str


class SSEDecoder:
    """Incremental decoder of a `text/event-stream` (WHATWG HTML §9.2): UTF-8 (strict) split
    anywhere, CRLF/LF/CR line ends, comments, multi-line data. An event without its closing
    blank line when the stream ends is not dispatched."""

    def __init__(self) -> None:
        self._utf8 = codecs.getincrementaldecoder("utf-8")("strict")
        self._buffer = ""
        self._started = False
        self._event = ""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        try:
            text = self._utf8.decode(chunk)
        except UnicodeDecodeError:
            raise DraftError(STREAM, "sse-malformed",
                             "the provider's event stream is not valid UTF-8") from None
        return self._lines(text, final=False)

    def close(self) -> list[SSEEvent]:
        try:
            text = self._utf8.decode(b"", final=True)
        except UnicodeDecodeError:
            raise DraftError(STREAM, "sse-malformed",
                             "the provider's event stream ends inside a UTF-8 character") from None
        return self._lines(text, final=True)

    def _lines(self, text: str, *, final: bool) -> list[SSEEvent]:
        if not self._started and text:
            self._started = True
            text = text.removeprefix("\ufeff")
        self._buffer += text
        events: list[SSEEvent] = []
        start = 0
        buffer = self._buffer
        while True:
            match = _LINE_END.search(buffer, start)
            if match is None:
                break
            if match.group() == "\r" and match.end() == len(buffer) and not final:
                break  # a CR at the end may be the first half of a CRLF
            event = self._line(buffer[start:match.start()])
            if event is not None:
                events.append(event)
            start = match.end()
        self._buffer = buffer[start:]
        if final:
            self._buffer = ""  # an unterminated last line and event are dropped
        return events

    def _line(self, line: str) -> SSEEvent | None:
        if line == "":
            if not self._data:
                self._event = ""
                return None
            event = SSEEvent(event=self._event or "message", data="\n".join(self._data))
            self._event, self._data = "", []
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        return None  # "id", "retry" and unknown fields change nothing here


_LINE_END = re.compile(r"\r\n|\r|\n")


# --- provider stream readers --------------------------------------------------------------------


@dataclass
class StreamResult:
    text: str
    finish: str
    usage: dict[str, int] = field(default_factory=dict)


def _json(event: SSEEvent) -> dict[str, Any]:
    try:
        value = json.loads(event.data)
    except ValueError:
        raise DraftError(STREAM, "sse-malformed",
                         "the provider sent an event whose data is not JSON") from None
    if not isinstance(value, dict):
        raise DraftError(STREAM, "sse-malformed",
                         "the provider sent an event whose data is not a JSON object")
    return value


def _count(value: Any) -> int | None:
    return value if type(value) is int and 0 <= value <= 2**53 - 1 else None


def _provider_error(payload: dict[str, Any]) -> DraftError:
    kind = provider_error_type(payload, "")
    suffix = f" ({kind})" if kind else ""
    return DraftError(UPSTREAM, "provider-error",
                      f"the provider reported an error inside the stream{suffix}; no retry is made")


class OpenAIStream:
    """Chat-completions chunks: `choices[0].delta.content` text, one `finish_reason`, an
    optional usage chunk, then `data: [DONE]`. Reasoning deltas (`reasoning_content`,
    `reasoning`) are read past and never kept."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._finish: str | None = None
        self._done = False
        self._usage: dict[str, int] = {}

    def event(self, event: SSEEvent) -> None:
        if self._done:
            raise DraftError(STREAM, "sse-malformed", "the provider sent data after [DONE]")
        if event.data.strip() == "[DONE]":
            self._done = True
            return
        chunk = _json(event)
        if "error" in chunk:
            raise _provider_error(chunk)
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise DraftError(STREAM, "sse-malformed", "choices is not a list")
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                raise DraftError(STREAM, "sse-malformed",
                                 "the provider answered with more than one choice")
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                raise DraftError(STREAM, "sse-malformed", "a choice's delta is not an object")
            if delta.get("tool_calls") or delta.get("function_call"):
                raise DraftError(STREAM, "tool-call",
                                 "the model answered with a tool call; drafting offers no tools "
                                 "and accepts only a JSON text answer")
            if delta.get("refusal"):
                raise DraftError(STREAM, "refusal", "the model refused to draft a contract")
            content = delta.get("content")
            if isinstance(content, str):
                if self._finish is not None and content:
                    raise DraftError(STREAM, "sse-malformed",
                                     "the provider sent text after the finish reason")
                self._parts.append(content)
            elif content is not None:
                raise DraftError(STREAM, "sse-malformed", "a delta's content is not text")
            finish = choice.get("finish_reason")
            if finish is not None and self._finish is None:
                self._finish = str(finish)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            details = usage.get("completion_tokens_details")
            self._usage = {name: value for name, value in (
                ("inputTokens", _count(usage.get("prompt_tokens"))),
                ("outputTokens", _count(usage.get("completion_tokens"))),
                ("reasoningTokens", _count(details.get("reasoning_tokens"))
                 if isinstance(details, dict) else None),
            ) if value is not None}

    def result(self) -> StreamResult:
        if self._finish is None:
            raise DraftError(STREAM, "truncated",
                             "the provider's stream ended before a finish reason; the answer "
                             "is incomplete")
        if not self._done:
            raise DraftError(STREAM, "truncated",
                             "the provider's stream ended without [DONE]; the answer is "
                             "incomplete")
        if self._finish != "stop":
            raise _finish_error(self._finish, "length", "max_completion_tokens")
        return StreamResult(text="".join(self._parts), finish=self._finish, usage=self._usage)


def _finish_error(finish: str, cap_reason: str, cap_name: str) -> DraftError:
    if finish == cap_reason:
        return DraftError(STREAM, "finish",
                          f"the answer stopped at the route's output token cap ({cap_name}) "
                          f"before it was complete (finish reason {finish!r})")
    if finish in ("tool_calls", "function_call", "tool_use"):
        return DraftError(STREAM, "tool-call",
                          f"the model stopped to call a tool (finish reason {finish!r}); "
                          "drafting offers no tools")
    shown = finish if IDENTIFIER_RE.match(finish) else "unrecognised"
    return DraftError(STREAM, "finish",
                      f"the answer did not finish normally (finish reason {shown!r})")


class AnthropicStream:
    """Messages events: `message_start`, per block `content_block_start` / `_delta` / `_stop`,
    `message_delta` with the stop reason and usage, `message_stop`; `ping` and unknown event
    types are read past. Thinking blocks are read past and never kept; a tool block is refused."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._blocks: dict[int, str] = {}
        self._started = False
        self._stop_reason: str | None = None
        self._stopped = False
        self._usage: dict[str, int] = {}

    def event(self, event: SSEEvent) -> None:
        payload = _json(event)
        kind = payload.get("type")
        if self._stopped and kind != "ping":
            raise DraftError(STREAM, "sse-malformed", "the provider sent events after "
                                                      "message_stop")
        if kind == "error":
            raise _provider_error(payload)
        if kind == "message_start":
            message = payload.get("message")
            usage = message.get("usage") if isinstance(message, dict) else None
            self._started = True
            self._take_usage(usage)
        elif kind == "content_block_start":
            self._need_start()
            index, block = payload.get("index"), payload.get("content_block")
            if type(index) is not int or not isinstance(block, dict) or index in self._blocks:
                raise DraftError(STREAM, "sse-malformed", "a content block start is malformed")
            block_type = block.get("type")
            if block_type == "text":
                self._blocks[index] = "text"
                initial = block.get("text", "")
                if isinstance(initial, str):
                    self._parts.append(initial)
            elif block_type in ("thinking", "redacted_thinking"):
                self._blocks[index] = "thinking"
            elif isinstance(block_type, str) and "tool" in block_type:
                raise DraftError(STREAM, "tool-call",
                                 "the model answered with a tool call; drafting offers no tools "
                                 "and accepts only a JSON text answer")
            else:
                raise DraftError(STREAM, "unexpected-block",
                                 "the model answered with a content block that is neither text "
                                 "nor thinking")
        elif kind == "content_block_delta":
            self._need_start()
            index, delta = payload.get("index"), payload.get("delta")
            if type(index) is not int or index not in self._blocks or not isinstance(delta, dict):
                raise DraftError(STREAM, "sse-malformed", "a content block delta is malformed")
            delta_type = delta.get("type")
            if delta_type == "input_json_delta":
                raise DraftError(STREAM, "tool-call", "the model answered with a tool call; "
                                                      "drafting offers no tools")
            if self._blocks[index] == "text" and delta_type == "text_delta":
                text = delta.get("text")
                if not isinstance(text, str):
                    raise DraftError(STREAM, "sse-malformed", "a text delta holds no text")
                self._parts.append(text)
            elif self._blocks[index] == "thinking" and delta_type in ("thinking_delta",
                                                                      "signature_delta"):
                pass  # reasoning text is never kept
            else:
                raise DraftError(STREAM, "unexpected-block",
                                 "the provider sent a delta that does not fit its content block")
        elif kind == "message_delta":
            self._need_start()
            delta = payload.get("delta")
            if isinstance(delta, dict) and delta.get("stop_reason") is not None:
                self._stop_reason = str(delta["stop_reason"])
            self._take_usage(payload.get("usage"))
        elif kind == "message_stop":
            self._need_start()
            self._stopped = True

    def _need_start(self) -> None:
        if not self._started:
            raise DraftError(STREAM, "sse-malformed", "the stream did not begin with "
                                                      "message_start")

    def _take_usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        for wire, name in (("input_tokens", "inputTokens"), ("output_tokens", "outputTokens")):
            value = _count(usage.get(wire))
            if value is not None:
                self._usage[name] = value

    def result(self) -> StreamResult:
        if not self._stopped:
            raise DraftError(STREAM, "truncated",
                             "the provider's stream ended without message_stop; the answer is "
                             "incomplete")
        if self._stop_reason is None:
            raise DraftError(STREAM, "truncated", "the provider's stream gave no stop reason")
        if self._stop_reason != "end_turn":
            raise _finish_error(self._stop_reason, "max_tokens", "max_tokens")
        return StreamResult(text="".join(self._parts), finish=self._stop_reason,
                            usage=self._usage)


def stream_reader(provider: str) -> OpenAIStream | AnthropicStream:
    return OpenAIStream() if provider == OPENAI else AnthropicStream()

"""A scripted model provider for drafting tests: a real HTTP/1.1 server on 127.0.0.1, in a
thread, that answers each POST with the next scripted reply and streams real server-sent events
in the OpenAI chat-completions or the Anthropic messages format (chunked transfer encoding,
flushed event by event). It records every request it saw: path, headers and JSON body."""

from __future__ import annotations

import contextlib
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    events: list[bytes] = field(default_factory=list)  # each written and flushed on its own
    content_type: str = "text/event-stream"
    body: bytes | None = None  # a plain body instead of events
    delay: float = 0.0  # seconds before the status line
    gap: float = 0.0  # seconds between events
    write_size: int | None = None  # re-split the event bytes into writes of this size
    abort: bool = False  # close the connection inside the body (no final chunk)
    echo_headers: bool = False  # answer an error body that echoes the request headers


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: Any


class FakeProvider:
    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.seen: list[Seen] = []
        self.stopping = threading.Event()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                headers = {name.lower(): value for name, value in self.headers.items()}
                provider.seen.append(Seen(self.path, headers, json.loads(raw or b"null")))
                reply = provider.replies.popleft() if provider.replies else Reply(status=500)
                # the client may give up (timeout, size cap): that is the point
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    provider.answer(self, reply, headers)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def origin(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def reply(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def close(self) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()

    def answer(self, handler: BaseHTTPRequestHandler, reply: Reply,
               headers: dict[str, str]) -> None:
        if reply.delay and self.stopping.wait(reply.delay):
            return
        body = reply.body
        if reply.echo_headers:
            body = json.dumps({"error": {
                "type": headers.get("x-api-key") or headers.get("authorization", ""),
                "message": f"bad credentials; you sent {json.dumps(headers)}",
                "code": headers.get("authorization", "")}}).encode()
        handler.send_response(reply.status)
        handler.send_header("Content-Type", "application/json" if reply.echo_headers
                            else reply.content_type)
        handler.send_header("Connection", "close")
        if body is not None:
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
            handler.wfile.flush()
            handler.close_connection = True
            return
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        writes = reply.events
        if reply.write_size:
            joined = b"".join(reply.events)
            writes = [joined[i:i + reply.write_size]
                      for i in range(0, len(joined), reply.write_size)]
        for index, piece in enumerate(writes):
            if index and reply.gap and self.stopping.wait(reply.gap):
                return
            if reply.abort and index == len(writes) - 1:
                handler.wfile.write(b"%x\r\n" % (len(piece) + 10) + piece)  # promised more
                handler.wfile.flush()
                handler.close_connection = True
                return
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            handler.wfile.flush()
        handler.wfile.write(b"0\r\n\r\n")
        handler.wfile.flush()
        handler.close_connection = True


# --- OpenAI chat-completions stream -----------------------------------------------------------


def _pieces(text: str, count: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // count))
    return [text[i:i + size] for i in range(0, len(text), size)]


def openai_events(text: str, *, finish: str | None = "stop", reasoning: str | None = None,
                  tool_call: bool = False, usage: bool = True, done: bool = True,
                  pieces: int = 4) -> list[bytes]:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "draft-model"}

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        payload = {**base, "choices": [{"index": 0, "delta": delta,
                                        "finish_reason": finish_reason}]}
        return b"data: " + json.dumps(payload).encode() + b"\n\n"

    events = [b": keep-alive\n\n", chunk({"role": "assistant", "content": ""})]
    if reasoning:
        events += [chunk({"reasoning_content": part}) for part in _pieces(reasoning, 2)]
    events += [chunk({"content": part}) for part in _pieces(text, pieces)]
    if tool_call:
        events.append(chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                             "function": {"name": "write_file",
                                                          "arguments": "{}"}}]}))
    if finish is not None:
        events.append(chunk({}, finish))
    if usage:
        payload = {**base, "choices": [], "usage": {
            "prompt_tokens": 321, "completion_tokens": 123, "total_tokens": 444,
            "completion_tokens_details": {"reasoning_tokens": 45}}}
        events.append(b"data: " + json.dumps(payload).encode() + b"\n\n")
    if done:
        events.append(b"data: [DONE]\n\n")
    return events


# --- Anthropic messages stream ------------------------------------------------------------------


def _event(name: str, payload: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode()


def anthropic_events(text: str, *, stop_reason: str | None = "end_turn",
                     thinking: str | None = None, tool_use: bool = False, stop: bool = True,
                     error: dict[str, Any] | None = None, pieces: int = 4) -> list[bytes]:
    events = [
        _event("message_start", {"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "draft-model",
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 321, "output_tokens": 1}}}),
        _event("ping", {"type": "ping"}),
    ]
    index = 0
    if thinking:
        events += [
            _event("content_block_start", {"type": "content_block_start", "index": index,
                                           "content_block": {"type": "thinking",
                                                             "thinking": ""}}),
            *[_event("content_block_delta", {"type": "content_block_delta", "index": index,
                                             "delta": {"type": "thinking_delta",
                                                       "thinking": part}})
              for part in _pieces(thinking, 2)],
            _event("content_block_delta", {"type": "content_block_delta", "index": index,
                                           "delta": {"type": "signature_delta",
                                                     "signature": "c2lnbmF0dXJl"}}),
            _event("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
        index += 1
    if error is not None:
        events.append(_event("error", {"type": "error", "error": error}))
    if tool_use:
        events += [
            _event("content_block_start", {"type": "content_block_start", "index": index,
                                           "content_block": {"type": "tool_use", "id": "toolu_1",
                                                             "name": "write_file",
                                                             "input": {}}}),
            _event("content_block_delta", {"type": "content_block_delta", "index": index,
                                           "delta": {"type": "input_json_delta",
                                                     "partial_json": "{}"}}),
            _event("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
        index += 1
    events.append(_event("content_block_start", {"type": "content_block_start", "index": index,
                                                 "content_block": {"type": "text", "text": ""}}))
    events += [_event("content_block_delta", {"type": "content_block_delta", "index": index,
                                              "delta": {"type": "text_delta", "text": part}})
               for part in _pieces(text, pieces)]
    events.append(_event("content_block_stop", {"type": "content_block_stop", "index": index}))
    if stop_reason is not None:
        events.append(_event("message_delta", {"type": "message_delta",
                                               "delta": {"stop_reason": stop_reason,
                                                         "stop_sequence": None},
                                               "usage": {"output_tokens": 123}}))
    if stop:
        events.append(_event("message_stop", {"type": "message_stop"}))
    return events


def events_for(provider: str, text: str, **options: Any) -> list[bytes]:
    """Events of a normal answer `text` in `provider`'s format."""
    if provider == "openai-chat":
        return openai_events(text, **options)
    return anthropic_events(text, **options)

"""A scripted DeepSeek-compatible model for the real Harness: `POST /chat/completions`, streamed
as server-sent events, the way `@deepseek-ai/dsh-llm-deepseek` reads it.

The script is a list of steps, one per model call of the agent: the n-th call (n = how many
assistant messages the conversation already holds) gets step n, or the last step once the script
is used up. A step is `{"say": text}` or `{"tool": name, "arguments": {...}}`. A call without
tools (the Harness's session-title call) gets a title. Every request is kept in `requests`.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Step = dict[str, Any]


class ScriptedModel:
    def __init__(self, steps: list[Step]) -> None:
        assert steps, "a script needs at least one step"
        self.steps = steps
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def answer(self, body: dict[str, Any]) -> Step:
        with self.lock:
            self.requests.append(body)
        if not body.get("tools"):
            return {"say": "Scripted session"}
        done = sum(1 for message in body.get("messages", []) if message.get("role") == "assistant")
        return self.steps[min(done, len(self.steps) - 1)]

    def tool_names(self) -> set[str]:
        """The tools the agent was offered on its last model call."""
        with self.lock:
            last = [r for r in self.requests if r.get("tools")][-1]
        return {tool["function"]["name"] for tool in last["tools"]}


def _chunk(model: str, delta: dict[str, Any] | None = None, finish: str | None = None,
           usage: dict[str, int] | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {"id": "scripted", "object": "chat.completion.chunk",
                             "created": int(time.time()), "model": model, "choices": []}
    if delta is not None or finish is not None:
        event["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    if usage is not None:
        event["usage"] = usage
    return event


def _events(step: Step, model: str, call_number: int) -> Iterator[dict[str, Any]]:
    yield _chunk(model, {"role": "assistant", "content": ""})
    # Streamed in pieces, as a real model does (the Harness logs them merged into chunk rows).
    if "say" in step:
        for word in re.findall(r"\S+\s*", step["say"]):
            yield _chunk(model, {"content": word})
        yield _chunk(model, {}, "stop")
    else:
        arguments = json.dumps(step["arguments"])
        half = len(arguments) // 2
        yield _chunk(model, {"tool_calls": [{"index": 0, "id": f"call_scripted_{call_number}",
                                             "type": "function",
                                             "function": {"name": step["tool"],
                                                          "arguments": arguments[:half]}}]})
        yield _chunk(model, {"tool_calls": [{"index": 0,
                                             "function": {"arguments": arguments[half:]}}]})
        yield _chunk(model, {}, "tool_calls")
    yield _chunk(model, usage={"prompt_tokens": 100, "completion_tokens": 10,
                               "total_tokens": 110})


@contextmanager
def serve(model: ScriptedModel) -> Iterator[str]:
    """Serve the model on a free loopback port; yields its base URL."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

        def do_GET(self) -> None:  # noqa: N802
            body = json.dumps({"object": "list", "data": [
                {"id": "deepseek-v4-flash", "object": "model"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            step = model.answer(body)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for event in _events(step, body.get("model", "deepseek-v4-flash"),
                                 len(model.requests)):
                self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()

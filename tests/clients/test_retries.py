"""Retries never store anything twice: a TCP proxy between the client and a real server forwards
each request but drops the first answer on a chosen route; the client sends again, the server
answers the replay, and its log holds every event once."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from governor_client import (
    AgentSession,
    Config,
    GovernorClient,
    GovernorUnreachable,
    Workspace,
    harness,
)
from governor_client.workspace import PendingBatch

from tests.api.test_contracts import readme_contract
from tests.conftest import INTENT
from tests.live import Live

MODEL: harness.ModelInfo = {"provider": "test", "model": "scripted"}


def read_message(stream: socket.SocketIO) -> bytes | None:
    """One HTTP/1.1 message (head and Content-Length body) from `stream`; None at EOF."""
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        byte = stream.read(1)
        if not byte:
            return None
        head += byte
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    body = b""
    while len(body) < length:
        chunk = stream.read(length - len(body))
        if not chunk:
            return None
        body += chunk
    return head + body


class DroppingProxy:
    """Forwards HTTP/1.1 to `upstream`; the first answer to each of the `drop` request lines
    (method and path suffix) is read from the server and then thrown away, and the connection
    closed, as a network failure after the server acted would."""

    def __init__(self, upstream: tuple[str, int], drop: set[tuple[str, str]]) -> None:
        self.upstream = upstream
        self.drop = set(drop)
        self.requests: list[tuple[str, str]] = []
        self.dropped: list[tuple[str, str]] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with client, socket.create_connection(self.upstream) as server:
            from_client = socket.SocketIO(client, "rb")
            from_server = socket.SocketIO(server, "rb")
            while (request := read_message(from_client)) is not None:
                method, path = request.split(b" ", 2)[:2]
                line = (method.decode(), path.decode().split("?")[0])
                server.sendall(request)
                response = read_message(from_server)
                if response is None:
                    return
                with self.lock:
                    self.requests.append(line)
                    rule = next((r for r in self.drop
                                 if r[0] == line[0] and line[1].endswith(r[1])), None)
                    if rule is not None:
                        self.drop.discard(rule)
                        self.dropped.append(line)
                        return  # the server acted; the client never hears of it
                client.sendall(response)

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def proxy(live: Live) -> Iterator[DroppingProxy]:
    host, port = live.url.removeprefix("http://").split(":")
    proxy = DroppingProxy((host, int(port)), {("POST", "/sessions"), ("POST", "/events")})
    yield proxy
    proxy.close()


def test_a_lost_answer_is_retried_without_storing_the_session_or_the_batch_twice(
    live: Live, workspace: Path, proxy: DroppingProxy,
) -> None:
    with GovernorClient(Config(url=proxy.url, token=live.token), backoff=0.05) as client:
        agent = AgentSession(client, Workspace(workspace))
        agent.record(harness.prompt("write the README"),
                     harness.tool("write_file", {"path": "README.md"}, "written", model=MODEL),
                     harness.end())
        session_id = agent.ensure()

    assert proxy.dropped == [("POST", "/api/v1/sessions"),
                             ("POST", f"/api/v1/sessions/{session_id}/events")]
    sent = [line for line in proxy.requests if line[0] == "POST"]
    assert sent == [("POST", "/api/v1/sessions"), ("POST", "/api/v1/sessions"),
                    ("POST", f"/api/v1/sessions/{session_id}/events"),
                    ("POST", f"/api/v1/sessions/{session_id}/events")]
    with live.client() as direct:
        events = direct.get(f"/sessions/{session_id}/events").json()["events"]
        status = direct.get(f"/sessions/{session_id}").json()
    assert [event["type"] for event in events] == [
        "turn/start", "user/message", "step/start", "assistant/message", "tool/call",
        "tool/result", "step/end", "turn/end"]
    assert [event["seq"] for event in events] == list(range(8))
    assert status["next_seq"] == 8
    assert status["external_id"].startswith("governor-agent:")
    state = Workspace(workspace).peek()
    assert state.session_id == session_id and state.next_seq == 8
    assert state.outbox == [] and state.pending is None


def test_a_batch_whose_answer_was_lost_is_resent_by_the_next_process_and_stored_once(
    live: Live, workspace: Path,
) -> None:
    """The process that sent a batch died before it heard back: the batch is still pending in
    the workspace, and the next process resends it under the same key."""
    config = Config(url=live.url, token=live.token)
    with GovernorClient(config) as client:
        agent = AgentSession(client, Workspace(workspace))
        session_id = agent.ensure()
        agent.queue(harness.prompt("first"))
        with agent.workspace.state() as state:
            events, book = harness.build_events(state.outbox, state.book or harness.TraceBook(),
                                                state.next_seq)
            key = "governor-agent-crashed-process"
            client.append_events(session_id, events, expected_seq=state.next_seq,
                                 idempotency_key=key)  # stored; the answer "never arrived"
            state.pending = PendingBatch(key=key, expected_seq=state.next_seq, events=events,
                                         book=book, records=1)

    with GovernorClient(config) as client:
        AgentSession(client, Workspace(workspace)).record(harness.prompt("second"))
        texts = [event["data"]["content"][0]["text"]
                 for event in client.events(session_id)["events"]
                 if event["type"] == "user/message"]
    assert texts == ["first", "second"]


def test_a_governor_that_never_answers_fails_within_the_clients_time_budget() -> None:
    """What a hook relies on to answer inside its agent's timeout."""
    silent = socket.create_server(("127.0.0.1", 0))  # accepts, reads nothing, answers nothing
    url = f"http://127.0.0.1:{silent.getsockname()[1]}"
    started = time.monotonic()
    with silent, GovernorClient(Config(url=url, token="t"), timeout=5, budget=1.5) as client, \
            pytest.raises(GovernorUnreachable, match="time budget|ReadTimeout"):
        client.session("00000000-0000-0000-0000-000000000000")
    assert time.monotonic() - started < 3


def test_a_long_poll_one_too_many_for_the_token_waits_for_retry_after_then_answers(
    live: Live, workspace: Path, review_required: None,
) -> None:
    """The server holds at most 4 long polls per token and answers the next 429 with
    Retry-After; the client waits that long and polls again instead of failing the caller
    (an MCP begin whose proposal was already made)."""
    with GovernorClient(Config(url=live.url, token=live.token)) as client:
        agent = AgentSession(client, Workspace(workspace))
        begun = agent.begin({**readme_contract(), "intent": INTENT})
        assert begun["status"] == "review-pending"
        session_id = agent.ensure()
        with live.client() as direct:
            holders = [threading.Thread(target=direct.get, daemon=True,
                                        args=(f"/sessions/{session_id}/review",),
                                        kwargs={"params": {"wait": 5}}) for _ in range(4)]
            for holder in holders:
                holder.start()
            time.sleep(2)  # the four hold every slot of the token (a loaded machine: 2 s)
            assert direct.get(f"/sessions/{session_id}/review",
                              params={"wait": 1}).status_code == 429
            started = time.monotonic()
            answer = client.review(session_id, wait=1)
            waited = time.monotonic() - started
            for holder in holders:
                holder.join()
    assert answer["review"] is not None and answer["review"]["status"] == "pending"
    assert 1 <= waited < 10, waited

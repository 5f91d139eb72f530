"""The hook command never stalls the coding agent: against a governor that accepts connections
and never answers, events are spooled in `.governor/` within seconds and sent later, in order and
once; a stop is decided within about 10 s, blocked while it cannot be asked — but the third such
stop in a row is allowed, marked unverified and recorded. The hook creates nothing outside its
workspace, and an agent session id reused in another directory gets a session of its own."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.api.test_contracts import readme_contract
from tests.clients.conftest import cli_json, hook
from tests.clients.test_hooks import ClaudeCode, of_type, session_log, write
from tests.clients.test_retries import DroppingProxy
from tests.live import Live

UNVERIFIED = "unverified: the governor was unreachable"
EVENT_HOOK_SECONDS = 4.5  # a 2 s request, and the interpreter starting on a busy machine
STOP_HOOK_SECONDS = 10.5


class HungServer:
    """Accepts every connection and never answers, like a governor stuck in a deadlock."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.accepted.append(connection)

    def close(self) -> None:
        self.listener.close()
        for connection in self.accepted:
            connection.close()


@pytest.fixture
def hung() -> Iterator[HungServer]:
    server = HungServer()
    yield server
    server.close()


def timed_hook(live: Live, payload: dict[str, Any], **options: Any) -> tuple[Any, float]:
    started = time.monotonic()
    answer = hook(live, payload, **options)
    return answer, time.monotonic() - started


def local_state(workspace: Path) -> dict[str, Any]:
    return json.loads((workspace / ".governor" / "session.json").read_text())


def spooled_call_ids(workspace: Path) -> list[str]:
    """The tool calls waiting in the spool (the batch in flight is the head of the outbox)."""
    return [record["call_id"] for record in local_state(workspace)["outbox"]
            if record["kind"] == "tool"]


def begin_active_contract(live: Live, claude: ClaudeCode) -> None:
    hook(live, claude.event("SessionStart", source="startup"))
    hook(live, claude.event("UserPromptSubmit", prompt="Write README.md"))
    begun = cli_json(live, claude.workspace, "begin", stdin=json.dumps(readme_contract()))
    assert begun["status"] == "active"


def test_with_the_governor_hung_tool_events_are_spooled_at_once_and_sent_later_in_order(
    live: Live, workspace: Path, review_off: None, hung: HungServer,
) -> None:
    claude = ClaudeCode(workspace, "claude-hung-events")
    begin_active_contract(live, claude)

    for name in ("README.md", "NOTES.md", "CHANGES.md"):
        written = write(workspace, name, "# Tool\n")
        answer, seconds = timed_hook(live, claude.tool_use("Write", written, written),
                                     url=hung.url)
        assert answer is None
        assert seconds < EVENT_HOOK_SECONDS, seconds
    assert spooled_call_ids(workspace) == ["toolu_01", "toolu_02", "toolu_03"]

    # The governor answers again: the spool goes first, in order, then the new event.
    written = write(workspace, "README.md", "# Tool\n\n## Install\n")
    assert hook(live, claude.tool_use("Write", written, written)) is None
    assert spooled_call_ids(workspace) == []
    _, events = session_log(live, workspace)
    calls = of_type(events, "tool/call")
    assert [call["data"]["callId"] for call in calls] == [
        "toolu_01", "toolu_02", "toolu_03", "toolu_04"]
    assert [json.loads(call["data"]["arguments"])["file_path"].rsplit("/", 1)[1]
            for call in calls] == ["README.md", "NOTES.md", "CHANGES.md", "README.md"]


def test_a_spooled_batch_the_governor_stored_without_answering_is_not_stored_twice(
    live: Live, workspace: Path, review_off: None,
) -> None:
    claude = ClaudeCode(workspace, "claude-lost-answer")
    begin_active_contract(live, claude)
    host, port = live.url.removeprefix("http://").split(":")
    proxy = DroppingProxy((host, int(port)), {("POST", "/events")})
    try:
        written = write(workspace, "README.md", "# Tool\n")
        assert hook(live, claude.tool_use("Write", written, written), url=proxy.url) is None
    finally:
        proxy.close()
    assert len(proxy.dropped) == 1  # stored by the governor, the answer lost on the way
    assert spooled_call_ids(workspace) == ["toolu_01"]
    assert local_state(workspace)["pending"] is not None  # resent under its key

    written = write(workspace, "NOTES.md", "notes\n")
    assert hook(live, claude.tool_use("Write", written, written)) is None
    _, events = session_log(live, workspace)
    assert [call["data"]["callId"] for call in of_type(events, "tool/call")] == [
        "toolu_01", "toolu_02"]


def test_stops_the_hung_governor_cannot_decide_are_blocked_twice_then_allowed_unverified(
    live: Live, workspace: Path, review_off: None, hung: HungServer,
) -> None:
    claude = ClaudeCode(workspace, "claude-hung-stops")
    begin_active_contract(live, claude)

    for attempt in (1, 2):
        # The Harness hook bridge reports stop_hook_active false on every stop.
        blocked, seconds = timed_hook(live, claude.stop(active=False), url=hung.url)
        assert seconds < STOP_HOOK_SECONDS, seconds
        assert blocked is not None and blocked["decision"] == "block", blocked
        assert "could not be reached" in blocked["reason"]
        assert f"Unverified stop {attempt} in a row" in blocked["reason"]
    allowed, seconds = timed_hook(live, claude.stop(active=False), url=hung.url)
    assert seconds < STOP_HOOK_SECONDS, seconds
    assert allowed is not None and "decision" not in allowed, allowed
    assert allowed["systemMessage"].startswith(UNVERIFIED)
    assert "NOT verified" in allowed["systemMessage"]
    state = local_state(workspace)
    assert state["unasked_stops"] == 0  # the next stop that cannot be asked blocks again
    assert state["outbox"][-1]["kind"] == "hook"
    assert state["outbox"][-1]["summary"] == allowed["systemMessage"]

    # The governor answers again: everything spooled arrives, and the stop is judged.
    judged = hook(live, claude.stop(active=False))
    assert judged is not None and judged["decision"] == "block"
    assert "readme-install" in judged["reason"]
    status, events = session_log(live, workspace)
    results = of_type(events, "hook/result")
    assert [(r["data"]["point"], r["data"]["decision"]) for r in results] == [("Stop", "pass")]
    assert results[0]["data"]["stderrSummary"] == allowed["systemMessage"]
    invoked = of_type(events, "hook/invoked")[0]
    assert invoked["seq"] == results[0]["seq"] - 1
    assert invoked["data"]["handlerId"] == "claude-code:Stop:governor-agent"
    prompts = [p["data"]["content"][0]["text"] for p in of_type(events, "user/message")]
    assert sum("could not be reached" in text for text in prompts) == 2
    turn_ends = of_type(events, "turn/end")
    assert [end["data"]["turn"] for end in turn_ends] == [1, 2, 3]
    assert invoked["data"]["turn"] == 3 and turn_ends[2]["seq"] < invoked["seq"]
    # The unverified stop certified nothing: the governor holds the contract open.
    assert status["state"] == "active"
    assert [a["attempt"] for a in status["attempts"]] == [1]


def test_the_hook_creates_no_directory_outside_its_workspace(
    live: Live, workspace: Path, tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    before = set(live.workspace_root.iterdir())
    missing = live.workspace_root / "never-made" / "project"
    claude = ClaudeCode(missing, "claude-missing-directory")
    for payload in (claude.event("SessionStart", source="startup"),
                    claude.event("UserPromptSubmit", prompt="hello"),
                    claude.tool_use("Write", {"file_path": "a"}, "ok"), claude.stop()):
        answer = hook(live, payload, cwd=workspace, HOME=str(home))
        assert answer is None or "decision" not in answer
    assert not (live.workspace_root / "never-made").exists()

    # A `.governor` that leads elsewhere is refused, not written through.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workspace / ".governor").symlink_to(elsewhere)
    linked = ClaudeCode(workspace, "claude-linked-state")
    hook(live, linked.event("UserPromptSubmit", prompt="hello"), HOME=str(home))
    assert list(elsewhere.iterdir()) == []
    assert list(home.iterdir()) == []
    assert set(live.workspace_root.iterdir()) == before


def test_a_session_id_reused_in_another_directory_gets_a_session_of_its_own(
    live: Live, workspace: Path,
) -> None:
    other = workspace.parent / f"{workspace.name}-other"
    other.mkdir()
    hook(live, ClaudeCode(workspace, "claude-reused-id").event("SessionStart"))
    hook(live, ClaudeCode(other, "claude-reused-id").event("SessionStart"))
    hook(live, ClaudeCode(other, "claude-reused-id").event("UserPromptSubmit", prompt="hi"))

    first, first_events = session_log(live, workspace)
    second, second_events = session_log(live, other)
    assert first["id"] != second["id"]
    assert first["external_id"] == "claude-code:claude-reused-id"
    assert second["external_id"].startswith("claude-code:claude-reused-id@")
    assert first["workspace"]["path"] == str(workspace.resolve())
    assert second["workspace"]["path"] == str(other.resolve())
    assert first_events == [] and of_type(second_events, "user/message")

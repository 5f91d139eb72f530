"""`governor-agent hook claude-code|codex` fed hook payloads shaped as the agents document them,
against a real server: Harness events in the session log, stops decided by turn-stop, and a
stop that fails safe when the governor cannot be reached."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from tests.api.test_contracts import readme_contract
from tests.clients.conftest import cli_json, hook, unreachable_url
from tests.live import Live


class ClaudeCode:
    """Hook payloads of one Claude Code session in one project directory."""

    def __init__(self, workspace: Path, session_id: str) -> None:
        self.workspace = workspace
        self.base = {"session_id": session_id,
                     "transcript_path": f"/root/.claude/projects/demo/{session_id}.jsonl",
                     "cwd": str(workspace), "permission_mode": "default"}
        self.tool_uses = 0

    def event(self, name: str, **fields: Any) -> dict[str, Any]:
        return {**self.base, "hook_event_name": name, **fields}

    def tool_use(self, tool_name: str, tool_input: dict[str, Any],
                 tool_response: Any) -> dict[str, Any]:
        self.tool_uses += 1
        return self.event("PostToolUse", tool_name=tool_name, tool_input=tool_input,
                          tool_response=tool_response, tool_use_id=f"toolu_0{self.tool_uses}")

    def tool_failure(self, tool_name: str, tool_input: dict[str, Any],
                     error: str) -> dict[str, Any]:
        self.tool_uses += 1
        return self.event("PostToolUseFailure", tool_name=tool_name, tool_input=tool_input,
                          tool_use_id=f"toolu_0{self.tool_uses}", error=error,
                          is_interrupt=False)

    def stop(self, *, active: bool = False) -> dict[str, Any]:
        return self.event("Stop", stop_hook_active=active)


def session_log(live: Live, workspace: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    state = json.loads((workspace / ".governor" / "session.json").read_text())
    with live.client() as client:
        status = client.get(f"/sessions/{state['session_id']}").json()
        events = client.get(f"/sessions/{state['session_id']}/events",
                            params={"limit": 5000}).json()["events"]
    return status, events


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event for event in events if event["type"] == kind]


def write(workspace: Path, name: str, text: str) -> dict[str, Any]:
    path = workspace / name
    path.write_text(text)
    return {"file_path": str(path), "content": text}


def test_a_claude_code_session_from_first_prompt_to_a_blocked_then_allowed_stop(
    live: Live, workspace: Path, review_off: None,
) -> None:
    claude = ClaudeCode(workspace, "5b2f8a0e-claude-session")
    assert hook(live, claude.event("SessionStart", source="startup",
                                   model="claude-sonnet-4-5")) is None
    assert hook(live, claude.event("UserPromptSubmit",
                                   prompt="Write README.md with an Install section")) is None
    begun = cli_json(live, workspace, "begin", stdin=json.dumps(readme_contract()))
    assert begun["status"] == "active"

    written = write(workspace, "README.md", "# Tool\n")
    assert hook(live, claude.tool_use("Write", written, {**written, "type": "create",
                                                         "structuredPatch": []})) is None
    assert hook(live, claude.tool_failure(
        "Bash", {"command": "pytest -q", "description": "Run the tests"},
        "Command exited with non-zero status code 1")) is None

    blocked = hook(live, claude.stop())
    assert blocked is not None and blocked["decision"] == "block"
    assert "attempt 1/3" in blocked["reason"] and "readme-install" in blocked["reason"]

    edit = write(workspace, "README.md", "# Tool\n\n## Install\n\npip install tool\n")
    assert hook(live, claude.tool_use(
        "Edit", {"file_path": edit["file_path"], "old_string": "# Tool\n",
                 "new_string": edit["content"]},
        {"filePath": edit["file_path"], "oldString": "# Tool\n",
         "newString": edit["content"], "structuredPatch": []})) is None
    certified = hook(live, claude.stop(active=True))
    # The attempt that ends the contract steers once with the terminal text (rules §7).
    assert certified is not None and certified["decision"] == "block"
    assert "certified" in certified["reason"]
    assert hook(live, claude.stop(active=True)) is None  # terminal reached: allowed

    status, events = session_log(live, workspace)
    assert status["external_id"] == "claude-code:5b2f8a0e-claude-session"
    assert status["workspace"]["path"] == str(workspace.resolve())
    assert status["state"] == "certified"
    calls = of_type(events, "tool/call")
    assert [call["data"]["name"] for call in calls] == ["Write", "Bash", "Edit"]
    assert [call["data"]["callId"] for call in calls] == ["toolu_01", "toolu_02", "toolu_03"]
    assert json.loads(calls[1]["data"]["arguments"])["command"] == "pytest -q"
    results = of_type(events, "tool/result")
    flags = [result["data"]["message"]["content"][0]["isError"] for result in results]
    assert flags == [False, True, False]
    assert results[1]["data"]["error"]["code"] == "TOOL_FAILED"
    assert "non-zero status" in results[1]["data"]["message"]["content"][0]["content"][0]["text"]
    assistant = of_type(events, "assistant/message")[0]["data"]["message"]["source"]
    assert assistant == {"kind": "model", "provider": "anthropic", "model": "claude-sonnet-4-5"}

    prompts = of_type(events, "user/message")
    assert prompts[0]["data"]["source"] == {"kind": "user"}
    assert prompts[0]["data"]["content"][0]["text"] == "Write README.md with an Install section"
    # Each steer opened the next turn with the governor's message as its prompt.
    assert [p["data"]["source"]["kind"] for p in prompts] == ["user", "plugin", "plugin"]
    assert prompts[1]["data"]["content"][0]["text"] == blocked["reason"]
    turns = [(event["type"], event["data"]["turn"]) for event in events
             if event["type"] in ("turn/start", "turn/end")]
    assert turns == [("turn/start", 1), ("turn/end", 1), ("turn/start", 2), ("turn/end", 2),
                     ("turn/start", 3), ("turn/end", 3)]
    governor = [event["type"] for event in events if event["origin"] == "governor"]
    assert governor == ["reliability/reference", "reliability/contract", "reliability/attempt",
                        "reliability/attempt", "reliability/terminal"]
    # The contract began after the prompt and before the tool uses it judges.
    contract = of_type(events, "reliability/contract")[0]
    assert contract["seq"] < calls[0]["seq"]


def test_an_unreachable_governor_blocks_the_stop_while_a_contract_is_active(
    live: Live, workspace: Path, review_off: None,
) -> None:
    claude = ClaudeCode(workspace, "claude-offline-active")
    hook(live, claude.event("SessionStart", source="startup"))
    hook(live, claude.event("UserPromptSubmit", prompt="Write README.md"))
    assert cli_json(live, workspace, "begin", stdin=json.dumps(readme_contract()))["status"] \
        == "active"

    down = unreachable_url()
    written = write(workspace, "README.md", "# Tool\n")
    assert hook(live, claude.tool_use("Write", written, written), url=down) is None
    blocked = hook(live, claude.stop(), url=down)
    assert blocked is not None and blocked["decision"] == "block"
    assert "could not be reached" in blocked["reason"]
    assert "do not claim the task is complete" in blocked["reason"]

    # The governor is back: what was queued meanwhile arrives once, and the stop is judged.
    judged = hook(live, claude.stop(active=True))
    assert judged is not None and judged["decision"] == "block"
    assert "readme-install" in judged["reason"]
    _, events = session_log(live, workspace)
    assert [call["data"]["callId"] for call in of_type(events, "tool/call")] == ["toolu_01"]
    prompts = [p["data"]["content"][0]["text"] for p in of_type(events, "user/message")]
    assert prompts[0] == "Write README.md" and "could not be reached" in prompts[1]


def test_an_unreachable_governor_with_no_contract_allows_the_stop(
    live: Live, workspace: Path,
) -> None:
    claude = ClaudeCode(workspace, "claude-offline-idle")
    down = unreachable_url()
    assert hook(live, claude.event("SessionStart", source="startup"), url=down) is None
    assert hook(live, claude.event("UserPromptSubmit", prompt="hello"), url=down) is None
    answer = hook(live, claude.stop(), url=down)
    assert answer is None or "decision" not in answer
    assert answer is not None and "no completion contract" in answer["systemMessage"]


def test_codex_hooks_record_the_turn_and_block_the_stop_with_the_governors_message(
    live: Live, workspace: Path, review_off: None,
) -> None:
    base = {"session_id": "019a-codex-thread", "transcript_path": None, "cwd": str(workspace),
            "model": "gpt-5-codex", "permission_mode": "default", "turn_id": "turn-1"}
    assert hook(live, {**base, "hook_event_name": "SessionStart", "source": "startup"},
                agent="codex") is None
    assert hook(live, {**base, "hook_event_name": "UserPromptSubmit",
                       "prompt": "Add a README with an Install section"}, agent="codex") is None
    cli_json(live, workspace, "begin", stdin=json.dumps(readme_contract()))
    (workspace / "README.md").write_text("# Tool\n")
    assert hook(live, {**base, "hook_event_name": "PostToolUse", "tool_name": "Bash",
                       "tool_use_id": "call_1",
                       "tool_input": {"command": "printf '# Tool\\n' > README.md"},
                       "tool_response": {"exit_code": 0, "output": ""}}, agent="codex") is None
    assert hook(live, {**base, "hook_event_name": "PostToolUse", "tool_name": "Bash",
                       "tool_use_id": "call_2", "tool_input": {"command": "make test"},
                       "tool_response": "Exit code: 2\nWall time: 0.4 seconds\nOutput:\n"
                                        "make: *** [test] Error 2\n"},
                agent="codex") is None
    answer = hook(live, {**base, "hook_event_name": "Stop", "stop_hook_active": False,
                         "last_assistant_message": "README.md is written."}, agent="codex")
    assert answer is not None and answer["decision"] == "block"
    assert "readme-install" in answer["reason"]

    status, events = session_log(live, workspace)
    assert status["external_id"] == "codex:019a-codex-thread"
    flags = [r["data"]["message"]["content"][0]["isError"] for r in of_type(events, "tool/result")]
    assert flags == [False, True]
    said = of_type(events, "assistant/message")[-1]["data"]["message"]
    assert said["content"] == [{"type": "text", "text": "README.md is written."}]
    assert said["source"] == {"kind": "model", "provider": "openai", "model": "gpt-5-codex"}


def test_the_hook_never_puts_the_token_anywhere_but_the_authorization_header(
    live: Live, workspace: Path,
) -> None:
    claude = ClaudeCode(workspace, "claude-token-check")
    hook(live, claude.event("SessionStart", source="startup"))
    state = (workspace / ".governor" / "session.json").read_text()
    assert live.token not in state
    assert (workspace / ".governor" / ".gitignore").read_text() == "*\n"
    with httpx.Client() as client:  # the session answers only with the token
        session_id = json.loads(state)["session_id"]
        assert client.get(f"{live.url}/api/v1/sessions/{session_id}").status_code == 401

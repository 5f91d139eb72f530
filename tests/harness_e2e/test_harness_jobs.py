"""Headless jobs of the real DeepSeek Harness against a scripted model, governed through the
plugin in clients/harness (and, in the last test, through `governor-agent hook claude-code` as
the Stop hook of the Harness's own Claude-Code hooks bridge)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, expect

from governor.domain.harness import TraceState, validate_batch
from tests.browser import DESKTOP, Server, log_in
from tests.harness_e2e.rig import Harness, committed_events, read_log, sandboxed_client
from tests.harness_e2e.scripted_model import ScriptedModel, Step, serve
from tests.live import Live, stop_process_group
from tests.pages import INTENT

GOVERNOR_TOOLS = {"reliability_assess", "reliability_begin", "reliability_begin_code",
                  "reliability_verify", "reliability_status", "reliability_abstain",
                  "reliability_code_profiles", "reliability_code_verify", "reliability_draft"}
JOB = "Write hello.txt saying hello governor"
CHECK = {"id": "says-hello", "kind": "file_contains", "path": "hello.txt", "text": "hello governor"}


def contract(*checks: dict[str, Any], **extra: Any) -> dict[str, Any]:
    every = [CHECK, *checks]
    return {"objective": JOB, "claims": [
        {"id": "hello", "statement": "hello.txt says hello governor", "importance": "critical",
         "verification": "deterministic", "check_ids": [check["id"] for check in every]}],
        "checks": every, **extra}


def write(text: str) -> Step:
    return {"tool": "write", "arguments": {"file_path": "hello.txt", "content": text}}


def say(text: str) -> Step:
    return {"say": text}


def run(harness: Harness, live: Live, workspace: Path, steps: list[Step],
        **env: str) -> tuple[ScriptedModel, dict[str, Any]]:
    """Run the job; the model and the governor session's status."""
    model = ScriptedModel(steps)
    with serve(model) as url:
        result = harness.run(JOB, workspace, url, GOVERNOR_URL=live.url,
                             GOVERNOR_TOKEN=live.token, **env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    [session_id] = harness.governor_session_ids()
    return model, status(live, session_id)


def status(live: Live, session_id: str) -> dict[str, Any]:
    with live.client() as agent:
        return dict(agent.get(f"/sessions/{session_id}").json())


def agent_events(live: Live, session_id: str) -> list[dict[str, Any]]:
    """The session's events the agent sent, as envelopes (the governor's own left out)."""
    with live.client() as agent:
        events = agent.get(f"/sessions/{session_id}/events", params={"limit": 5000}).json()
    return [{"type": e["type"], "seq": (e["meta"] or {}).get("sourceSeq"), "time": e["time"],
             "data": e["data"], **{k: v for k, v in (e["meta"] or {}).items()
                                   if k in ("ignorable", "surfaceOp", "sourceEventSeqs")}}
            for e in events["events"] if e["origin"] != "governor"]


def texts_from_plugin(log: list[dict[str, Any]]) -> list[str]:
    return [block["text"] for event in log if event["type"] == "user/message"
            and event["data"].get("source") == {"kind": "plugin", "plugin": "reliability-governor"}
            for block in event["data"]["content"]]


# --- (a) and (e): the wrong thing, a steer, the repair, certified; the log file imports --------


@pytest.fixture
def repaired(harness: Harness, live: Live, workspace: Path,
             review_off: None) -> tuple[Harness, ScriptedModel, dict[str, Any]]:
    model, answer = run(harness, live, workspace, [
        {"tool": "reliability_begin", "arguments": contract()},
        write("hello world\n"), say("Done."),
        write("hello governor\n"), say("Done, repaired."),
        say("Certified: hello.txt says hello governor."),
    ])
    return harness, model, answer


def test_a_wrong_write_is_steered_repaired_and_certified(
    repaired: tuple[Harness, ScriptedModel, dict[str, Any]], live: Live, workspace: Path
) -> None:
    harness, model, answer = repaired
    assert model.tool_names() >= GOVERNOR_TOOLS
    assert answer["state"] == "certified", answer
    assert [a["passed"] for a in answer["attempts"]] == [False, True]
    [log_path] = harness.session_logs()
    header, events = committed_events(log_path)
    assert answer["external_id"] == header["id"]
    assert answer["workspace"]["path"] == str(workspace) == header["cwd"]
    steers = texts_from_plugin(events)
    assert steers[0].startswith("Completion is not verified yet: attempt 1/3 failed 1 of 1")
    assert "certified" in steers[1]
    assert (workspace / "hello.txt").read_text() == "hello governor\n"
    # Every committed event reached the governor once, in order.
    sent = agent_events(live, answer["id"])
    assert [e["seq"] for e in sent] == [e["seq"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in sent] == [e["type"] for e in events]


def test_the_harness_log_file_imports_and_folds_to_the_live_trace_state(
    repaired: tuple[Harness, ScriptedModel, dict[str, Any]], live: Live
) -> None:
    harness, _, answer = repaired
    [log_path] = harness.session_logs()
    body = log_path.read_bytes()
    with live.client() as agent:
        imported = agent.post("/sessions/import", content=body,
                              headers={"Content-Type": "application/zstd"})
    assert imported.status_code == 201, imported.text
    live_state = validate_batch(TraceState(), agent_events(live, answer["id"]),
                                allow_reliability=True)
    imported_state = validate_batch(TraceState(), agent_events(live, imported.json()["id"]),
                                    allow_reliability=True)
    assert imported_state.to_json() == live_state.to_json()
    assert live_state.open_turn is None and live_state.turns == 1


# --- (b) a forbidden tool ends exhausted -------------------------------------------------------


def test_a_forbidden_tool_ends_the_contract_exhausted(
    harness: Harness, live: Live, workspace: Path, review_off: None
) -> None:
    no_bash = {"id": "no-shell", "kind": "tool_not_called", "tool": "bash"}
    _, answer = run(harness, live, workspace, [
        {"tool": "reliability_begin", "arguments": contract(no_bash, max_attempts=1)},
        {"tool": "bash", "arguments": {"command": "echo hello governor > hello.txt",
                                       "description": "write the file"}},
        say("Done."), say("The contract is exhausted: I used the shell."),
    ])
    assert answer["state"] == "exhausted", answer
    [attempt] = answer["attempts"]
    assert not attempt["passed"]
    assert [r["id"] for r in attempt["results"] if not r["passed"]] == ["no-shell"]
    [log_path] = harness.session_logs()
    assert any("exhausted" in text for text in texts_from_plugin(read_log(log_path)))


# --- (c) review required: the job waits, a reviewer approves in the browser, it continues ------


@pytest.mark.browser
def test_the_job_waits_for_the_reviewer_who_approves_in_the_browser(
    harness: Harness, live: Live, workspace: Path, review_required: None, browser: Browser
) -> None:
    model = ScriptedModel([
        {"tool": "reliability_begin", "arguments": contract(intent=INTENT, wait_seconds=180)},
        write("hello governor\n"), say("Done."), say("Certified."),
    ])
    with serve(model) as url:
        job = harness.start(JOB, workspace, url, GOVERNOR_URL=live.url, GOVERNOR_TOKEN=live.token)
        try:
            session_id = wait_for(lambda: next(iter(harness.governor_session_ids()), None))
            review = wait_for(lambda: pending_review(live, session_id))
            assert job.poll() is None, "the job went on without the reviewer"
            approve_in_the_browser(browser, live, review["id"])
            assert job.wait(timeout=120) == 0, (harness.home / "job.out").read_text()[-4000:]
        finally:
            stop_process_group(job, grace=5)
    answer = status(live, session_id)
    assert answer["state"] == "certified", answer
    assert answer["review"]["status"] == "approved"


def pending_review(live: Live, session_id: str) -> dict[str, Any] | None:
    with live.client() as agent:
        review = agent.get(f"/sessions/{session_id}/review").json()["review"]
    return review if review and review["status"] == "pending" else None


def wait_for(probe: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while (value := probe()) is None:
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)
    return value


def approve_in_the_browser(browser: Browser, live: Live, review_id: str) -> None:
    context = browser.new_context(viewport=DESKTOP)
    try:
        page = context.new_page()
        server = Server(live, httpx.Client())
        log_in(page, server, "rita", "rita-password-1")
        page.goto(f"{live.url}/reviews/{review_id}/")
        page.get_by_role("button", name="Approve", exact=True).click()
        page.get_by_role("link", name="review the evidence plan").click()
        page.get_by_role("button", name="Approve", exact=True).click()
        expect(page.get_by_text("the contract is active")).to_be_visible()
    finally:
        context.close()


# --- (d) the hooks path: governor-agent as the Stop hook of the Harness's hooks bridge --------


def test_the_hooks_path_certifies_the_same_task_from_inside_the_harness_sandbox(
    harness_cache: Path, tmp_path: Path, live: Live, workspace: Path, review_off: None
) -> None:
    harness = Harness(harness_cache, tmp_path / "home")
    harness.home.mkdir()
    harness.create_profile(plugin=False)
    # The Harness's sandbox drops variables named like *TOKEN*/*KEY* and hides HOME and /tmp
    # from hook commands and the agent's shell, but shows the workspace: the token goes in a
    # file there, and so does the client (the checkout may be under /tmp).
    (workspace / ".governor").mkdir()
    token_file = workspace / ".governor" / "token"
    token_file.write_text(live.token)
    token_file.chmod(0o600)
    client = sandboxed_client(workspace / ".governor")
    agent = f"GOVERNOR_TOKEN_FILE={token_file} {client}"
    hook = {"type": "command", "command": f"{agent} hook claude-code", "timeout": 30}
    harness.add_hooks_bridge({event: [{"hooks": [hook]}] for event in
                              ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop")})
    (workspace / "contract.json").write_text(json.dumps(contract()))
    model = ScriptedModel([
        {"tool": "bash", "arguments": {"command": f"{agent} begin contract.json",
                                       "description": "propose the completion contract"}},
        write("hello world\n"), say("Done."),
        write("hello governor\n"), say("Done, repaired."), say("Certified."),
    ])
    with serve(model) as url:
        result = harness.run(JOB, workspace, url, GOVERNOR_URL=live.url)
    assert result.returncode == 0, result.stderr[-6000:]
    assert not GOVERNOR_TOOLS & model.tool_names()  # no plugin here
    [log_path] = harness.session_logs()
    log = read_log(log_path)
    stops = [e["data"] for e in log if e["type"] == "hook/result" and e["data"]["point"] == "Stop"]
    # The hook reached the governor (a hook that cannot run counts as "pass": failing open).
    assert [stop["decision"] for stop in stops] == ["block", "block", "pass"]
    assert not [e for e in log if e["type"] == "hook/result" and e["data"].get("stderrSummary")]
    session_id = json.loads((workspace / ".governor" / "session.json").read_text())["session_id"]
    answer = status(live, session_id)
    assert answer["external_id"] == f"claude-code:{log[0]['id']}"
    assert answer["state"] == "certified", answer
    assert [a["passed"] for a in answer["attempts"]] == [False, True]

"""`governor-agent mcp` driven by the official MCP client over stdio, against a real server:
the tools, their JSON results, the policy in the server instructions, and the review wait."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent

from governor.domain import attempts
from governor.domain import contracts as contract_domain
from tests.api.test_contracts import readme_contract
from tests.clients.conftest import CLIENT_SRC, agent_env
from tests.conftest import INTENT
from tests.live import ADMIN_PASSWORD, Live

TOOLS = {"reliability_assess", "reliability_begin", "reliability_begin_code",
         "reliability_verify", "reliability_status", "reliability_abstain",
         "reliability_code_profiles", "reliability_code_verify", "reliability_outcome_profiles",
         "reliability_outcome_observe", "reliability_outcome_status"}

Scenario = Callable[[ClientSession, Any], Awaitable[None]]


def run_mcp(live: Live, workspace: Path, scenario: Scenario, *,
            workspace_arg: str | None = None) -> None:
    """Spawn the MCP server for `workspace` (`--workspace workspace_arg`, e.g. snapshot:DIR)
    and run `scenario` with a connected client."""
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "governor_client", "mcp", "--workspace",
                                      workspace_arg or str(workspace)],
        env={key: value for key, value in agent_env(live).items()
             if key.startswith(("GOVERNOR_", "PYTHON", "XDG_"))} | {"PYTHONPATH": str(CLIENT_SRC)},
        cwd=str(workspace))

    async def main() -> None:
        async with stdio_client(server) as (read, write), ClientSession(read, write) as client:
            initialized = await client.initialize()
            await scenario(client, initialized)

    # In a thread of its own: the browser tests' Playwright keeps an event loop in this one.
    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(anyio.run, main).result()


def text_of(result: CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def call(client: ClientSession, name: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict), result
    return result.structured_content


def test_the_tools_carry_a_contract_from_begin_through_repair_to_certified(
    live: Live, workspace: Path, review_off: None,
) -> None:
    async def scenario(client: ClientSession, initialized: Any) -> None:
        instructions = initialized.instructions
        for policy in ("certified", "repair only the failed checks", "reliability_abstain",
                       "Run them last"):
            assert policy in instructions
        listed = await client.list_tools()
        assert {tool.name for tool in listed.tools} == TOOLS  # no drafts route: no draft tool
        begin = next(tool for tool in listed.tools if tool.name == "reliability_begin")
        assert {"objective", "claims", "checks", "intent", "max_attempts",
                "wait_seconds"} <= set(begin.input_schema["properties"])

        profiles = await call(client, "reliability_code_profiles")
        assert [p["id"] for p in profiles["profiles"]] == ["readme-present"]
        contract = readme_contract()
        assessed = await call(client, "reliability_assess", **contract)
        assert assessed["status"] == "ready"

        begun = await call(client, "reliability_begin", **contract)
        assert begun["status"] == "active"
        assert begun["contract"]["version"] == 3

        first = await call(client, "reliability_verify")
        assert first["decision"] == "repair"
        assert "readme-install" in first["message"]
        (workspace / "README.md").write_text("# Tool\n\n## Install\n\npip install tool\n")
        second = await call(client, "reliability_verify")
        assert second["decision"] == "certified"
        receipt = second["terminal"]["receipt"]
        assert receipt in second["message"]

        status = await call(client, "reliability_status")
        assert status["state"] == "certified"
        assert status["terminal"]["receipt"] == receipt
        assert [a["attempt"] for a in status["attempts"]] == [1, 2]

        refused = await client.call_tool("reliability_abstain", {"reason": "too late"})
        assert not refused.is_error  # after a terminal the terminal is returned, nothing new
        assert refused.structured_content["terminal"]["receipt"] == receipt

    run_mcp(live, workspace, scenario)


def test_begin_waits_for_the_review_with_progress_then_returns_the_pending_state(
    live: Live, workspace: Path, review_required: None,
) -> None:
    reports: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append((progress, total, message))

    async def scenario(client: ClientSession, initialized: Any) -> None:
        started = anyio.current_time()
        result = await client.call_tool(
            "reliability_begin", {**readme_contract(), "intent": INTENT, "wait_seconds": 3},
            progress_callback=on_progress)
        waited = anyio.current_time() - started
        assert not result.is_error, result.content
        answer = result.structured_content
        assert answer["status"] == "review-pending"
        assert answer["review"]["stage"] == "intent"
        assert answer["review"]["review_url"].startswith(live.url + "/reviews/")
        assert "do not claim completion" in answer["next"]
        assert 2.5 <= waited < 20, waited
        assert reports and reports[0][1] == 3
        assert any("intent review: pending" in (message or "") for _, _, message in reports)

        status = await call(client, "reliability_status")
        assert status["state"] == "review-pending"
        twice = await client.call_tool("reliability_begin", {**readme_contract(),
                                                             "intent": INTENT})
        assert twice.is_error
        assert '"CONFLICT"' in text_of(twice)  # the server's JSON error, as is
        verified = await client.call_tool("reliability_verify", {})
        assert verified.is_error  # a contract waits for review: said, with where
        assert '"REVIEW_PENDING"' in text_of(verified)
        assert live.url + "/reviews/" in text_of(verified)

    run_mcp(live, workspace, scenario)


def test_reliability_draft_is_offered_only_when_the_project_drafts_with_a_model(
    live: Live, workspace: Path, review_off: None,
) -> None:
    live.manage("governor_project", "set", "demo", "--authoring-mode", "auxiliary-model")
    try:
        async def scenario(client: ClientSession, initialized: Any) -> None:
            listed = await client.list_tools()
            assert {tool.name for tool in listed.tools} == TOOLS | {"reliability_draft"}
            # The project has no drafting route configured: the server's refusal comes back as
            # the tool's error, and nothing was asked of any model.
            result = await client.call_tool("reliability_draft", {
                "objective": "Write README.md", "contract_kind": "general"})
            assert result.is_error and '"status": 503' in text_of(result)

        run_mcp(live, workspace, scenario)
    finally:
        live.manage("governor_project", "set", "demo", "--authoring-mode", "current-agent")


class Reviewer:
    """The bootstrap admin reviewing in the browser: a real login and CSRF-protected POSTs."""

    def __init__(self, live: Live) -> None:
        self.live = live
        self.http = httpx.Client(base_url=live.url, timeout=30)
        self.http.get("/accounts/login/")
        answer = self.http.post("/accounts/login/", data={
            "username": "admin", "password": ADMIN_PASSWORD,
            "csrfmiddlewaretoken": self.http.cookies["csrftoken"]})
        assert answer.status_code == 302, answer.text

    def approve_next(self, session_id: str, stage: str) -> None:
        with self.live.client() as api:
            for _ in range(100):
                review = api.get(f"/sessions/{session_id}/review").json()["review"]
                if review and review["stage"] == stage and review["status"] == "pending":
                    break
                time.sleep(0.1)
        answer = self.http.post(f"/reviews/{review['id']}/", data={
            "receipt": review["proposal_receipt"], "decision": "approved", "feedback": "",
            "csrfmiddlewaretoken": self.http.cookies["csrftoken"]})
        assert answer.status_code in (200, 302), answer.text


def test_begin_returns_the_active_contract_once_both_review_stages_are_approved(
    live: Live, workspace: Path, review_required: None,
) -> None:
    """The intent is approved while the tool's first long poll is held, and the evidence stage
    a moment later: the poll answers early (the next stage opened), and the tool must keep
    waiting for the rest of wait_seconds rather than return the half-reviewed state."""
    reviewer = Reviewer(live)
    waiting = threading.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        waiting.set()

    def review_both_stages() -> None:
        assert waiting.wait(30)
        time.sleep(0.5)  # the first long poll is held by now
        state = json.loads((workspace / ".governor" / "session.json").read_text())
        reviewer.approve_next(state["session_id"], "intent")
        time.sleep(1.5)
        reviewer.approve_next(state["session_id"], "evidence")

    async def scenario(client: ClientSession, initialized: Any) -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(anyio.to_thread.run_sync, review_both_stages)
            result = await client.call_tool(
                "reliability_begin", {**readme_contract(intent=INTENT), "wait_seconds": 60},
                progress_callback=on_progress)
        assert not result.is_error, result.content
        answer = result.structured_content
        assert isinstance(answer, dict)
        assert answer["status"] == "active"
        assert answer["contract"]["version"] == 5
        assert answer["review"]["stage"] == "evidence"
        assert answer["review"]["decision"] == "approved"
        assert answer["waited_seconds"] < 30

    run_mcp(live, workspace, scenario)


BOUNDS = ("minimum", "maximum", "minLength", "maxLength")


def bounds(schema: dict[str, Any]) -> dict[str, Any]:
    """The numeric bounds a JSON schema sets, also through `anyOf` (an optional argument)."""
    found = {key: schema[key] for key in BOUNDS if key in schema}
    for option in schema.get("anyOf", []):
        found |= bounds(option)
    return found


def test_the_tools_state_exactly_the_limits_of_the_servers_openapi_schema(
    live: Live, workspace: Path, review_off: None,
) -> None:
    """The server is the one source of each limit; the MCP schema restates it (the client may
    not import the server), and this holds the two together."""
    with live.client() as api:
        document = api.get("/openapi.json").json()
    paths, schemas = document["paths"], document["components"]["schemas"]

    def body(route: str) -> dict[str, Any]:
        operation = paths[f"/api/v1/sessions/{{session_id}}/{route}"]["post"]
        schema = operation["requestBody"]["content"]["application/json"]["schema"]
        properties: dict[str, Any] = schemas[schema["$ref"].rsplit("/", 1)[1]]["properties"]
        return properties

    proposal = body("assess")
    begin = {name: field for name, field in body("contracts").items() if name != "tree"}
    assert body("code-contracts") == body("contracts") and begin == proposal
    assert bounds(proposal["max_attempts"]) == {
        "minimum": 1, "maximum": contract_domain.MAX_ATTEMPTS_CAP}
    assert bounds(proposal["objective"]) == {"maxLength": contract_domain.MAX_OBJECTIVE_BYTES}
    assert bounds(body("abstain")["reason"]) == {
        "minLength": 1, "maxLength": attempts.MAX_ABSTAIN_REASON_CHARS}

    async def scenario(client: ClientSession, initialized: Any) -> None:
        tools = {tool.name: tool.input_schema["properties"]
                 for tool in (await client.list_tools()).tools}
        for name in ("reliability_assess", "reliability_begin", "reliability_begin_code"):
            for field in ("objective", "max_attempts"):
                assert bounds(tools[name][field]) == bounds(proposal[field]), (name, field)
        assert bounds(tools["reliability_abstain"]["reason"]) == bounds(body("abstain")["reason"])

        # Within the schema, the project's own cap decides, and the refusal names it.
        over_cap = contract_domain.DEFAULT_ATTEMPTS_CAP + 1
        refused = await client.call_tool("reliability_assess",
                                         {**readme_contract(), "max_attempts": over_cap})
        assert refused.is_error
        text = text_of(refused)
        error = json.loads(text[text.index("{"):])["error"]  # after "Error executing tool …: "
        assert error["code"] == "VALIDATION"
        assert error["details"] == [{"path": "max_attempts", "message": (
            f"must be between 1 and {contract_domain.DEFAULT_ATTEMPTS_CAP} (got {over_cap})")}]

    run_mcp(live, workspace, scenario)


def test_invalid_contracts_come_back_as_the_servers_validation_errors(
    live: Live, workspace: Path, review_off: None,
) -> None:
    async def scenario(client: ClientSession, initialized: Any) -> None:
        bad = readme_contract()
        bad["checks"][1]["kind"] = "file_mentions"
        result = await client.call_tool("reliability_begin", bad)
        assert result.is_error
        text = text_of(result)
        assert '"VALIDATION"' in text and "file_mentions" in text

    run_mcp(live, workspace, scenario)


@pytest.mark.sandbox
def test_a_code_contract_is_certified_after_a_fresh_trusted_run(live_with_worker: Live) -> None:
    live = live_with_worker
    workspace = live.workspace_root / "mcp-code-contract"
    workspace.mkdir()
    reports: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append(message)

    async def scenario(client: ClientSession, initialized: Any) -> None:
        begun = await call(client, "reliability_begin_code",
                           objective="Add README.md with an Install section",
                           claims=readme_contract()["claims"], checks=readme_contract()["checks"])
        assert begun["status"] == "active"
        # after the runner control a contract naming a profile protects (rules §17.3)
        assert [check["id"] for check in begun["contract"]["checks"][:2]] == [
            "protected-paths", "code-profile-readme-present"]
        (workspace / "README.md").write_text("# Tool\n\n## Install\n")
        result = await client.call_tool("reliability_code_verify", {"profile": "readme-present",
                                                                    "wait_seconds": 60},
                                        progress_callback=on_progress)
        run = result.structured_content
        assert run["state"] == "finished" and run["result"]["passed"] is True, run
        assert set(run["result"]["stdout"]) == {"bytes", "truncated", "receipt"}  # no output
        assert any("readme-present: finished" in (message or "") for message in reports)
        verified = await call(client, "reliability_verify")
        assert verified["decision"] == "certified", verified["message"]

    run_mcp(live, workspace, scenario)


def test_rule_17_8_the_begin_tools_pass_environment_changes_which_review_off_refuses(
    live: Live, workspace: Path, review_off: None,
) -> None:
    """The MCP begin tools take `environment_changes` (rules §17.8) and send it: with review
    off the server refuses it, naming the field, and nothing begins."""
    async def scenario(client: ClientSession, initialized: Any) -> None:
        listed = await client.list_tools()
        for name in ("reliability_begin", "reliability_begin_code"):
            tool = next(tool for tool in listed.tools if tool.name == name)
            assert "environment_changes" in tool.input_schema["properties"]
        result = await client.call_tool("reliability_begin", {
            **readme_contract(), "environment_changes": [".venv/**"]})
        assert result.is_error
        assert "environment_changes" in text_of(result)
        assert "person's review" in text_of(result)

    run_mcp(live, workspace, scenario)

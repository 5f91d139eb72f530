"""`governor-agent mcp`: the governor's tools for any MCP client, over stdio.

The server works in one workspace (its `--workspace`, `GOVERNOR_WORKSPACE`, or the directory it
was started in) and uses that workspace's governor session — the one the coding agent's hooks
started, when they are installed, so tool calls and hook events land in one log.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Annotated, Any, Literal, TypeVar

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from governor_client.errors import GovernorError
from governor_client.session import NEXT, AgentSession, review_outcome

T = TypeVar("T")
DEFAULT_REVIEW_WAIT_SECONDS = 300
DEFAULT_RUN_WAIT_SECONDS = 300
MAX_TOOL_WAIT_SECONDS = 3600

INSTRUCTIONS = """\
Reliability Governor: whether your task is complete is decided by evidence the governor checks,
not by your own judgement. Follow this policy in this workspace:

1. Before substantial work, propose a completion contract with reliability_begin (or
   reliability_begin_code when the task changes code: it adds the project's required trusted
   verifier profiles). Map every success claim to deterministic evidence: each claim lists the
   ids of checks (file_exists, file_absent, file_contains, file_not_contains, file_equals,
   json_equals, tool_succeeded, tool_not_called, no_tool_errors, code_verification_succeeded)
   that prove it; at least one claim is critical. Preview with reliability_assess and fix every
   error finding before you begin.
2. When review is required, reliability_begin waits for the human reviewer. If it comes back
   with review-pending, you may prepare, but the contract is not active: keep waiting with
   reliability_status(wait_seconds=...). On revision-requested, revise using the feedback and
   begin again; on rejected, do not proceed as if approved.
3. Do not claim the task is complete until the governor answers certified. A passing attempt
   may answer delivery-pending: a person reviews the delivered change first; wait with
   reliability_status(wait_seconds=...). If they ask for changes, make them — answer the
   feedback and every line comment (path:line) — before verifying again. When an attempt
   fails, repair only the failed checks it names — do not redo work that passed, do not
   repeat actions whose outcome is unknown — then call reliability_verify again. Attempts
   are limited.
4. Trusted profiles (reliability_code_profiles, reliability_code_verify) run in a sandbox
   against the workspace as it is. Run them last, after your final edit: any later tool call
   makes earlier results stale.
5. When proof is unavailable — a check cannot pass, a needed profile does not exist, the task
   is impossible or blocked — call reliability_abstain with an honest reason instead of claiming
   success.
6. When certified, report truthfully and cite the terminal receipt; when exhausted or
   abstained, say what was not achieved.
"""

# Limits here restate the server's, which is the one source: tests/clients/test_mcp_server.py
# holds every bound of these schemas to the server's OpenAPI schema of the same field.
Objective = Annotated[str, Field(max_length=4096, description=(
    "What the user asked for, as you understand it (the server counts the limit in UTF-8 "
    "bytes)."))]
Claims = Annotated[list[dict[str, Any]], Field(description=(
    "Success claims: {id, statement, importance: critical|important|minor, verification: "
    "deterministic|human-required|unsupported, check_ids: [check ids], "
    "minimum_independent_sources?: how many distinct evidence sources (files, the tool "
    "trajectory, trusted profiles) its checks must span, default 1}. At least one critical "
    "claim."))]
Checks = Annotated[list[dict[str, Any]], Field(description=(
    "Deterministic checks, each {id, kind, ...}: file_exists/file_absent {path}; "
    "file_contains/file_not_contains/file_equals {path, text}; json_equals {path, pointer, "
    "value}; tool_succeeded {tool, arguments_contain?, min_count?}; tool_not_called {tool}; "
    "no_tool_errors {}; code_verification_succeeded {profile, min_count?}; changes_within "
    "{paths} (every path changed since the contract start matches a pattern); unchanged {paths} "
    "(none matches). Paths are relative to the workspace; patterns are git pathspec globs "
    "(tests/**, **/conftest.py). Each check's baseline (does it already pass before your work?) "
    "comes back in the assessment: a critical claim needs a check that fails now."))]
Intent = Annotated[dict[str, Any] | None, Field(description=(
    "Needed when review is required: {constraints, assumptions, non_goals, ambiguities}, each "
    "a short list of short strings."))]
MaxAttempts = Annotated[int | None, Field(ge=1, le=10, description=(
    "Repair budget: 1 up to the project's cap (the maximum here is the highest cap a project "
    "can have; the server refuses more than this project's). Omit it to get the cap."))]
ProtectedChanges = Annotated[list[str] | None, Field(description=(
    "Protected paths (tests and their configuration, from GET /project and the profiles) this "
    "task must change, as patterns: shown to the reviewer first; only a person's review can "
    "open them, so refused when review is off."))]
EnvironmentChanges = Annotated[list[str] | None, Field(description=(
    "Paths of a workspace environment directory (e.g. .venv) this task must change, as "
    "patterns: the environment is the operator's and every run is held against what it was "
    "when the session started; only a person's review can open these, so refused when review "
    "is off."))]
OutcomeProfileId = Annotated[str | None, Field(description=(
    "An outcome profile id from reliability_outcome_profiles: once delivery is certified the "
    "server watches whether the business goal is reached. Certification is not the goal "
    "achieved: never claim it before reliability_outcome_status says achieved."))]
DraftReceipt = Annotated[str | None, Field(description="Only when the project drafts contracts "
                                                       "with an auxiliary model: the draft's "
                                                       "receipt.")]
ReviewWait = Annotated[int, Field(ge=0, le=MAX_TOOL_WAIT_SECONDS, description=(
    "How long to wait for a pending review, in seconds, before returning the pending state."))]


def _body(objective: str, claims: list[dict[str, Any]], checks: list[dict[str, Any]],
          max_attempts: int | None, intent: dict[str, Any] | None,
          draft_receipt: str | None = None,
          protected_changes: list[str] | None = None,
          outcome_profile: str | None = None,
          environment_changes: list[str] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"objective": objective, "claims": claims, "checks": checks}
    for key, value in (("max_attempts", max_attempts), ("intent", intent),
                       ("draft_receipt", draft_receipt),
                       ("protected_changes", protected_changes),
                       ("environment_changes", environment_changes),
                       ("outcome_profile", outcome_profile)):
        if value is not None:
            body[key] = value
    return body


async def _call(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking client call off the event loop; governor refusals become tool errors
    whose text is the server's JSON error."""
    try:
        return await anyio.to_thread.run_sync(lambda: function(*args, **kwargs))
    except GovernorError as error:
        raise ToolError(json.dumps(error.as_dict(), ensure_ascii=False)) from error


async def _each(items: Iterator[T]) -> AsyncIterator[T]:
    """A blocking iterator (each step a long poll), iterated off the event loop."""
    while True:
        step = await _call(lambda: list(itertools.islice(items, 1)))
        if not step:
            return
        yield step[0]


class GovernorTools:
    def __init__(self, agent: AgentSession) -> None:
        self.agent = agent

    async def wait_for_review(self, limit: int, ctx: Context) -> dict[str, Any]:
        """Long-poll the review, reporting progress, until it is decided or `limit` passed."""
        started = time.monotonic()
        await ctx.report_progress(0, limit, "waiting for the reviewer's decision")
        polls = self.agent.review_polls(limit)
        async for review in _each(polls):
            elapsed = time.monotonic() - started
            stage = review["stage"] if review else "review"
            await ctx.report_progress(min(elapsed, limit), limit,
                                      f"{stage} review: {review['status'] if review else 'none'}")
        status = await _call(self.agent.status)
        return review_outcome(self.agent, status, time.monotonic() - started)

    async def begin(self, kind: Literal["general", "code"], body: dict[str, Any],
                    wait_seconds: int, ctx: Context) -> dict[str, Any]:
        answer: dict[str, Any] = dict(await _call(self.agent.begin, body, kind=kind))
        if answer["status"] == "review-pending" and wait_seconds > 0:
            return {**await self.wait_for_review(wait_seconds, ctx),
                    "assessment": answer["assessment"]}
        answer["next"] = NEXT.get(answer["status"], "")
        return answer


def build_server(agent: AgentSession, *, review_wait: int = DEFAULT_REVIEW_WAIT_SECONDS,
                 drafting: bool = False) -> MCPServer:
    """The governor's tools; `reliability_draft` only when the project drafts contracts with an
    auxiliary model (`drafting`)."""
    tools = GovernorTools(agent)
    server: MCPServer = MCPServer("reliability-governor", instructions=INSTRUCTIONS,
                                  version="0.1.0")

    @server.tool()
    async def reliability_assess(
        objective: Objective, claims: Claims, checks: Checks,
        max_attempts: MaxAttempts = None, intent: Intent = None,
        kind: Annotated[Literal["general", "code"], Field(
            description="code: include the project's required verifier profiles")] = "general",
    ) -> dict[str, Any]:
        """Preview the coverage of a proposed contract: findings (errors block begin), scores.
        Writes nothing."""
        return dict(await _call(agent.assess, _body(objective, claims, checks, max_attempts,
                                                    intent), kind=kind))

    @server.tool()
    async def reliability_begin(
        objective: Objective, claims: Claims, checks: Checks, ctx: Context,
        max_attempts: MaxAttempts = None, intent: Intent = None,
        draft_receipt: DraftReceipt = None, protected_changes: ProtectedChanges = None,
        outcome_profile: OutcomeProfileId = None,
        environment_changes: EnvironmentChanges = None, wait_seconds: ReviewWait = review_wait,
    ) -> dict[str, Any]:
        """Propose a completion contract. With review off it is active at once; with review
        required this waits (with progress) for the reviewer up to wait_seconds, then returns
        the decision or the pending state."""
        body = _body(objective, claims, checks, max_attempts, intent, draft_receipt,
                     protected_changes, outcome_profile, environment_changes)
        return await tools.begin("general", body, wait_seconds, ctx)

    @server.tool()
    async def reliability_begin_code(
        objective: Objective, ctx: Context, claims: Claims | None = None,
        checks: Checks | None = None, max_attempts: MaxAttempts = None, intent: Intent = None,
        draft_receipt: DraftReceipt = None, protected_changes: ProtectedChanges = None,
        outcome_profile: OutcomeProfileId = None,
        environment_changes: EnvironmentChanges = None, wait_seconds: ReviewWait = review_wait,
    ) -> dict[str, Any]:
        """Propose a code contract: the project's required verifier profiles are added as
        checks (code-profile-<id>) under a critical claim; add your own claims and checks for
        the rest. Waits for review like reliability_begin."""
        body = _body(objective, claims or [], checks or [], max_attempts, intent, draft_receipt,
                     protected_changes, outcome_profile, environment_changes)
        return await tools.begin("code", body, wait_seconds, ctx)

    if drafting:
        @server.tool()
        async def reliability_draft(
            objective: Objective,
            contract_kind: Annotated[Literal["general", "code"], Field(
                description="code: the draft includes the required verifier profiles")],
            context: Annotated[str | None, Field(description=(
                "Background for the drafting model (files, constraints); never stored"))] = None,
        ) -> dict[str, Any]:
            """Have the project's auxiliary model draft the claims and checks. In this project
            a contract can only be begun from such a draft, exactly as drafted."""
            drafted: dict[str, Any] = dict(await _call(
                agent.client.draft, agent.ensure(), contract_kind=contract_kind,
                objective=objective, context=context))
            drafted["next"] = NEXT["drafted"]
            return drafted

    @server.tool()
    async def reliability_verify() -> dict[str, Any]:
        """Evaluate every check of the active contract now (one attempt of the repair budget):
        repair (with the failed checks), certified, or exhausted."""
        return dict(await _call(agent.verify))

    @server.tool()
    async def reliability_status(
        ctx: Context,
        wait_seconds: Annotated[int, Field(ge=0, le=MAX_TOOL_WAIT_SECONDS, description=(
            "When a review is pending, wait this long for the decision first"))] = 0,
    ) -> dict[str, Any]:
        """The session's state (idle, review-pending, active, delivery-pending, certified,
        exhausted, abstained),
        contract, attempts, terminal and review."""
        status: dict[str, Any] = dict(await _call(agent.status))
        if status["state"] in ("review-pending", "delivery-pending") and wait_seconds > 0:
            await tools.wait_for_review(wait_seconds, ctx)
            status = dict(await _call(agent.status))
        status["next"] = NEXT.get(status["state"], "")
        return status

    @server.tool()
    async def reliability_abstain(
        reason: Annotated[str, Field(min_length=1, max_length=2000, description=(
            "Why completion cannot be proven: what is missing or impossible"))],
    ) -> dict[str, Any]:
        """End the contract honestly without success when proof is unavailable."""
        return dict(await _call(agent.abstain, reason))

    @server.tool()
    async def reliability_code_profiles() -> dict[str, Any]:
        """The trusted verifier profiles you may run by name (id, description, required,
        timeout, sandbox mode, and the held-out suite a profile is judged by: its name, version
        and counts — its tests and expected outputs are never shown). Commands are configured
        by operators, never by you."""
        return {"profiles": await _call(agent.client.code_profiles)}

    @server.tool()
    async def reliability_code_verify(
        profile: Annotated[str, Field(description="A profile id from reliability_code_profiles")],
        ctx: Context,
        wait_seconds: Annotated[int, Field(ge=0, le=MAX_TOOL_WAIT_SECONDS, description=(
            "How long to wait for the run to finish"))] = DEFAULT_RUN_WAIT_SECONDS,
    ) -> dict[str, Any]:
        """Run a trusted verifier profile in the sandbox against the workspace and wait for its
        result (passed, failure kind, exit code; never the raw output). Run it after your last
        edit."""
        run = await _call(agent.request_verification, profile)
        started = time.monotonic()
        polls = agent.run_polls(run["id"], wait_seconds)
        async for run in _each(polls):
            await ctx.report_progress(min(time.monotonic() - started, wait_seconds),
                                      wait_seconds, f"{profile}: {run['state']}")
        return dict(run)

    @server.tool()
    async def reliability_outcome_profiles() -> dict[str, Any]:
        """The outcome profiles you may name as outcome_profile when you begin: the business
        metric, its target and guardrails, the window and the attribution. The probe's command
        is the operator's, never yours."""
        return {"profiles": await _call(agent.client.outcome_profiles)}

    @server.tool()
    async def reliability_outcome_observe() -> dict[str, Any]:
        """Ask the server to observe the outcome now (at most once a minute; the server also
        observes on its own schedule). A worker runs the probe; returns the outcome status with
        the new observation, or with `pending` when the probe had not answered within a minute
        (reliability_outcome_status shows it later)."""
        return dict(await _call(agent.client.outcome_observe, agent.ensure()))

    @server.tool()
    async def reliability_outcome_status() -> dict[str, Any]:
        """The outcome after delivery: observing, achieved, missed, inconclusive or expired,
        with the observations and the signed terminal. Claim a business result only as the
        terminal states it ("correlated with" unless its attribution permits more)."""
        return dict(await _call(agent.client.outcome_status, agent.ensure()))

    return server


def serve(agent: AgentSession, *, review_wait: int | None = None) -> None:
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request is noise
    if review_wait is None:
        review_wait = int(os.environ.get("GOVERNOR_REVIEW_WAIT", DEFAULT_REVIEW_WAIT_SECONDS))
    try:
        drafting = agent.client.drafting_available(agent.ensure())
    except GovernorError as error:
        print(f"governor-agent mcp: cannot tell whether the project drafts with a model, so "
              f"reliability_draft is left out: {error}", file=sys.stderr)
        drafting = False
    build_server(agent, review_wait=review_wait, drafting=drafting).run("stdio")

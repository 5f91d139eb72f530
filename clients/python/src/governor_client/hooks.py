"""`governor-agent hook claude-code|codex`: coding-agent hook events in, Harness events out, and
the stop decided by the governor.

Both agents run a command per hook event with one JSON object on stdin (snake_case fields:
`session_id`, `transcript_path`, `cwd`, `hook_event_name`, and per event `prompt`, `tool_name`,
`tool_input`, `tool_response`, `tool_use_id`, `error`, `stop_hook_active`, …) and read a Stop
decision from stdout: `{"decision": "block", "reason": …}` keeps the agent working with the reason
as its next instruction.

| hook event                     | Harness events posted                                        |
|--------------------------------|--------------------------------------------------------------|
| SessionStart                   | none: starts or resumes the session (external id = agent's)  |
| UserPromptSubmit               | [turn/end of an unfinished turn,] turn/start, user/message   |
| PostToolUse                    | step/start, assistant/message (tool-call), tool/call,        |
|                                | tool/result (isError from the response), step/end            |
| PostToolUseFailure (Claude)    | the same with isError true and data.error                    |
| Stop                           | [a step with last_assistant_message,] turn/end; then         |
|                                | turn-stop; on steer: block, and the steer opens the next turn |
| SessionEnd (Claude)            | turn/end (aborted) of an unfinished turn                     |

With `GOVERNOR_WORKSPACE=snapshot` (or `snapshot:DIR`) the governor shares no disk with the
agent (rules §11): the session is bound `{"kind": "snapshot"}`, each PostToolUse starts a
background upload of the workspace (`governor-agent snapshot --background`, one at a time), and
a Stop uploads what is left before its turn-stop names the tree. A Stop that cannot finish the
upload within its budget is blocked with "upload in progress", counted as a stop at which the
governor could not be asked.

Never stalls the agent: every event is first spooled in the workspace (`.governor/`), then sent
with short timeouts; what could not be sent goes, in order and once (the batch keeps its
idempotency key), before anything newer at the next contact. A stop is decided within about
10 s. When the governor cannot be asked (or refuses) while the last state it reported is a
contract that is active or under review, the stop is blocked with a reason that says so — but
only twice in a row: the third such stop is allowed, marked unverified, and recorded as a
`hook/result` event. With no contract known the stop is allowed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from governor_client import harness
from governor_client.client import GovernorClient
from governor_client.config import Config
from governor_client.errors import GovernorError
from governor_client.harness import ModelInfo
from governor_client.session import AgentSession
from governor_client.workspace import Workspace

GOVERNOR_TOOLS = frozenset({
    "reliability_assess", "reliability_draft", "reliability_begin", "reliability_begin_code",
    "reliability_verify", "reliability_status", "reliability_abstain",
    "reliability_code_profiles", "reliability_code_verify",
})
# The agent waits for every hook: events get short requests (what is not sent stays spooled),
# a stop one budget of about 10 s, well inside the agents' hook timeouts.
EVENT_TIMEOUT_SECONDS = 2.0
EVENT_BUDGET_SECONDS = 4.0
STOP_BUDGET_SECONDS = 8.0
CONNECT_TIMEOUT_SECONDS = 2.0
# The hook bridge of the Harness reports `stop_hook_active: false` whatever happened, so the
# hook itself ends the loop of stops blocked because the governor cannot be asked.
UNASKED_STOPS_ALLOWED_AT = 3
UNVERIFIED = "unverified: the governor was unreachable"
UPLOAD_LOG = "upload.log"  # in `.governor/`: what the background uploads print


@dataclass(frozen=True)
class Dialect:
    name: str
    provider: str
    default_model: str
    project_dir_env: str | None  # the agent's own "project root" variable, when it sets one


DIALECTS = {
    "claude-code": Dialect("claude-code", "anthropic", "claude-code", "CLAUDE_PROJECT_DIR"),
    "codex": Dialect("codex", "openai", "codex", None),
}


def is_governor_tool(name: str) -> bool:
    return name.rsplit("__", 1)[-1].rsplit(".", 1)[-1] in GOVERNOR_TOOLS


_EXIT_CODE_LINE = re.compile(r"\A\s*Exit code: (\d+)")


def tool_failed(response: Any) -> bool:
    """Whether a tool response reports failure, in the shapes the agents use: error flags,
    `success: false`, an interruption, a non-zero exit code field, or shell output text that
    begins with a non-zero `Exit code: N` line."""
    if isinstance(response, str):
        match = _EXIT_CODE_LINE.match(response)
        return match is not None and int(match.group(1)) != 0
    if not isinstance(response, Mapping):
        return False
    if response.get("is_error") is True or response.get("isError") is True:
        return True
    if response.get("success") is False or response.get("interrupted") is True:
        return True
    for key in ("exit_code", "exitCode", "returncode"):
        code = response.get(key)
        if isinstance(code, int) and not isinstance(code, bool) and code != 0:
            return True
    return bool(response.get("error"))


class Hook:
    def __init__(self, dialect: Dialect, payload: Mapping[str, Any],
                 env: Mapping[str, str]) -> None:
        self.dialect = dialect
        self.payload = payload
        root = (env.get(dialect.project_dir_env) if dialect.project_dir_env else None) \
            or payload.get("cwd") or os.getcwd()
        # GOVERNOR_WORKSPACE=snapshot[:DIR]: the governor shares no disk (rules §11).
        mode = env.get("GOVERNOR_WORKSPACE", "")
        self.snapshot = mode == "snapshot" or mode.startswith("snapshot:")
        if mode.startswith("snapshot:") and mode.removeprefix("snapshot:"):
            root = mode.removeprefix("snapshot:")
        self.workspace = Workspace(Path(str(root)))
        self.env = env
        self.agent: AgentSession | None = None

    def session(self) -> AgentSession:
        """The agent session; raises ConfigurationError when the environment names no governor."""
        if self.agent is None:
            stop = self.payload.get("hook_event_name") == "Stop"
            client = GovernorClient(
                Config.from_env(self.env),
                timeout=STOP_BUDGET_SECONDS if stop else EVENT_TIMEOUT_SECONDS,
                connect_timeout=CONNECT_TIMEOUT_SECONDS, retries=1 if stop else 0,
                budget=STOP_BUDGET_SECONDS if stop else EVENT_BUDGET_SECONDS)
            external_id = f"{self.dialect.name}:{self.payload.get('session_id') or 'unknown'}"
            self.agent = AgentSession(client, self.workspace, external_id=external_id,
                                      snapshot=self.snapshot)
            # A stop waits for a background upload only within its budget, then says so.
            self.agent.upload_wait = STOP_BUDGET_SECONDS / 2
        return self.agent

    def upload_in_background(self) -> None:
        """Snapshot mode: upload the workspace after a tool use in a process of its own, so a
        stop sends only the remainder (one upload at a time: a busy one makes this one skip)."""
        with self.workspace.directory() as state_dir, state_dir.append(UPLOAD_LOG) as output:
            subprocess.Popen(  # noqa: S603 - this interpreter, this package, fixed arguments
                # -P: the current directory (the workspace, which may hold a `governor_client`
                # of its own) is not on the module path.
                [sys.executable, "-P", "-m", "governor_client", "--workspace",
                 f"snapshot:{self.workspace.root}", "snapshot", "--background"],
                stdin=subprocess.DEVNULL, stdout=output, stderr=output,
                env=dict(self.env), start_new_session=True, close_fds=True)

    def model(self) -> ModelInfo:
        name = self.payload.get("model")
        if isinstance(name, str) and name:
            with self.workspace.state() as state:
                state.model = name
        else:
            name = self.workspace.peek().model or self.dialect.default_model
        return {"provider": self.dialect.provider, "model": name}

    def queue_then_send(self, *records: harness.Record) -> None:
        agent = self.session()
        agent.queue(*records)
        agent.flush()

    # --- events --------------------------------------------------------------------------------

    def run(self) -> dict[str, Any] | None:
        """Handle the event; the JSON to print on stdout, if any."""
        event = self.payload.get("hook_event_name")
        if event == "Stop":
            return self.stop()
        try:
            if event == "SessionStart":
                self.model()
                self.session().status()
            elif event == "UserPromptSubmit":
                self.queue_then_send(harness.prompt(str(self.payload.get("prompt") or "")))
                self.session().status()
            elif event in ("PostToolUse", "PostToolUseFailure"):
                self.tool_use(failed=event == "PostToolUseFailure")
            elif event == "SessionEnd":
                self.queue_then_send(harness.end("aborted"))
        except GovernorError as error:
            # Nothing to decide here: what could not be sent stays queued for the next hook.
            print(f"governor-agent: {event}: {error}", file=sys.stderr)
        return None

    def tool_use(self, *, failed: bool) -> None:
        name = str(self.payload.get("tool_name") or "unknown-tool")
        response = self.payload.get("tool_response")
        error = None
        if failed:
            interrupted = self.payload.get("is_interrupt") is True
            output: Any = self.payload.get("error") or "the tool call failed"
            error = {"name": "ToolUseFailure",
                     "code": "TOOL_INTERRUPTED" if interrupted else "TOOL_FAILED"}
        else:
            output = response if response is not None else ""
            if tool_failed(response):
                error = {"name": "ToolUseFailure", "code": "TOOL_FAILED"}
        call_id = self.payload.get("tool_use_id")
        self.queue_then_send(harness.tool(
            name, self.payload.get("tool_input", {}), output, model=self.model(), error=error,
            call_id=str(call_id) if call_id else None))
        if self.snapshot:
            self.upload_in_background()
        if is_governor_tool(name):
            self.session().status()  # a contract may have begun or ended: remember which

    def stop(self) -> dict[str, Any] | None:
        records: list[harness.Record] = []
        last = self.payload.get("last_assistant_message")
        if isinstance(last, str) and last.strip():
            records.append(harness.say(last, model=self.model()))
        records.append(harness.end())
        try:
            self.queue_then_send(*records)
            answer = self.session().turn_stop()
        except Exception as error:  # any failure at a stop must fail safe, whatever it is
            return self.stop_without_governor(error)
        with self.workspace.state() as state:
            state.unasked_stops = 0
        if answer["action"] == "steer":
            self.steer(answer["message"])
            return {"decision": "block", "reason": answer["message"]}
        return {"systemMessage": answer["message"]} if answer["message"] else None

    def steer(self, message: str) -> None:
        """The steering message is what the agent works on next: it opens the next turn."""
        try:
            self.queue_then_send(harness.prompt(message, source=harness.PLUGIN_SOURCE))
        except GovernorError as error:
            print(f"governor-agent: Stop: {error}", file=sys.stderr)

    def stop_without_governor(self, error: Exception) -> dict[str, Any] | None:
        state = self.workspace.peek()
        if not state.contract_known:
            return {"systemMessage": f"Reliability Governor not reached ({error}); no completion "
                                     "contract is known in this session, so the stop is allowed."}
        contract = f"completion contract{f' {state.contract_id}' if state.contract_id else ''}"
        unasked = self.count_unasked_stop()
        if unasked >= UNASKED_STOPS_ALLOWED_AT:
            message = (
                f"{UNVERIFIED} ({error}) at {unasked} stops in a row, so this stop is allowed "
                f"without verification. The {contract} ({state.contract_state}) is NOT verified: "
                "do not report the task as complete."
            )
            # Spooled in the workspace; in the session log once the governor answers again.
            self.spool(harness.hook("Stop", self.dialect.name, "pass", message))
            return {"systemMessage": message}
        reason = (
            f"The Reliability Governor could not be reached or refused the stop ({error}) while "
            f"the {contract} is {state.contract_state}. Completion cannot be verified now, so do "
            "not claim the task is complete. Tell the user that verification is unavailable and "
            "what remains unverified; once the governor answers again, stop again to have the "
            f"checks evaluated. (Unverified stop {unasked} in a row; stop "
            f"{UNASKED_STOPS_ALLOWED_AT} is allowed, marked unverified.)"
        )
        # Spooled only (the governor is not answering): it opens the next turn once sent.
        self.spool(harness.prompt(reason, source=harness.PLUGIN_SOURCE))
        return {"decision": "block", "reason": reason}

    def count_unasked_stop(self) -> int:
        """This stop's place among the stops in a row at which the governor could not be asked;
        the count restarts after the stop that is allowed. A count that cannot be kept is taken
        as reached: a blocked stop must never repeat without bound."""
        try:
            with self.workspace.state() as state:
                count = state.unasked_stops + 1
                state.unasked_stops = 0 if count >= UNASKED_STOPS_ALLOWED_AT else count
                return count
        except GovernorError:
            return UNASKED_STOPS_ALLOWED_AT

    def spool(self, record: harness.Record) -> None:
        with contextlib.suppress(GovernorError):  # unconfigured: no session to queue for
            self.session().queue(record)


def main(dialect_name: str, stdin: IO[str] | None = None, stdout: IO[str] | None = None,
         env: Mapping[str, str] | None = None) -> int:
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    try:
        payload = json.loads(stdin.read() or "{}")
    except ValueError as exc:
        print(f"governor-agent: the hook input is not JSON: {exc}", file=sys.stderr)
        return 0
    if not isinstance(payload, dict):
        print("governor-agent: the hook input is not a JSON object", file=sys.stderr)
        return 0
    hook = Hook(DIALECTS[dialect_name], payload, os.environ if env is None else env)
    answer = hook.run()
    if answer is not None:
        stdout.write(json.dumps(answer, ensure_ascii=False) + "\n")
        stdout.flush()
    return 0

"""`governor-agent`: the agent side of the Reliability Governor from a shell.

Configuration comes from the environment only: GOVERNOR_URL, and GOVERNOR_TOKEN or
GOVERNOR_TOKEN_FILE (a token never goes on a command line, where `ps` shows it). Every command
works in one workspace (`--workspace`, GOVERNOR_WORKSPACE, or the current directory) whose
`.governor/session.json` names its session. Answers are JSON on stdout; a refusal is the
server's JSON error on stderr with exit status 1 (2 for usage and configuration errors).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from governor_client import harness, hooks
from governor_client.client import GovernorClient
from governor_client.config import Config
from governor_client.errors import ConfigurationError, GovernorError
from governor_client.harness import ModelInfo
from governor_client.session import AgentSession, review_outcome
from governor_client.snapshot import UploadInProgress
from governor_client.workspace import Workspace

Command = Callable[[AgentSession, argparse.Namespace], Any]
DEFAULT_WAIT_SECONDS = 300


def _read_json(source: str) -> Any:
    text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    return json.loads(text)


def _read_events(source: str) -> list[dict[str, Any]]:
    """A JSON array, {"events": [...]}, or one event per line."""
    text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    try:
        value = json.loads(text)
    except ValueError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    if isinstance(value, dict) and "events" in value:
        value = value["events"]
    return value if isinstance(value, list) else [value]


def _model(args: argparse.Namespace) -> ModelInfo:
    return {"provider": args.provider, "model": args.model}


def _progress(text: str) -> None:
    print(f"governor-agent: {text}", file=sys.stderr, flush=True)


def wait_for_review(agent: AgentSession, limit: float) -> dict[str, Any]:
    started = time.monotonic()
    for review in agent.review_polls(limit):
        if review is not None:
            _progress(f"{review['stage']} review {review['status']} "
                      f"({time.monotonic() - started:.0f}s)")
    return review_outcome(agent, agent.status(), time.monotonic() - started)


def cmd_session(agent: AgentSession, args: argparse.Namespace) -> Any:
    agent.ensure()
    return agent.status()


def cmd_status(agent: AgentSession, args: argparse.Namespace) -> Any:
    return agent.status()


def cmd_events(agent: AgentSession, args: argparse.Namespace) -> Any:
    return agent.post_raw(_read_events(args.file))


def cmd_prompt(agent: AgentSession, args: argparse.Namespace) -> Any:
    agent.record(harness.prompt(args.text))
    return {"recorded": "prompt"}


def cmd_tool(agent: AgentSession, args: argparse.Namespace) -> Any:
    error = {"name": "ToolError", "code": "TOOL_FAILED"} if args.error else None
    agent.record(harness.tool(args.name, args.arguments, args.output, model=_model(args),
                              error=error))
    return {"recorded": "tool", "name": args.name, "is_error": bool(args.error)}


def cmd_say(agent: AgentSession, args: argparse.Namespace) -> Any:
    agent.record(harness.say(args.text, model=_model(args)))
    return {"recorded": "say"}


def cmd_end_turn(agent: AgentSession, args: argparse.Namespace) -> Any:
    agent.record(harness.end())
    return {"recorded": "end"}


def cmd_assess(agent: AgentSession, args: argparse.Namespace) -> Any:
    return agent.assess(_read_json(args.file), kind="code" if args.code else "general")


def cmd_draft(agent: AgentSession, args: argparse.Namespace) -> Any:
    context = Path(args.context_file).read_text(encoding="utf-8") if args.context_file else None
    return agent.client.draft(agent.ensure(), contract_kind="code" if args.code else "general",
                              objective=args.objective, context=context)


def cmd_begin(agent: AgentSession, args: argparse.Namespace) -> Any:
    answer = agent.begin(_read_json(args.file), kind="code" if args.code else "general")
    if answer["status"] == "review-pending" and args.wait > 0:
        if "review_url" in answer:
            _progress(f"waiting for review: {answer['review_url']}")
        return {**wait_for_review(agent, args.wait), "assessment": answer["assessment"]}
    return answer


def cmd_review(agent: AgentSession, args: argparse.Namespace) -> Any:
    if args.wait > 0:
        return wait_for_review(agent, args.wait)
    answer = agent.client.review(agent.ensure())
    if answer["review"] is not None:
        answer["review"]["review_url"] = agent.client.absolute(answer["review"]["review_url"])
    return answer


def cmd_withdraw(agent: AgentSession, args: argparse.Namespace) -> Any:
    return agent.withdraw()


def cmd_verify(agent: AgentSession, args: argparse.Namespace) -> Any:
    return agent.verify()


def cmd_turn_stop(agent: AgentSession, args: argparse.Namespace) -> Any:
    return agent.turn_stop()


def cmd_abstain(agent: AgentSession, args: argparse.Namespace) -> Any:
    return agent.abstain(args.reason)


def cmd_profiles(agent: AgentSession, args: argparse.Namespace) -> Any:
    return {"profiles": agent.client.code_profiles()}


def cmd_outcome_profiles(agent: AgentSession, args: argparse.Namespace) -> Any:
    return {"profiles": agent.client.outcome_profiles()}


def cmd_outcome(agent: AgentSession, args: argparse.Namespace) -> Any:
    if args.observe:
        return agent.client.outcome_observe(agent.ensure())
    return agent.client.outcome_status(agent.ensure())


def cmd_run(agent: AgentSession, args: argparse.Namespace) -> Any:
    run = agent.request_verification(args.profile)
    _progress(f"run {run['id']} of {args.profile} {run['state']}")
    for polled in agent.run_polls(run["id"], args.wait):
        run = polled
        _progress(f"run {run['id']} of {args.profile} {run['state']}")
    return run


def cmd_snapshot(agent: AgentSession, args: argparse.Namespace) -> Any:
    if args.background:  # a hook's: skip when another upload of this workspace is running
        try:
            return agent.upload(wait=0)
        except UploadInProgress:
            return {"skipped": "another upload of this workspace is running"}
    return agent.upload()


def progress_bar(sent: int, blobs: int, sent_bytes: int, total: int) -> None:
    """The upload's progress on stderr: a bar on a terminal, a line at the end otherwise."""
    done = sent_bytes / total if total else 1.0
    line = (f"[{'#' * int(done * 30):<30}] {sent}/{blobs} blobs, "
            f"{sent_bytes / 1e6:.1f}/{total / 1e6:.1f} MB")
    if sys.stderr.isatty():
        print(f"\rgovernor-agent: uploading {line}", end="" if sent < blobs else "\n",
              file=sys.stderr, flush=True)
    elif sent == blobs:
        _progress(f"uploaded {line}")


def workspace_mode(value: str) -> tuple[str, bool]:
    """GOVERNOR_WORKSPACE / --workspace: a directory, or `snapshot` (the current directory) or
    `snapshot:DIR`, for a governor that shares no disk with this machine (rules §11)."""
    if value == "snapshot":
        return ".", True
    if value.startswith("snapshot:"):
        return value.removeprefix("snapshot:") or ".", True
    return value, False


def cmd_export(agent: AgentSession, args: argparse.Namespace) -> Any:
    text = agent.client.export_session(agent.ensure())
    if args.output == "-":
        sys.stdout.write(text)
        return None
    Path(args.output).write_text(text, encoding="utf-8")
    return {"exported": args.output, "lines": text.count("\n")}


def cmd_commit(agent: AgentSession, args: argparse.Namespace) -> Any:
    from governor_client.gitcommit import commit_certified

    return commit_certified(agent.client, agent.ensure(), agent.workspace.root,
                            message=args.message, push=args.push)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="governor-agent",
        description="Agent side of the Reliability Governor. Needs GOVERNOR_URL and "
                    "GOVERNOR_TOKEN or GOVERNOR_TOKEN_FILE in the environment.")
    workspace_help = ("the workspace directory, or snapshot[:DIR] to upload it to a governor "
                      "that shares no disk (default: GOVERNOR_WORKSPACE or .)")
    parser.add_argument("--workspace", default=os.environ.get("GOVERNOR_WORKSPACE") or ".",
                        help=workspace_help)
    # Also accepted after the command (`governor-agent mcp --workspace DIR`).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--workspace", default=argparse.SUPPRESS, help=workspace_help)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, handler: Command | None, text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=text, description=text, parents=[common])
        sub.set_defaults(handler=handler)
        return sub

    session = add("session", cmd_session, "start or resume this workspace's session")
    session.add_argument("--external-id", help="resume (or start) the session with this id")
    add("status", cmd_status, "the session's state, contract, attempts, terminal and review")
    events = add("events", cmd_events, "append Harness events: a JSON array, "
                                       "{\"events\": [...]} or JSON lines")
    events.add_argument("file", nargs="?", default="-", help="file, or - for stdin")
    prompt = add("prompt", cmd_prompt, "record a user prompt (opens a turn)")
    prompt.add_argument("text")
    tool = add("tool", cmd_tool, "record one tool call and its result")
    tool.add_argument("name")
    tool.add_argument("--arguments", default="{}", help="the call's arguments (JSON text)")
    tool.add_argument("--output", default="", help="the tool's result text")
    tool.add_argument("--error", action="store_true", help="the call failed")
    say = add("say", cmd_say, "record an assistant message")
    say.add_argument("text")
    for sub in (tool, say):
        sub.add_argument("--provider", default="governor-agent")
        sub.add_argument("--model", default="unspecified")
    add("end-turn", cmd_end_turn, "record the end of the current turn")
    for name, handler, text in (("assess", cmd_assess, "coverage preflight of a contract"),
                                ("begin", cmd_begin, "begin a contract (general or --code)")):
        sub = add(name, handler, text)
        sub.add_argument("file", nargs="?", default="-",
                         help="the contract body (JSON file, or - for stdin)")
        sub.add_argument("--code", action="store_true",
                         help="a code contract: the project's required profiles are added")
        if name == "begin":
            sub.add_argument("--wait", type=int, default=DEFAULT_WAIT_SECONDS,
                             help="seconds to wait for a required review (0: do not wait)")
    draft = add("draft", cmd_draft, "have the project's auxiliary model draft a contract "
                                     "(auxiliary-model authoring only)")
    draft.add_argument("objective")
    draft.add_argument("--code", action="store_true", help="a code contract draft")
    draft.add_argument("--context-file", help="background for the drafting model (never stored)")
    review = add("review", cmd_review, "the review's state; --wait for a decision")
    review.add_argument("--wait", type=int, default=0)
    add("withdraw", cmd_withdraw, "withdraw the pending contract proposal")
    add("verify", cmd_verify, "evaluate the active contract now (one attempt)")
    add("turn-stop", cmd_turn_stop, "the agent wants to stop: allow, or steer with a message")
    abstain = add("abstain", cmd_abstain, "end the contract without success, with a reason")
    abstain.add_argument("reason")
    add("profiles", cmd_profiles, "the project's trusted verifier profiles")
    add("outcome-profiles", cmd_outcome_profiles,
        "the project's outcome profiles (begin with outcome_profile to watch one)")
    outcome = add("outcome", cmd_outcome, "the outcome watched after delivery: status, "
                                          "observations, terminal")
    outcome.add_argument("--observe", action="store_true",
                         help="observe now first (at most once a minute)")
    run = add("run", cmd_run, "run a trusted verifier profile and wait for its result")
    run.add_argument("profile")
    run.add_argument("--wait", type=int, default=DEFAULT_WAIT_SECONDS)
    export = add("export", cmd_export, "the session's JSONL export (for python -m "
                                       "governor.verify)")
    export.add_argument("--output", "-o", default="-")
    snapshot = add("snapshot", cmd_snapshot, "upload the workspace as the session's newest "
                                             "snapshot (only the files the governor lacks; for "
                                             "a governor that shares no disk: "
                                             "GOVERNOR_WORKSPACE=snapshot)")
    snapshot.add_argument("--background", action="store_true",
                          help="do nothing when an upload of this workspace is running")
    commit = add("commit", cmd_commit, "commit the session's certified tree (refused unless the "
                                       "working tree is it and none of its .gitattributes "
                                       "converts a path on checkout) with the Governor-Session and "
                                       "Governor-Terminal trailers and the signed terminal as a "
                                       "note under refs/notes/governor")
    commit.add_argument("-m", "--message", help="the commit message (trailers are added)")
    commit.add_argument("--push", nargs=2, metavar=("REMOTE", "BRANCH"),
                        help="then push refs/notes/governor and the commit as BRANCH")
    git_hook = add("git-hook", None, "gate a git server's protected refs on certified commits "
                                     "(run as its pre-receive or update hook), or install it")
    git_hook.add_argument("hook", choices=["pre-receive", "update", "install"])
    git_hook.add_argument("args", nargs="*", help="the update hook's REF OLD NEW")
    git_hook.add_argument("--repo", help="the repository (install: the bare repository to "
                                         "install into; default: the hook's own)")
    git_hook.add_argument("--kind", choices=["pre-receive", "update"], default="pre-receive",
                          help="install: which hook to install (default pre-receive)")
    git_hook.add_argument("--protect", action="append", metavar="PATTERN",
                          help="install: a protected ref pattern (governor.protectedRefs)")
    git_hook.add_argument("--keys-file", help="install: governor.keysFile (offline mode)")
    git_hook.add_argument("--server", help="install: governor.server (online mode)")
    git_hook.add_argument("--token-file", help="install: governor.tokenFile (online mode)")
    gate = add("gate", None, "certify a pull request's change with no session (rules §19): "
                             "both trees read from git's objects (the head's code never runs "
                             "here), uploaded, judged in the governor's sandbox; the note of "
                             "a certified head added; exit 0 only when certified")
    gate.add_argument("--base", required=True, help="the revision the change is made on")
    gate.add_argument("--head", required=True, help="the revision to certify")
    gate.add_argument("--observe", action="store_true",
                      help="record and print what the gate would do; exit 0 whatever it finds")
    gate.add_argument("--repo", default=".", help="the git repository (default: .)")
    gate.add_argument("--server", help="the governor's URL (default: GOVERNOR_URL)")
    gate.add_argument("--token-file", help="a file holding the project's gate token (default: "
                                           "GOVERNOR_TOKEN or GOVERNOR_TOKEN_FILE)")
    add("mcp", None, "serve the governor's tools over MCP (stdio)")
    hook = add("hook", None, "handle a coding agent's hook event (JSON on stdin)")
    hook.add_argument("agent", choices=sorted(hooks.DIALECTS))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "hook":
        return hooks.main(args.agent)
    if args.command == "git-hook":
        from governor_client.gitcommit import hook_main

        if args.hook == "install" and not args.repo:
            print(json.dumps({"error": {"code": "USAGE", "message": "install needs --repo"}}),
                  file=sys.stderr)
            return 2
        return hook_main(args)
    env = dict(os.environ)
    if args.command == "gate":
        if args.server:
            env["GOVERNOR_URL"] = args.server
        if args.token_file:
            env.pop("GOVERNOR_TOKEN", None)
            env["GOVERNOR_TOKEN_FILE"] = args.token_file
    try:
        config = Config.from_env(env)
    except ConfigurationError as error:
        print(json.dumps(error.as_dict()), file=sys.stderr)
        return 2
    if args.command == "gate":
        from governor_client.gate import gate_main

        with GovernorClient(config) as client:
            return gate_main(client, args)
    with GovernorClient(config) as client:
        directory, snapshot = workspace_mode(args.workspace)
        agent = AgentSession(client, Workspace(directory),
                             external_id=getattr(args, "external_id", None),
                             snapshot=snapshot or args.command == "snapshot",
                             progress=progress_bar)
        if args.command == "mcp":
            from governor_client import mcp_server  # the MCP SDK is slow to import: only here

            mcp_server.serve(agent)
            return 0
        try:
            result = args.handler(agent, args)
        except GovernorError as error:
            print(json.dumps(error.as_dict(), ensure_ascii=False), file=sys.stderr)
            return 1
        except (OSError, ValueError) as error:
            print(json.dumps({"error": {"code": "USAGE", "message": str(error)}}),
                  file=sys.stderr)
            return 2
    if result is not None:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0

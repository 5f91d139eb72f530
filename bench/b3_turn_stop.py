"""B3. Turn-stop cost against log length (docs/benchmarks.md).

One contract of 20 checks (8 file, 2 JSON, 6 tool, 2 code, 2 trajectory) in sessions whose logs
hold 1k, 10k and 100k events after the contract start. Exactly one check (a missing CHANGELOG
entry) keeps failing, so with `max_attempts` 10 every one of the first nine turn-stops of a
session is a repair attempt that evaluates all 20 checks; those nine are timed. The time is the
server's: around Django's test `Client.post` of `POST /api/v1/sessions/{id}/turn-stop`, which runs
the whole stack (middleware, bearer authentication, the view, the service, the SQL) in-process on a
kept-open connection. All sessions are built first (untimed, through `events_append` in batches of
1,000, as the API appends); then round by round every session gets its next turn-stop, in a
shuffled order, so drift on the shared machine hits all sizes alike.

The two code checks count only results of the tree the attempt judges (rules §10.3): the
verification events carry the session's workspace tree as the server names it
(`session_tree_reference`, the id and exclusions digest a run's private copy is hashed to) and
no environment, as a profile without environment directories records. Every timed answer must
be a repair attempt of all 20 checks in which exactly the CHANGELOG check failed, so a change
that made the code checks stale (or any other check fail) stops the benchmark instead of
timing another path.

Goal: median at the largest size ≤ 2× the median at the smallest (the gate); the absolute
medians are reported for context.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from bench.common import (
    database_env,
    database_labels,
    database_version,
    django_setup,
    isolated,
    markdown_table,
    median,
    p95,
    postgres_url,
    progress,
)

NAME = "B3"
SIZES = (1_000, 10_000, 100_000)
BATCH = 1000
STOPS = 9  # max_attempts 10: attempts 1-9 are repairs, the 10th would end the contract
MAX_ATTEMPTS = 10
RATIO_GOAL = 2.0  # median at the largest size / median at the smallest
PREFIX_TURNS = 10  # 1,000 events before the contract starts
TURN_EVENTS = 100
MIN_SIZE = 700  # 7 turns, 35 tool calls: `ran-tests` needs the 31st (its third run_tests)
TOOL_STEPS = 5  # per turn, each one tool round trip
TOOL_DELTAS = 5  # tool-call-delta chunks per tool step
TEXT_DELTAS = 20  # text-delta chunks of the closing text step of a turn
VERIFY_ROUNDS = 4  # code-verification rounds spread over the log after the contract start
PROFILES = (("unit-tests", "sha256:" + "a" * 64), ("lint", "sha256:" + "b" * 64))
FAILING_CHECK = "changelog-release-entry"

# Tool names. After the contract start the agent cycles through this schedule (18 names, some
# more often than others); before it, the schedule also holds the two tools the contract forbids,
# and some results are errors.
POST_SCHEDULE = (
    "read_file", "edit_file", "bash", "grep", "read_file", "run_tests", "write_file", "glob",
    "list_dir", "edit_file", "bash", "apply_patch", "read_file", "web_fetch", "web_search",
    "format_code", "lint", "run_tests", "git_status", "git_diff", "python", "read_file",
    "http_request", "bash", "git_commit",
)
PRE_SCHEDULE = (*POST_SCHEDULE[:12], "git_push", *POST_SCHEDULE[12:], "delete_file")
PRE_ERROR_EVERY = 7  # before the contract start, every 7th tool result is an error

FILES = {
    "README.md": "# Bench app\n\n## Install\n\n    pip install bench-app\n\n## Usage\n\n"
                 "    bench-app --help\n",
    "src/app.py": "def main() -> None:\n    print(\"hello\")\n",
    "VERSION": "1.2.0\n",
    "CHANGELOG.md": "# Changelog\n\n## 1.1.0\n\n- First release.\n",
    "package.json": json.dumps({"name": "bench-app", "version": "1.2.0"}, indent=2) + "\n",
    "config/settings.json": json.dumps({"features": [{"name": "fast-path", "enabled": True}]},
                                       indent=2) + "\n",
}
PATHS = ("README.md", "src/app.py", "CHANGELOG.md", "src/util.py", "tests/test_app.py")
COMMANDS = ("python -m pytest -q tests", "ls -la src", "pytest tests/test_app.py -x",
            "git log --oneline -5")
WORDS = ("the", "file", "now", "tests", "pass", "I", "will", "update", "check", "function",
         "release", "version", "readme", "install", "section", "done", "next", "config")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sessions-per-size", type=int, default=3, metavar="N",
                        help=f"B3: sessions per log size, {STOPS} timed turn-stops each "
                             "(default 3)")
    parser.add_argument("--b3-sizes", default=",".join(map(str, SIZES)), metavar="N,N,...",
                        help="B3: events after the contract start, smallest first, each a "
                             f"multiple of {TURN_EVENTS} and at least {MIN_SIZE} (default "
                             f"{','.join(map(str, SIZES))})")


def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = [int(size) for size in str(getattr(args, "b3_sizes", "")).split(",") if size]
    return measure(sizes or list(SIZES), args.sessions_per_size, postgres_url(args.postgres),
                   args.profile)


def measure(sizes: list[int], sessions: int, postgres: str | None,
            profile: bool = False) -> dict[str, Any]:
    """B3 at these sizes with `sessions` sessions a size, on SQLite and, when `postgres` names
    a server, on PostgreSQL: each database in a fresh interpreter."""
    if any(size % TURN_EVENTS or size < MIN_SIZE for size in sizes):
        raise ValueError(f"B3 sizes must be multiples of {TURN_EVENTS} of at least {MIN_SIZE}: "
                         f"{sizes}")
    params = {"sizes": sizes, "sessions": sessions, "stops": STOPS, "batch": BATCH,
              "prefix_events": PREFIX_TURNS * TURN_EVENTS}
    result: dict[str, Any] = {"params": params, "databases": {}}
    for label in database_labels(postgres):
        with database_env(label, postgres) as env:
            result["databases"][label] = isolated(measure_database, label, params, profile,
                                                  env=env)
    return result


def contract_body() -> dict[str, Any]:
    """The 20 checks (wire form) and the claims that cover them."""
    (unit, _), (lint, _) = PROFILES
    checks: list[dict[str, Any]] = [
        {"id": "readme-exists", "kind": "file_exists", "path": "README.md"},
        {"id": "app-exists", "kind": "file_exists", "path": "src/app.py"},
        {"id": "stale-build-removed", "kind": "file_absent", "path": "build/stale.txt"},
        {"id": "readme-install", "kind": "file_contains", "path": "README.md",
         "text": "## Install"},
        {"id": FAILING_CHECK, "kind": "file_contains", "path": "CHANGELOG.md",
         "text": "## 1.2.0"},
        {"id": "app-no-todo", "kind": "file_not_contains", "path": "src/app.py", "text": "TODO"},
        {"id": "readme-no-fixme", "kind": "file_not_contains", "path": "README.md",
         "text": "FIXME"},
        {"id": "version-file", "kind": "file_equals", "path": "VERSION", "text": "1.2.0\n"},
        {"id": "package-version", "kind": "json_equals", "path": "package.json",
         "pointer": "/version", "value": "1.2.0"},
        {"id": "fast-path-enabled", "kind": "json_equals", "path": "config/settings.json",
         "pointer": "/features/0/enabled", "value": True},
        {"id": "wrote-files", "kind": "tool_succeeded", "tool": "write_file"},
        {"id": "ran-tests", "kind": "tool_succeeded", "tool": "run_tests", "min_count": 3},
        {"id": "edited-readme", "kind": "tool_succeeded", "tool": "edit_file",
         "arguments_contain": "README.md"},
        {"id": "ran-pytest", "kind": "tool_succeeded", "tool": "bash",
         "arguments_contain": "pytest", "min_count": 2},
        {"id": "no-push", "kind": "tool_not_called", "tool": "git_push"},
        {"id": "no-delete", "kind": "tool_not_called", "tool": "delete_file"},
        {"id": "unit-tests-pass", "kind": "code_verification_succeeded", "profile": unit},
        {"id": "lint-passes", "kind": "code_verification_succeeded", "profile": lint},
        {"id": "no-tool-errors", "kind": "no_tool_errors"},
        {"id": "clean-trajectory", "kind": "no_tool_errors"},
    ]

    def claim(claim_id: str, statement: str, check_ids: list[str]) -> dict[str, Any]:
        return {"id": claim_id, "statement": statement, "importance": "critical",
                "verification": "deterministic", "check_ids": check_ids}

    ids = [check["id"] for check in checks]
    return {
        "objective": "Release bench-app 1.2.0: docs, version, changelog, tests and lint",
        "claims": [
            claim("docs", "README documents installation and has no FIXME", ids[0:1] + ids[3:4]
                  + ids[6:7]),
            claim("release", "Version 1.2.0 is declared everywhere and in the changelog",
                  ids[4:5] + ids[7:9]),
            claim("app", "The app exists, has no TODO, the fast path is on, stale build gone",
                  ids[1:3] + ids[5:6] + ids[9:10]),
            claim("process", "Files were written and tests run, nothing pushed or deleted, "
                             "no tool failed", ids[10:16] + ids[18:20]),
            claim("code", "The unit tests and the linter pass on the final workspace",
                  ids[16:18]),
        ],
        "checks": checks,
        "max_attempts": MAX_ATTEMPTS,
    }


# --- in the child: one database, fresh Django -------------------------------------------------


class LogWriter:
    """Harness events as a streaming model agent sends them: every step streams its assistant
    message as `assistant/chunk` events before the message itself. Seqs are the server's (the
    events carry none); `sync` after the governor appended events of its own."""

    def __init__(self, rng: random.Random, next_seq: int) -> None:
        self.rng = rng
        self.seq = next_seq
        self.turn = 0
        self.calls = 0
        self.ids = 0
        self.time = 1_700_000_000_000
        self.counts: Counter[str] = Counter()
        self.uses: Counter[str] = Counter()

    def sync(self, next_seq: int) -> None:
        self.seq = next_seq

    def _add(self, out: list[dict[str, Any]], kind: str, data: dict[str, Any],
             **envelope: Any) -> int:
        seq = self.seq
        out.append({"type": kind, "time": self.time, "data": data, **envelope})
        self.seq += 1
        self.time += self.rng.randint(5, 60)
        self.counts[kind] += 1
        return seq

    def _id(self, prefix: str) -> str:
        self.ids += 1
        return f"{prefix}{self.ids}"

    def _text(self, words: int) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(words))

    def turn_events(self, *, schedule: tuple[str, ...], text_deltas: int = TEXT_DELTAS,
                    error_every: int = 0) -> list[dict[str, Any]]:
        """One turn: the user's message, TOOL_STEPS tool steps and a closing text step.
        100 events with the default `text_deltas`."""
        out: list[dict[str, Any]] = []
        self.turn += 1
        turn = self.turn
        self._add(out, "turn/start", {"turn": turn})
        self._add(out, "user/message", {"role": "user", "id": self._id("u"),
                                        "content": [{"type": "text", "text": self._text(12)}],
                                        "source": {"kind": "user"}}, surfaceOp="append")
        for step in range(1, TOOL_STEPS + 1):
            name = schedule[self.calls % len(schedule)]
            failed = error_every > 0 and self.calls % error_every == error_every - 1
            self._tool_step(out, turn, step, name, self._arguments(name), failed)
            self.calls += 1
        self._text_step(out, turn, TOOL_STEPS + 1, text_deltas)
        self._add(out, "turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        return out

    def _arguments(self, name: str) -> str:
        n = self.uses[name]  # each tool cycles through its own paths and commands
        self.uses[name] += 1
        if name == "bash":
            arguments: dict[str, Any] = {"command": COMMANDS[n % len(COMMANDS)]}
        elif name in ("read_file", "write_file", "edit_file", "apply_patch", "format_code",
                      "lint"):
            arguments = {"path": PATHS[n % len(PATHS)]}
            if name == "write_file":
                arguments["content"] = self._text(30)
            elif name in ("edit_file", "apply_patch"):
                arguments |= {"old": self._text(6), "new": self._text(8)}
        elif name == "run_tests":
            arguments = {"target": "tests", "args": ["-q"]}
        elif name == "grep":
            arguments = {"pattern": self.rng.choice(WORDS), "path": "src"}
        else:
            arguments = {"query": self._text(5)}
        return json.dumps(arguments)

    def _chunk(self, out: list[dict[str, Any]], turn: int, step: int,
               chunk: dict[str, Any]) -> int:
        return self._add(out, "assistant/chunk", {"turn": turn, "step": step, "chunk": chunk})

    def _stream(self, out: list[dict[str, Any]], turn: int, step: int, block: dict[str, Any],
                deltas: list[dict[str, Any]], finish: str) -> list[int]:
        seqs = [self._chunk(out, turn, step, {"type": "block-start", "index": 0,
                                              "blockType": block["type"]})]
        seqs += [self._chunk(out, turn, step, {"index": 0, **delta}) for delta in deltas]
        seqs.append(self._chunk(out, turn, step, {"type": "block-end", "index": 0,
                                                  "block": block}))
        usage = {"inputTokens": self.rng.randint(2_000, 60_000),
                 "outputTokens": self.rng.randint(10, 400)}
        seqs.append(self._chunk(out, turn, step, {"type": "usage", "usage": usage}))
        seqs.append(self._chunk(out, turn, step, {"type": "finish", "reason": {"kind": finish}}))
        message = {"role": "assistant", "id": self._id("a"), "content": [block],
                   "source": {"kind": "model", "provider": "bench", "model": "scripted"}}
        self._add(out, "assistant/message", {"turn": turn, "step": step, "message": message,
                                             "usage": usage},
                  surfaceOp="append", sourceEventSeqs=seqs)
        return seqs

    def _tool_step(self, out: list[dict[str, Any]], turn: int, step: int, name: str,
                   arguments: str, failed: bool) -> None:
        call_id = self._id("call-")
        self._add(out, "step/start", {"turn": turn, "step": step})
        cut = [len(arguments) * i // TOOL_DELTAS for i in range(TOOL_DELTAS + 1)]
        deltas = [{"type": "tool-call-delta", "id": call_id, "name": name,
                   "argumentsDelta": arguments[cut[i]:cut[i + 1]]} for i in range(TOOL_DELTAS)]
        block = {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments}
        self._stream(out, turn, step, block, deltas, "tool-calls")
        call_seq = self._add(out, "tool/call", {"turn": turn, "step": step, "callId": call_id,
                                                "name": name, "arguments": arguments})
        text = (f"error: {name} failed: {self._text(8)}" if failed
                else self._text(self.rng.randint(10, 60)))
        result = {"type": "tool-result", "toolCallId": call_id,
                  "content": [{"type": "text", "text": text}], "isError": failed}
        self._add(out, "tool/result",
                  {"turn": turn, "step": step,
                   "message": {"role": "user", "id": self._id("r"), "content": [result],
                               "source": {"kind": "tool", "callId": call_id}}},
                  surfaceOp="append", sourceEventSeqs=[call_seq])
        self._add(out, "step/end", {"turn": turn, "step": step})

    def _text_step(self, out: list[dict[str, Any]], turn: int, step: int, deltas: int) -> None:
        self._add(out, "step/start", {"turn": turn, "step": step})
        pieces = [self._text(self.rng.randint(1, 4)) + " " for _ in range(deltas)]
        block = {"type": "text", "text": "".join(pieces)}
        self._stream(out, turn, step, block,
                     [{"type": "text-delta", "text": piece} for piece in pieces], "stop")
        self._add(out, "step/end", {"turn": turn, "step": step})


class QueryCounter:
    """A connection `execute_wrapper` counting statements (and keeping them, with the time their
    `execute` took, when asked)."""

    def __init__(self, keep: bool = False) -> None:
        self.count = 0
        self.keep = keep
        self.statements: list[tuple[str, Any, float]] = []

    def __call__(self, execute: Callable[..., Any], sql: str, params: Any, many: bool,
                 context: Any) -> Any:
        self.count += 1
        if not self.keep or many:
            return execute(sql, params, many, context)
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.statements.append((sql, params, time.perf_counter() - start))


def measure_database(label: str, params: dict[str, Any], profile: bool) -> dict[str, Any]:
    django_setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from django.test import Client

    from governor.domain import lifecycle
    from governor.models import Project, Session, SessionState
    from governor.services.events import events_append, governor_event_append
    from governor.services.sessions import session_create
    from governor.services.tokens import token_create
    from governor.services.trees import session_tree_reference
    from verification.models import VerifierProfile

    tag = f"[B3 {label}]"
    workspace = settings.VAR_DIR / "workspace"
    for path, text in FILES.items():
        (workspace / path).parent.mkdir(parents=True, exist_ok=True)
        (workspace / path).write_text(text)
    # The agent's 20 checks and the protected-paths and tamper-free checks begin injects for a
    # contract that names a profile (runner control, rules §17.3; the tamper scan, §17.5).
    project = Project.objects.create(slug="bench", name="Bench", review_mode="off",
                                     max_checks=22, max_attempts=MAX_ATTEMPTS,
                                     workspace_roots=[str(settings.VAR_DIR)])
    for profile_id, profile_receipt in PROFILES:
        VerifierProfile.objects.create(project=project, profile_id=profile_id,
                                       description=f"{profile_id} (bench)",
                                       argv=["/bin/true"], receipt=profile_receipt)
    owner = get_user_model().objects.create_user("bench-agent-owner")
    token, secret = token_create(project=project, name="bench", owner=owner)
    client = Client(HTTP_HOST="localhost", HTTP_AUTHORIZATION=f"Bearer {secret}")
    contract = contract_body()
    checks = contract["checks"]
    body = json.dumps(contract)

    def analyze() -> None:
        """PostgreSQL: planner statistics for the freshly loaded events, as autovacuum keeps them
        on a server in use (without them the plans differ and drift while autovacuum catches
        up). SQLite keeps none unless asked, and Django never asks, so it is left alone."""
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")

    def next_seq(session: Session) -> int:
        return SessionState.objects.get(session=session).next_seq

    def append(session: Session, events: list[dict[str, Any]], done: list[int],
               total: int, what: str) -> None:
        for i in range(0, len(events), BATCH):
            batch = events[i:i + BATCH]
            events_append(session=session, envelopes=batch,
                          raws=[json.dumps(e, separators=(",", ":")) for e in batch])
            done[0] += len(batch)
            if done[0] % 20_000 < len(batch) or done[0] == total:
                progress(f"{tag} {what}: {done[0]:,}/{total:,} events appended")

    def verification_round(session: Session, round_no: int) -> None:
        """A result of each profile, as a read-only run records it: on a private copy of the
        workspace's tree (`treeBefore` = `tree`, named as the server hashes the workspace),
        with no environment directories."""
        tree = session_tree_reference(session)
        with transaction.atomic():
            state = SessionState.objects.select_for_update().get(session=session)
            started_after = state.next_seq - 1  # both runs claimed after the last agent event
            for profile_id, profile_receipt in PROFILES:
                passed = not (round_no == 2 and profile_id == "unit-tests")
                stream = {"bytes": 120, "truncated": False,
                          "receipt": "sha256:" + uuid.uuid4().hex * 2}
                governor_event_append(
                    session=session, state=state, type=lifecycle.CODE_VERIFICATION,
                    data={"verificationId": str(uuid.uuid4()), "profile": profile_id,
                          "profileReceipt": profile_receipt,
                          "startedAfterSeq": started_after, "passed": passed,
                          "failureKind": None if passed else "exit",
                          "exitCode": 0 if passed else 1, "signal": None,
                          "durationMs": 800, "sandboxMode": "read-only",
                          "stdout": stream, "stderr": {**stream, "bytes": 0},
                          "treeBefore": tree, "tree": tree, "environment": None})
            state.save(update_fields=["next_seq", "head", "trace", "lifecycle", "updated_at"])

    def build(size: int, index: int, what: str) -> tuple[Session, dict[str, int]]:
        """A session whose log holds `size` events after its contract start: the session's
        reference (rules §17.1) and the contract event, VERIFY_ROUNDS rounds of code
        verifications and agent turns."""
        session, _ = session_create(token=token,
                                    workspace={"kind": "path", "path": str(workspace)})
        writer = LogWriter(random.Random(f"{label}-{size}-{index}"), 0)  # noqa: S311
        agent_events = size - 2 - VERIFY_ROUNDS * len(PROFILES)
        turns, rest = divmod(agent_events, TURN_EVENTS)
        shortfall = (TURN_EVENTS - rest) % TURN_EVENTS
        if rest:
            turns += 1
        assert turns >= VERIFY_ROUNDS and shortfall < TEXT_DELTAS, size
        total = PREFIX_TURNS * TURN_EVENTS + agent_events
        done = [0]
        prefix = [e for _ in range(PREFIX_TURNS)
                  for e in writer.turn_events(schedule=PRE_SCHEDULE,
                                              error_every=PRE_ERROR_EVERY)]
        append(session, prefix, done, total, what)
        response = client.post(f"/api/v1/sessions/{session.pk}/contracts", data=body,
                               content_type="application/json")
        assert response.status_code == 201, response.content
        started = response.json()["contract"]["startedAtSeq"]
        writer.sync(next_seq(session))
        writer.counts.clear()
        rounds_after = {turns * k // VERIFY_ROUNDS for k in range(1, VERIFY_ROUNDS + 1)}
        pending: list[dict[str, Any]] = []
        for turn in range(1, turns + 1):
            last = turn == turns
            pending += writer.turn_events(schedule=POST_SCHEDULE,
                                          text_deltas=TEXT_DELTAS - (shortfall if last else 0))
            if turn in rounds_after:
                append(session, pending, done, total, what)
                pending = []
                verification_round(session, len({t for t in rounds_after if t <= turn}))
                writer.sync(next_seq(session))
        after = next_seq(session) - 1 - started
        assert after == size, (after, size)
        mix = dict(writer.counts)
        mix[lifecycle.REFERENCE] = mix[lifecycle.CONTRACT] = 1
        mix[lifecycle.CODE_VERIFICATION] = VERIFY_ROUNDS * len(PROFILES)
        assert sum(mix.values()) == size
        return session, mix

    def turn_stop(session: Session) -> tuple[float, int, dict[str, Any]]:
        counter = QueryCounter()
        with connection.execute_wrapper(counter):
            start = time.perf_counter()
            response = client.post(f"/api/v1/sessions/{session.pk}/turn-stop", data="{}",
                                   content_type="application/json")
            elapsed = time.perf_counter() - start
        assert response.status_code == 200, response.content
        return elapsed, counter.count, response.json()

    def expect_repair(answer: dict[str, Any], attempt: int) -> None:
        """A repair attempt of all the checks (and the injected protected-paths and
        tamper-free ones) in which only FAILING_CHECK failed: the other 19, the two code checks
        among them, passed."""
        results = answer.get("attempt", {}).get("results", [])
        failed = {r["id"]: r["evidence"] for r in results if not r["passed"]}
        if (answer.get("action") != "steer" or "terminal" in answer
                or answer["attempt"]["attempt"] != attempt or len(results) != len(checks) + 2
                or list(failed) != [FAILING_CHECK]):
            raise AssertionError(
                f"B3 expected repair attempt {attempt} of {len(checks)} checks failing only "
                f"{FAILING_CHECK}; got action {answer.get('action')!r}, {len(results)} "
                f"results, failed: {json.dumps(failed, indent=1)[:3000]}")

    sizes, per_size = params["sizes"], params["sessions"]
    progress(f"{tag} warm-up session ({sizes[0]:,} events), {STOPS} untimed turn-stops")
    warm, _ = build(sizes[0], -1, "warm-up")
    for attempt in range(1, STOPS + 1):
        expect_repair(turn_stop(warm)[2], attempt)

    sessions: list[tuple[int, Session]] = []
    mixes: dict[int, dict[str, int]] = {}
    build_seconds: dict[int, list[float]] = {size: [] for size in sizes}
    for size in sizes:
        for index in range(per_size):
            what = f"session {len(sessions) + 1}/{len(sizes) * per_size} ({size:,} after start)"
            start = time.perf_counter()
            session, mix = build(size, index, what)
            build_seconds[size].append(time.perf_counter() - start)
            sessions.append((size, session))
            mixes[size] = mix
    analyze()

    ms: dict[int, list[float]] = {size: [] for size in sizes}
    queries: dict[int, list[int]] = {size: [] for size in sizes}
    order_rng = random.Random(f"{label}-order")  # noqa: S311
    for attempt in range(1, STOPS + 1):
        for size, session in order_rng.sample(sessions, len(sessions)):
            elapsed, count, answer = turn_stop(session)
            expect_repair(answer, attempt)
            ms[size].append(elapsed * 1000)
            queries[size].append(count)
        progress(f"{tag} round {attempt}/{STOPS}: " + ", ".join(
            f"{size:,}: median {median(ms[size]):.1f} ms" for size in sizes))

    if profile:
        extra = [(size, build(size, 99, f"profile session ({size:,})")[0])
                 for size in (sizes[0], sizes[-1])]
        analyze()
        _profile(tag, extra, turn_stop)

    per = {}
    for size in sizes:
        per[str(size)] = {
            "samples": len(ms[size]),
            "median_ms": round(median(ms[size]), 2),
            "p95_ms": round(p95(ms[size]), 2),
            "min_ms": round(min(ms[size]), 2),
            "queries": sorted(set(queries[size])),
            "build_s": round(median(build_seconds[size]), 2),
            "mix": dict(sorted(mixes[size].items(), key=lambda item: -item[1])),
            "ms": [round(value, 2) for value in ms[size]],
        }
    return {
        "database": database_version(connection),
        "sizes": per,
        "ratio": round(median(ms[sizes[-1]]) / median(ms[sizes[0]]), 3),
    }




@contextmanager
def _kept_queries(counter: QueryCounter) -> Iterator[None]:
    from django.db import connection

    with connection.execute_wrapper(counter):
        yield


def _replay(statements: list[tuple[str, Any, float]]) -> dict[str, float]:
    """Seconds per SELECT text, each statement run again with its own parameters and fetched
    to the last row (the fastest of three runs): the full cost of the query, which the time
    around `execute` alone misses on SQLite, whose rows are computed while they are fetched."""
    from django.db import connection

    seconds: dict[str, float] = {}
    for sql, params, _ in statements:
        if not sql.lstrip().upper().startswith("SELECT"):
            continue
        best = math.inf
        for _ in range(3):
            with connection.cursor() as cursor:
                start = time.perf_counter()
                cursor.execute(sql, params)
                cursor.fetchall()
                best = min(best, time.perf_counter() - start)
        seconds[sql] = seconds.get(sql, 0.0) + best
    return seconds


def _explain(sql: str, params: Any) -> str:
    from django.db import connection

    prefix = ("EXPLAIN QUERY PLAN " if connection.vendor == "sqlite"
              else "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ")
    with connection.cursor() as cursor:
        cursor.execute(prefix + sql, params)
        return "\n".join("    " + " ".join(str(cell) for cell in row) for row in cursor.fetchall())


def _profile(tag: str, sessions: list[tuple[int, Any]],
             turn_stop: Callable[[Any], tuple[float, int, dict[str, Any]]]) -> None:
    """cProfile of five turn-stops at the smallest and at the largest size, and the cost of
    each SQL statement they ran at both sizes, printed to stderr: where the time goes, and
    which queries grow with the log (with the plans of the three costliest)."""
    import cProfile
    import io
    import pstats

    runs = 5
    costs: dict[int, dict[str, float]] = {}
    in_request: dict[int, dict[str, float]] = {}
    kept: list[tuple[str, Any, float]] = []
    for size, session in sessions:
        counter = QueryCounter(keep=True)
        profiler = cProfile.Profile()
        with _kept_queries(counter):
            profiler.enable()
            elapsed = sum(turn_stop(session)[0] for _ in range(runs))
            profiler.disable()
        kept = counter.statements
        costs[size] = _replay(kept)
        in_request[size] = {}
        for sql, _, seconds in kept:
            in_request[size][sql] = in_request[size].get(sql, 0.0) + seconds
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("cumulative").print_stats(30)
        stats.sort_stats("tottime").print_stats(15)
        progress(f"{tag} cProfile of {runs} turn-stops at {size:,} events "
                 f"({elapsed * 1000 / runs:.1f} ms each under the profiler):\n{out.getvalue()}")
    (small_size, _), (large_size, _) = sessions
    small, large = costs[small_size], costs[large_size]
    calls = Counter(sql for sql, _, _ in kept)
    per = f"ms per turn-stop at {small_size:,} / {large_size:,} events"
    lines = [f"{tag} SQL statements of one turn-stop, costliest at the largest size first "
             f"(replay: run again and fetched to the last row; execute: the time inside "
             f"`execute` during the request):",
             f"{'replay':>17} {'execute':>17} {'calls':>5}  statement ({per})"]
    ranked = sorted(in_request[large_size],
                    key=lambda sql: -max(large.get(sql, 0.0), in_request[large_size][sql]))
    for sql in ranked[:14]:
        lines.append(
            f"{small.get(sql, 0.0) * 1000 / runs:8.2f} {large.get(sql, 0.0) * 1000 / runs:8.2f} "
            f"{in_request[small_size].get(sql, 0.0) * 1000 / runs:8.2f} "
            f"{in_request[large_size][sql] * 1000 / runs:8.2f} "
            f"{calls[sql] // runs:5d}  {' '.join(sql.split())[:700]}")
    totals = [sum(small.values()), sum(large.values()), sum(in_request[small_size].values()),
              sum(in_request[large_size].values())]
    lines.append(" ".join(f"{total * 1000 / runs:8.2f}" for total in totals) + "        all")
    progress("\n".join(lines))
    top = sorted(large, key=lambda sql: -large[sql])[:3]
    for sql in top:
        params = next(p for q, p, _ in kept if q == sql)
        progress(f"{tag} plan at {large_size:,} events of: {' '.join(sql.split())[:300]}\n"
                 f"    params {params}\n{_explain(sql, params)}")


# --- in the parent: reporting -----------------------------------------------------------------


def table(result: dict[str, Any]) -> str:
    p = result["params"]
    sizes = [str(size) for size in p["sizes"]]
    rows = []
    for r in result["databases"].values():
        base = r["sizes"][sizes[0]]["median_ms"]
        for size in sizes:
            s = r["sizes"][size]
            rows.append([r["database"], f"{int(size):,}", str(s["samples"]),
                         f"{s['median_ms']:.1f}", f"{s['p95_ms']:.1f}",
                         "/".join(map(str, s["queries"])), f"{s['median_ms'] / base:.2f}"])
    header = ["database", "events after contract start", "samples", "median ms", "p95 ms",
              "SQL queries", f"median / median at {int(sizes[0]):,}"]
    ratios = "; ".join(f"{r['database']} **{r['ratio']:.2f}**"
                       for r in result["databases"].values())
    first = next(iter(result["databases"].values()))
    mix_rows = []
    types = list(first["sizes"][sizes[-1]]["mix"])
    for kind in types:
        mix_rows.append([f"`{kind}`"] + [
            f"{first['sizes'][size]['mix'].get(kind, 0):,} "
            f"({first['sizes'][size]['mix'].get(kind, 0) / int(size):.1%})" for size in sizes])
    plural = "s" if p["sessions"] != 1 else ""
    note = (f"{p['sessions']} session{plural} per size, {p['stops']} timed turn-stops each (all "
            f"repair attempts evaluating the 20 checks); {p['prefix_events']:,} events before the "
            f"contract start in every session. Ratio median({int(sizes[-1]):,}) / "
            f"median({int(sizes[0]):,}): {ratios} (goal ≤ {RATIO_GOAL:g}).")
    mix = markdown_table(["log after the contract start"] + [f"{int(s):,}" for s in sizes],
                         mix_rows)
    return (markdown_table(header, rows) + "\n\n" + note + "\n\nEvent mix after the contract "
            "start (same in every session of a size):\n\n" + mix)


def gates(result: dict[str, Any]) -> list[str]:
    smallest, largest = result["params"]["sizes"][0], result["params"]["sizes"][-1]
    failed = []
    for label, r in result["databases"].items():
        if r["ratio"] > RATIO_GOAL:
            failed.append(f"{label}: turn-stop median at {largest:,} events is "
                          f"{r['ratio']:.2f}× the median at {smallest:,} (goal ≤ {RATIO_GOAL:g})")
    return failed

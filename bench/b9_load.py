"""B9. Load: many agents at once (docs/benchmarks.md).

The served stack `make run` starts (`governor_serve`: gunicorn with 2 uvicorn workers running
the ASGI application, one Celery worker with 2 processes), a Redis broker (database 12 on
127.0.0.1:6379, flushed first), on SQLite and on PostgreSQL (a throwaway database), loopback
only. For each level of concurrent scripted agents (5, 10, 50, 200 by default), for a bounded
time:

- every agent does whole lifecycles, pacing itself (~100 ms between its requests): a path
  session, ~50 Harness events in five batches, a contract whose evidence includes a trusted
  run, the run requested and waited for with the long poll, the turn-stop that certifies
  (review off). Agents share 50 tokens, so the per-token cap on waits never refuses them;
- 1,000 long polls are held open on a pending review (another session, begun while review was
  required; 250 more tokens, 4 waits each) by a client process of their own, opened over 5 s
  and re-issued as they end, dropped when the agents are done;
- `/healthz` is asked every 100 ms: once the polls all wait (the web processes have gone quiet),
  for 5 s with the 1,000 polls waiting and no agent yet (the goal's condition), then all the
  while the agents work.

Reported per level: `/healthz` with the polls alone, per route p50/p95/p99 and throughput,
errors (any unexpected status or a transport error), lifecycles completed, the wake-up delay
of a waiting client after the run's result committed (its answer's arrival − the moment a
subscriber of the bench's own hears the run announced, which the service does when the result's
transaction commits), and lost events: after the level, `manage.py governor_refold --check`
must find every projection equal to the fold of its log, and every session's export must
verify (governor.verify) and hold every event its agent sent. Where the CPU went (bench/cpu.py),
with the polls alone and with the agents working, and what one lifecycle cost the service. The
chart docs/img/b9_load.png draws the p99 of each route against agents.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import multiprocessing
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import redis.asyncio as aioredis

from bench import cpu
from bench.common import markdown_table, postgres_url, progress
from bench.live import broker_for, governor, load_profiles, set_project
from governor.lib.notify import channel
from tests.harness_builders import Trace

NAME = "B9"
LEVELS = (5, 10, 50, 200)  # docs/benchmarks.md's 10, 50, 200, and 5: a load two CPUs still serve
SECONDS = 30
WAITERS = 1000
AGENT_TOKENS = 50
WAITS_PER_TOKEN = 4  # the default GOVERNOR_MAX_WAITS_PER_TOKEN
PACE_SECONDS = 0.1
HEALTH_EVERY = 0.1
RAMP_SECONDS = 5.0  # the held polls are opened over this long, before the agents start
QUIET_PERCENT = 10.0  # then they are all waiting once the web processes take less of the CPUs
SETTLE_MAX_SECONDS = 60.0  # (opening one is a few reads and a write: 2-10 s for 1,000 so far)
ALONE_SECONDS = 5.0  # then /healthz is asked with only the held polls open, waiting
REDIS_DB = 12
GOAL_ERRORS = 0
GOAL_TURN_STOP_P99_MS = 250.0  # at 50 agents on PostgreSQL
GOAL_HEALTH_P99_MS = 50.0
GOAL_WAKE_MS = 10.0
ROUTES = ("POST /sessions", "POST /events", "POST /contracts", "POST /code-verifications",
          "GET /code-verifications?wait", "POST /turn-stop", "GET /healthz")
AGENT_TYPES = {"turn/start", "user/message", "step/start", "assistant/message", "tool/call",
               "tool/result", "step/end", "turn/end"}
CONTRACT = {
    "objective": "Write README.md with an Install section",
    "claims": [{"id": "readme", "statement": "README.md documents installation, and it runs",
                "importance": "critical", "verification": "deterministic",
                "check_ids": ["readme-exists", "readme-install", "runs"]}],
    "checks": [{"id": "readme-exists", "kind": "file_exists", "path": "README.md"},
               {"id": "readme-install", "kind": "file_contains", "path": "README.md",
                "text": "## Install"},
               {"id": "runs", "kind": "code_verification_succeeded", "profile": "true"}],
}
INTENT = {"constraints": ["keep the public API"], "assumptions": ["Python 3.11"],
          "non_goals": ["no new dependencies"], "ambiguities": ["which README section?"]}
TOKENS_SCRIPT = """
import json, uuid
from django.contrib.auth import get_user_model
from governor.models import Project
from governor.services.tokens import token_create
project = Project.objects.get(slug="demo")
owner = get_user_model().objects.get(username="demo-agent")
print(json.dumps([token_create(project=project, name=f"b9-{uuid.uuid4().hex[:12]}",
                               owner=owner)[1] for _ in range({count})]))
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    levels = ",".join(map(str, LEVELS))
    parser.add_argument("--b9-agents", default=levels, metavar="N,N,...",
                        help=f"B9: levels of concurrent agents (default {levels})")
    parser.add_argument("--b9-seconds", type=float, default=SECONDS,
                        help=f"B9: seconds of load per level (default {SECONDS})")
    parser.add_argument("--b9-waiters", type=int, default=WAITERS,
                        help=f"B9: long polls held open meanwhile (default {WAITERS})")


def run(args: argparse.Namespace) -> dict[str, Any]:
    levels = [int(n) for n in str(getattr(args, "b9_agents", "")).split(",") if n] or list(LEVELS)
    postgres = postgres_url(getattr(args, "postgres", None))
    databases = {"sqlite": None, **({"postgresql": postgres} if postgres else {})}
    return measure(levels, float(getattr(args, "b9_seconds", SECONDS)),
                   int(getattr(args, "b9_waiters", WAITERS)), databases)


def measure(levels: list[int], seconds: float, waiters: int,
            databases: dict[str, str | None], broker: str | None = None) -> dict[str, Any]:
    """`broker`: a Redis URL to use (flushed first) instead of database REDIS_DB."""
    results: dict[str, Any] = {}
    for label, server in databases.items():
        for agents in levels:
            progress(f"[B9] {label}: {agents} agents for {seconds:g} s with {waiters} open "
                     "long polls")
            results.setdefault(label, {})[str(agents)] = _level(server, agents, seconds,
                                                                 waiters, broker)
    return {"params": {"levels": levels, "seconds": seconds, "waiters": waiters,
                       "agent_tokens": AGENT_TOKENS, "pace_ms": PACE_SECONDS * 1000,
                       "cpus": cpu.machine_cpus(),
                       "server": "governor_serve: gunicorn, 2 uvicorn workers; Celery worker "
                                 "--concurrency 2; Redis broker"},
            "databases": results}


def _level(server: str | None, agents: int, seconds: float, waiters: int,
           explicit_broker: str | None) -> dict[str, Any]:
    broker = broker_for(explicit_broker, REDIS_DB)
    with governor(worker=True, broker=broker, database_url=server,
                  prefix="governor-b9-") as (live, tmp):
        load_profiles(live, tmp, [{"id": "true", "description": "B9: /bin/true",
                                   "argv": ["/bin/true"], "timeout_ms": 20_000,
                                   "required": False}], "profiles")
        set_project(live, review_mode="required")
        waits_on = _pending_review(live)
        set_project(live, review_mode="off")
        wait_tokens = math.ceil(waiters / WAITS_PER_TOKEN)
        out = live.manage("shell", "-v", "0", "-c",
                          TOKENS_SCRIPT.replace("{count}", str(AGENT_TOKENS + wait_tokens)))
        tokens = json.loads(out.strip().splitlines()[-1])
        load = asyncio.run(_drive(live.url, broker, live.workspace_root, tokens[:AGENT_TOKENS],
                                  tokens[AGENT_TOKENS:], waits_on, agents, seconds, waiters,
                                  live.server_pid))
        refold = live.manage("governor_refold", "--check").strip().splitlines()[-1]
        lost = _check_exports(live.url, tokens[0], load["sessions"])
    wake = sorted((answered - load["run_commits"][run_id]) * 1000
                  for run_id, answered in load["run_answers"].items()
                  if run_id in load["run_commits"])
    return {
        "health_alone": (_stats(load["health_alone"], ALONE_SECONDS)
                         if load["health_alone"] else None),
        "routes": {route: _stats(samples, seconds) for route, samples in load["samples"].items()},
        "errors": load["errors"], "error_examples": load["error_examples"][:5],
        "lifecycles": load["lifecycles"], "events_sent": sum(load["sessions"].values()),
        "long_polls_answered": load["polls_answered"], "long_polls_open_max": load["open_max"],
        "long_polls_settled_s": load["settled_s"],
        "wake_ms": _stats(wake, seconds) if wake else None,
        "refold": refold, "lost_events": lost["lost"], "exports_failed": lost["failed"],
        "exports_checked": lost["checked"], "cpu": load["cpu"],
        "cpu_alone": load["cpu_alone"],
        "cpu_ms_per_lifecycle": _per_lifecycle(load["cpu"], load["lifecycles"]),
    }


def _pending_review(live: Any) -> str:
    workspace = live.workspace_root / "waits"
    workspace.mkdir()
    (workspace / "README.md").write_text("# Tool\n\n## Install\n")
    with live.client() as client:
        session = client.post("/sessions", json={"workspace": {
            "kind": "path", "path": str(workspace)}}).json()
        begun = client.post(f"/sessions/{session['id']}/contracts",
                            json={**CONTRACT, "intent": INTENT})
        if begun.status_code != 202:
            raise RuntimeError(f"B9: the waiters' session did not await review: {begun.text}")
    return f"/api/v1/sessions/{session['id']}/review"


class Load:
    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.samples: dict[str, list[float]] = defaultdict(list)
        self.errors = 0
        self.error_examples: list[str] = []
        self.sessions: dict[str, int] = {}  # session id -> agent events sent
        self.run_answers: dict[str, float] = {}
        self.lifecycles = 0
        self.polls_answered = 0
        self.open = self.open_max = 0

    def error(self, what: str) -> None:
        self.errors += 1
        self.error_examples.append(what[:300])

    async def call(self, client: aiohttp.ClientSession, route: str, method: str, url: str,
                   token: str, ok: tuple[int, ...] = (200, 201, 202), **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            async with client.request(method, url, headers={
                    "Authorization": f"Bearer {token}"}, **kwargs) as response:
                body = await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.error(f"{route}: {type(exc).__name__}: {exc}")
            return None
        self.samples[route].append((time.perf_counter() - started) * 1000)
        if response.status not in ok:
            self.error(f"{route}: {response.status} {body.decode(errors='replace')}")
            return None
        return json.loads(body)


async def _drive(url: str, broker: str, root: Path, agent_tokens: list[str],
                 wait_tokens: list[str], waits_on: str, agents: int, seconds: float,
                 waiters: int, server_pid: int) -> dict[str, Any]:
    load = Load(time.monotonic() + seconds)
    commits = asyncio.create_task(_run_commits(broker)) if broker.startswith("redis") else None
    # The held polls come from a process of their own, so its event loop's work is not counted
    # in the agents' latencies (both still share the machine's CPUs with the server).
    context = multiprocessing.get_context("spawn")
    answers = context.Queue()
    stop = context.Event()
    holder = context.Process(target=_hold_polls, args=(url, waits_on, wait_tokens, waiters,
                                                       stop, answers))
    holder.start()
    try:  # however the agents end, the holder drops its polls and reports
        async with _client(url, agents + 20) as client:
            await asyncio.sleep(RAMP_SECONDS)
            settled = await _settle(server_pid)  # the polls all wait before the agents start
            alone = Load(time.monotonic() + ALONE_SECONDS)  # /healthz with only the polls open
            before = _cpu_now(server_pid)
            await _health(alone, client)
            used_alone = _cpu_used(before, _cpu_now(server_pid))
            load.errors += alone.errors
            load.error_examples += alone.error_examples
            load.deadline = time.monotonic() + seconds
            tasks = [_agent(load, client, root, n, agent_tokens[n % len(agent_tokens)])
                     for n in range(agents)]
            tasks.append(_health(load, client))
            before = _cpu_now(server_pid)
            await asyncio.gather(*tasks)
            used = _cpu_used(before, _cpu_now(server_pid))
    finally:
        stop.set()
    run_commits: dict[str, float] = {}
    if commits is not None:
        commits.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            run_commits = await commits
    polls = await asyncio.get_running_loop().run_in_executor(None, answers.get, True, 180)
    holder.join(timeout=30)
    load.errors += polls["errors"]
    load.error_examples += polls["error_examples"]
    return {"samples": load.samples, "errors": load.errors, "error_examples": load.error_examples,
            "health_alone": alone.samples["GET /healthz"],
            "sessions": load.sessions, "run_answers": load.run_answers,
            "run_commits": run_commits,
            "lifecycles": load.lifecycles, "polls_answered": polls["answered"],
            "open_max": polls["open_max"], "settled_s": settled, "cpu": used,
            "cpu_alone": used_alone}


def _per_lifecycle(used: dict[str, float], lifecycles: int) -> dict[str, int] | None:
    """What one lifecycle cost the service (the machine's busy time less the bench's own), its
    web processes and its worker, the polls' and /healthz's share included: the figure to size a
    machine by."""
    if not lifecycles:
        return None
    seconds = {"service": used["busy_s"] - used["client_s"], "web": used["web_s"],
               "worker": used["worker_s"]}
    return {part: round(value * 1000 / lifecycles) for part, value in seconds.items()}


async def _settle(server_pid: int) -> float:
    """Seconds until the held polls are all open and waiting: until the web processes take
    less than QUIET_PERCENT of the machine over a second (at most SETTLE_MAX_SECONDS)."""
    started = before = _cpu_now(server_pid)
    while before["time"] - started["time"] < SETTLE_MAX_SECONDS:
        await asyncio.sleep(1)
        after = _cpu_now(server_pid)
        if _cpu_used(before, after)["web"] < QUIET_PERCENT:
            return round(after["time"] - started["time"], 1)
        before = after
    return round(before["time"] - started["time"], 1)


def _cpu_now(server_pid: int) -> dict[str, float]:
    """CPU seconds so far: the machine's, the web processes' (gunicorn), the worker's (Celery,
    with its sandboxes), and this bench's with its poll holder (its process tree, less the
    server it started)."""
    parts: dict[str, list[int]] = {"web": [], "worker": []}
    table = cpu.process_table()
    for child in table.get(server_pid, []):
        parts["worker" if "celery" in cpu.command_line(child) else "web"].append(child)
    seconds = cpu.trees_seconds({**parts, "self": [os.getpid()], "server": [server_pid]}, table)
    return {"time": time.monotonic(), "busy": cpu.machine_busy(), "web": seconds["web"],
            "worker": seconds["worker"], "client": seconds["self"] - seconds["server"]}


def _cpu_used(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Each part's share of the machine's CPU capacity over the interval, in percent, and the
    CPU seconds it took (`<part>_s`)."""
    capacity = (after["time"] - before["time"]) * cpu.machine_cpus() / 100
    spent = {part: after[part] - before[part] for part in ("busy", "web", "worker", "client")}
    used = {part: seconds / capacity for part, seconds in spent.items()}
    used["rest"] = used["busy"] - used["web"] - used["worker"] - used["client"]
    return {**{part: round(share, 1) for part, share in used.items()},
            **{f"{part}_s": round(seconds, 2) for part, seconds in spent.items()}}


def _client(url: str, connections: int) -> aiohttp.ClientSession:
    """The load's HTTP client: aiohttp's, as it takes the shared CPUs ~0.5 ms a request where
    httpx's asynchronous client took 2-4 ms (measured here), leaving more of them to the server."""
    return aiohttp.ClientSession(base_url=url, timeout=aiohttp.ClientTimeout(total=90),
                                 connector=aiohttp.TCPConnector(limit=connections))


async def _run_commits(broker: str) -> dict[str, float]:
    """When each run's result committed, as heard by a subscriber of its own: the service
    announces a run's topic once, after the transaction that finishes it commits (on_commit)."""
    heard: dict[str, float] = {}
    prefix = channel(broker, "run:")
    client = aioredis.Redis.from_url(broker)
    try:
        async with client.pubsub() as pubsub:
            await pubsub.psubscribe(prefix + "*")
            try:
                async for message in pubsub.listen():
                    if message["type"] == "pmessage":
                        heard[message["channel"].decode()[len(prefix):]] = time.time()
            except asyncio.CancelledError:
                return heard
    finally:
        await client.aclose()
    return heard


def _hold_polls(url: str, path: str, tokens: list[str], waiters: int, stop: Any,
                answers: Any) -> None:
    """`waiters` long polls on `path`, opened over RAMP_SECONDS and re-issued as they end, until
    `stop` is set (the agents are done: the open ones are dropped); what happened, into
    `answers`."""
    load = Load(math.inf)

    async def hold() -> None:
        async with _client(url, waiters + 10) as client:
            polls = asyncio.gather(*[
                _waiter(load, client, path, tokens[n // WAITS_PER_TOKEN],
                        RAMP_SECONDS * n / max(1, waiters)) for n in range(waiters)])
            await asyncio.get_running_loop().run_in_executor(None, stop.wait)
            polls.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await polls

    asyncio.run(hold())
    answers.put({"answered": load.polls_answered, "open_max": load.open_max,
                 "errors": load.errors, "error_examples": load.error_examples[:5]})


async def _agent(load: Load, client: aiohttp.ClientSession, root: Path, n: int, token: str) -> None:
    cycle = 0
    while time.monotonic() < load.deadline:
        cycle += 1
        workspace = root / f"agent{n}" / f"cycle{cycle}"
        workspace.mkdir(parents=True)
        (workspace / "README.md").write_text(f"# Tool {n}.{cycle}\n\n## Install\n")
        if await _lifecycle(load, client, workspace, token):
            load.lifecycles += 1


async def _lifecycle(load: Load, client: aiohttp.ClientSession, workspace: Path,
                     token: str) -> bool:
    pace = asyncio.sleep
    session = await load.call(client, "POST /sessions", "POST", "/api/v1/sessions", token,
                              json={"workspace": {"kind": "path", "path": str(workspace)}})
    if session is None:
        return False
    sid = session["id"]
    load.sessions[sid] = 0
    trace = Trace(session["next_seq"])
    trace.start_turn()
    for batch in range(5):
        for _ in range(2):
            trace.tool("write_file" if batch % 2 else "read_file", '{"path": "README.md"}')
        if batch == 4:
            trace.say("README.md is written").end_turn()
        events = trace.flush()
        await pace(PACE_SECONDS)
        if await load.call(client, "POST /events", "POST", f"/api/v1/sessions/{sid}/events",
                           token, json={"events": events}) is None:
            return False
        load.sessions[sid] += len(events)
    await pace(PACE_SECONDS)
    if await load.call(client, "POST /contracts", "POST", f"/api/v1/sessions/{sid}/contracts",
                       token, json=CONTRACT) is None:
        return False
    await pace(PACE_SECONDS)
    run = await load.call(client, "POST /code-verifications", "POST",
                          f"/api/v1/sessions/{sid}/code-verifications", token,
                          json={"profile": "true"})
    if run is None:
        return False
    done = await load.call(client, "GET /code-verifications?wait", "GET",
                           f"/api/v1/code-verifications/{run['id']}", token,
                           params={"wait": 60})
    if done is None:
        return False
    load.run_answers[run["id"]] = time.time()
    if done["state"] != "finished" or not done["result"]["passed"]:
        load.error(f"run {run['id']}: {done}")
        return False
    await pace(PACE_SECONDS)
    stop = await load.call(client, "POST /turn-stop", "POST",
                           f"/api/v1/sessions/{sid}/turn-stop", token)
    if stop is None:
        return False
    if (stop.get("terminal") or {}).get("status") != "certified":
        load.error(f"turn-stop of {sid} did not certify: {json.dumps(stop)[:200]}")
        return False
    return True


async def _waiter(load: Load, client: aiohttp.ClientSession, path: str, token: str,
                  delay: float) -> None:
    await asyncio.sleep(delay)
    while True:  # until cancelled
        load.open += 1
        load.open_max = max(load.open_max, load.open)
        try:
            async with client.get(path, params={"wait": 60},
                                  headers={"Authorization": f"Bearer {token}"}) as response:
                body = await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            load.error(f"long poll: {type(exc).__name__}: {exc}")
            continue
        finally:
            load.open -= 1
        if response.status != 200:
            load.error(f"long poll: {response.status} {body.decode(errors='replace')}")
            await asyncio.sleep(1)
        else:
            load.polls_answered += 1


async def _health(load: Load, client: aiohttp.ClientSession) -> None:
    while time.monotonic() < load.deadline:
        await load.call(client, "GET /healthz", "GET", "/healthz", "-")
        await asyncio.sleep(HEALTH_EVERY)


def _check_exports(url: str, token: str, sessions: dict[str, int]) -> dict[str, int]:
    """Every session's export verifies and holds every event its agent sent."""
    from governor.verify import verify_export

    lost = failed = 0
    with httpx.Client(base_url=url + "/api/v1", timeout=60,
                      headers={"Authorization": f"Bearer {token}"}) as client:
        for sid, sent in sessions.items():
            lines = client.get(f"/sessions/{sid}/export").text.splitlines()
            report = verify_export(lines)
            if report.failure is not None:
                failed += 1
                progress(f"[B9] export of {sid} does not verify: {report.failure}")
            kept = sum(1 for line in lines
                       if (obj := json.loads(line)).get("kind") == "event"
                       and obj.get("origin") == "agent" and obj.get("type") in AGENT_TYPES)
            lost += max(0, sent - kept)
    return {"lost": lost, "failed": failed, "checked": len(sessions)}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _stats(values: list[float], seconds: float) -> dict[str, float]:
    return {"count": len(values), "per_s": round(len(values) / seconds, 1),
            "p50_ms": round(_percentile(values, 0.50), 1),
            "p95_ms": round(_percentile(values, 0.95), 1),
            "p99_ms": round(_percentile(values, 0.99), 1)}


def table(result: dict[str, Any]) -> str:
    parts = []
    for label, stored in result["databases"].items():
        # In order of agents (bench/results/latest.json keeps them sorted as text).
        levels = dict(sorted(stored.items(), key=lambda item: int(item[0])))
        rows = []
        for agents, level in levels.items():
            for route in ROUTES:
                if route in level["routes"]:
                    s = level["routes"][route]
                    rows.append([agents, f"`{route}`", f"{s['p50_ms']:.1f}", f"{s['p95_ms']:.1f}",
                                 f"**{s['p99_ms']:.1f}**", f"{s['per_s']:.1f}"])
        parts.append(f"**{label}**\n\n" + markdown_table(
            ["agents", "route", "p50 ms", "p95 ms", "p99 ms", "per s"], rows))
        summary = []
        for agents, level in levels.items():
            wake, alone = level["wake_ms"], level["health_alone"]
            summary.append([agents,
                            f"{alone['p50_ms']:.1f} / {alone['p99_ms']:.1f}" if alone else "—",
                            str(level["lifecycles"]), str(level["errors"]),
                            str(level["lost_events"]),
                            f"{level['exports_checked'] - level['exports_failed']}/"
                            f"{level['exports_checked']}",
                            level["refold"],
                            f"{level['long_polls_open_max']} ({level['long_polls_settled_s']:g} s)",
                            f"{wake['p50_ms']:.1f} / {wake['p99_ms']:.1f}" if wake else "—"])
        parts.append(markdown_table(
            ["agents", "`/healthz` p50 / p99 ms, polls alone", "lifecycles", "errors",
             "lost events", "exports verified", "refold --check",
             "long polls open (max; all waiting after)",
             "wake-up after commit p50 / p99 ms"],
            summary))
        parts.append(markdown_table(
            ["agents", "while", "CPU busy", "web processes", "worker and sandboxes",
             "bench client", "rest (database, Redis, other)",
             "CPU per lifecycle ms: service / web / worker"],
            [[agents, while_, *(f"{level[key][part]:.0f} %"
                                for part in ("busy", "web", "worker", "client", "rest")),
              _per_lifecycle_cell(level) if key == "cpu" else "—"]
             for agents, level in levels.items()
             for key, while_ in (("cpu_alone", "polls alone"), ("cpu", "agents working"))]))
    p = result["params"]
    parts.append(
        f"{p['seconds']:g} s per level; agents pace themselves ({p['pace_ms']:g} ms between "
        f"requests) and share {p['agent_tokens']} tokens; {p['waiters']} long polls on a "
        f"pending review held open meanwhile (opened over {RAMP_SECONDS:g} s, re-issued as they "
        f"end), `/healthz` asked for {ALONE_SECONDS:g} s with only those polls waiting (once "
        f"they all wait: the web processes under {QUIET_PERCENT:g} % of the CPUs over a second) "
        f"before the agents start; {p['server']}. "
        f"Wake-up: a waiting client's answer arriving − the bench's own Redis subscriber "
        f"hearing the run's result announced (on commit). CPU: shares of the machine's "
        f"{p.get('cpus', '?')} CPUs while the agents worked, from /proc (the web and worker "
        f"process trees, the bench's own with its poll holder; the rest is the machine's busy "
        f"time less those), and per lifecycle completed (service: the machine's busy time less "
        f"the bench's own). Goals: "
        f"{GOAL_ERRORS} errors and 0 lost events at every level; p99 turn-stop ≤ "
        f"{GOAL_TURN_STOP_P99_MS:g} ms at 50 agents on PostgreSQL; `/healthz` p99 ≤ "
        f"{GOAL_HEALTH_P99_MS:g} ms with the {p['waiters']} polls open; wake-up ≤ "
        f"{GOAL_WAKE_MS:g} ms.")
    return "\n\n".join(parts)


def _per_lifecycle_cell(level: dict[str, Any]) -> str:
    ms = level.get("cpu_ms_per_lifecycle")
    return f"{ms['service']} / {ms['web']} / {ms['worker']}" if ms else "—"


def gates(result: dict[str, Any]) -> list[str]:
    failed = []
    for label, levels in result["databases"].items():
        for agents, level in levels.items():
            where = f"{label}, {agents} agents"
            if level["errors"] > GOAL_ERRORS:
                failed.append(f"{where}: {level['errors']} errors")
            if level["lost_events"] or level["exports_failed"]:
                failed.append(f"{where}: {level['lost_events']} lost events, "
                              f"{level['exports_failed']} exports that do not verify")
            if not level["refold"].endswith(" 0 with differences"):
                failed.append(f"{where}: refold --check: {level['refold']}")
            alone = level["health_alone"]
            if alone is None or alone["p99_ms"] > GOAL_HEALTH_P99_MS:
                failed.append(f"{where}: /healthz p99 "
                              f"{alone['p99_ms'] if alone else 'unanswered'} ms, polls alone")
            wake = level["wake_ms"]
            if wake and wake["p50_ms"] > GOAL_WAKE_MS:
                failed.append(f"{where}: wake-up p50 {wake['p50_ms']} ms")
            stop = level["routes"].get("POST /turn-stop")
            if (label == "postgresql" and agents == "50" and stop
                    and stop["p99_ms"] > GOAL_TURN_STOP_P99_MS):
                failed.append(f"{where}: turn-stop p99 {stop['p99_ms']} ms")
    return failed

"""B12. The reliability page (issue 31; docs/benchmarks.md).

Server time and SQL query count of `/projects/<slug>/reliability` over 30 days for a project
with 1k, 10k and 100k ended sessions, in a fresh interpreter on a throwaway database (SQLite,
and PostgreSQL when one is available, as B2 and B6 choose it). Django's test `Client`, logged in
as the project's reviewer, GETs the page in-process: middleware, session and user lookup, the
view, its aggregate queries and the template all run; no network.

The sessions are a realistic mix written straight into the tables the page reads (sessions and
their `ReliabilityFact` rows, exactly the rows the governor writes with each event, as
tests/pages/test_reliability_page.py checks on real lifecycles): 55 % certified at the first
attempt, 20 % after a repair, 15 % exhausted, 10 % abstained; two thirds reviewed (intent and
evidence decisions, a few revisions); a trusted run each, some failing; failed checks for every
repair and exhaustion; false-certification reports on 2 % of the certified ones; five agent
tokens. Each project has its own reviewer; the three sizes take turns request by request.

Goal (the gate): the query count the same at every size — a ratio of 1 measured in the same
run. The design's other goal, median ≤ 200 ms at 100k, is a time on the machine at hand: it is
reported beside the medians as context (met or missed), not gated.
"""

from __future__ import annotations

import argparse
import datetime
import random
import time
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

NAME = "B12"
REQUESTS = 20
WARMUP = 2
SIZES = (1_000, 10_000, 100_000)
CONTEXT_MEDIAN_MS = 200.0  # the design's median at the largest size: reported, not gated
CHUNK = 5_000
MARKER = 'id="false-certification"'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--b12-requests", type=int, default=REQUESTS, metavar="N",
                        help=f"B12: timed requests per size (default {REQUESTS})")
    parser.add_argument("--b12-largest", type=int, default=SIZES[-1], metavar="N",
                        help=f"B12: ended sessions in the largest project (default {SIZES[-1]:,})")


def run(args: argparse.Namespace) -> dict[str, Any]:
    largest = getattr(args, "b12_largest", SIZES[-1])
    sizes = tuple(size for size in SIZES if size < largest) + (largest,)
    return measure(getattr(args, "b12_requests", REQUESTS), sizes, postgres_url(args.postgres))


def measure(requests: int, sizes: tuple[int, ...], postgres: str | None) -> dict[str, Any]:
    params = {"requests": requests, "warmup": WARMUP, "sizes": list(sizes), "days": 30}
    result: dict[str, Any] = {"params": params, "databases": {}}
    for label in database_labels(postgres):
        with database_env(label, postgres) as env:
            result["databases"][label] = isolated(measure_database, label, params, env=env)
    return result


def populate(project: Any, tokens: list[Any], sessions: int, *, start: datetime.datetime,
             end: datetime.datetime, seed: int = 12) -> dict[str, int]:
    """`sessions` ended sessions of `project` spread between `start` and `end`, with the facts
    the governor writes for them; what was written, counted by outcome."""
    from collections import Counter

    from governor.models import ReliabilityDay, ReliabilityFact, Session, WorkspaceKind

    rng = random.Random(seed)  # noqa: S311 - a reproducible mix, not a secret
    counts = {"certified_first": 0, "certified_repair": 0, "exhausted": 0, "abstained": 0,
              "false_certification": 0}
    span = (end - start).total_seconds()
    days: Counter[tuple[Any, ...]] = Counter()
    firsts: Counter[tuple[Any, ...]] = Counter()
    for first in range(0, sessions, CHUNK):
        rows, facts = [], []
        counted = 0
        for n in range(first, min(sessions, first + CHUNK)):
            at = start + datetime.timedelta(seconds=rng.uniform(0, span))
            token = tokens[n % len(tokens)]
            session = Session(project=project, workspace_kind=WorkspaceKind.PATH,
                              workspace_path="/srv/agents/bench", created_by=token,
                              external_id=f"bench-{seed}-{n}")
            rows.append((session, at))
            contract = f"contract-{n}"
            roll = rng.random()
            outcome = ("certified_first" if roll < .55 else "certified_repair" if roll < .75
                       else "exhausted" if roll < .90 else "abstained")
            counts[outcome] += 1
            reviewed = n % 3 != 0
            attempts = {"certified_first": 1, "certified_repair": rng.choice((2, 3)),
                        "exhausted": 3, "abstained": 0}[outcome]

            def fact(kind: str, seq: int, session: Any = session, token: Any = token,
                     at: datetime.datetime = at, contract: str = contract,
                     **fields: Any) -> Any:
                return ReliabilityFact(project=project, session=session, token=token,
                                       event_seq=seq, at=at, kind=kind,
                                       **{"contract_id": contract, **fields})
            if reviewed:
                facts.append(fact("review", 1, name="intent",
                                  status="revision-requested" if n % 17 == 0 else "approved",
                                  value=rng.randint(20_000, 3_600_000), contract_id=""))
                facts.append(fact("review", 2, name="evidence", status="approved",
                                  value=rng.randint(20_000, 1_800_000), contract_id=""))
            facts.append(fact("contract", 3, name="reviewed" if reviewed else "unreviewed"))
            for attempt in range(1, attempts + 1):
                if attempt < attempts or outcome == "exhausted":
                    facts.append(fact("check", 4 + attempt, name=f"check-{rng.randint(1, 40)}",
                                      status="file_contains", value=attempt))
            failed = rng.random() < .15
            facts.append(fact("run", 8, name=f"profile-{n % 4}",
                              status="exit" if failed else "passed",
                              value=rng.randint(200, 20_000), contract_id=""))
            facts.append(fact("terminal", 9, status={"exhausted": "exhausted",
                                                     "abstained": "abstained"}.get(
                                                         outcome, "certified"),
                              value=attempts))
            if outcome.startswith("certified") and rng.random() < .02:
                counts["false_certification"] += 1
                facts.append(fact("report", 10, name="false-certification",
                                  status="certified", value=int(at.timestamp() * 1000)))
            days[(at.date(), token.pk, "session", "", "")] += 1
            for made in facts[counted:]:
                if made.kind != "report":
                    key = (at.date(), token.pk, made.kind, made.name, made.status)
                    days[key] += 1
                    firsts[key] += made.value == 1
            counted = len(facts)
        # (their created_at is now: the page counts sessions from the day counts below)
        Session.objects.bulk_create([session for session, _ in rows], batch_size=1000)
        ReliabilityFact.objects.bulk_create(facts, batch_size=2000)
    existing = {(row.day, row.token_key, row.kind, row.name, row.status): row
                for row in ReliabilityDay.objects.filter(project=project)}
    for key, row in existing.items():  # a second call adds to the counts of the first
        row.count += days.pop(key, 0)
        row.first += firsts[key]
    ReliabilityDay.objects.bulk_update(list(existing.values()), ["count", "first"],
                                       batch_size=1000)
    ReliabilityDay.objects.bulk_create([
        ReliabilityDay(project=project, day=day, token_key=token, kind=kind, name=name,
                       status=status, count=n, first=firsts[(day, token, kind, name, status)])
        for (day, token, kind, name, status), n in days.items()], batch_size=2000)
    return counts


def measure_database(label: str, params: dict[str, Any]) -> dict[str, Any]:
    django_setup()
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from governor.models import Membership, Project, Role
    from governor.services.tokens import token_create

    tag = f"[B12 {label}]"
    users = get_user_model()
    owner = users.objects.create_user("bench-agent-owner")
    now = timezone.now()
    # The page's default period: the 30 whole days (UTC) ending today.
    start = datetime.datetime.combine(now.date() - datetime.timedelta(days=params["days"] - 1),
                                      datetime.time(), tzinfo=datetime.UTC)
    targets: dict[int, tuple[Client, str, dict[str, int]]] = {}
    for size in params["sizes"]:
        slug = f"reliability-{size}"
        project = Project.objects.create(slug=slug, name=slug.title())
        tokens = [token_create(project=project, name=f"agent {n}", owner=owner)[0]
                  for n in range(5)]
        began = time.perf_counter()
        counts = populate(project, tokens, size, start=start, end=now)
        progress(f"{tag} {size:,} sessions written in {time.perf_counter() - began:.1f} s")
        user = users.objects.create_user(f"reviewer-{size}", f"r{size}@example.com",
                                         "bench-password-1")
        Membership.objects.create(user=user, project=project, role=Role.REVIEWER)
        client = Client(HTTP_HOST="localhost")
        client.force_login(user)
        targets[size] = (client, f"/projects/{slug}/reliability", counts)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")

    ms: dict[int, list[float]] = {size: [] for size in targets}
    queries: dict[int, set[int]] = {size: set() for size in targets}
    sizes: dict[int, int] = {}
    for round_no in range(params["warmup"] + params["requests"]):
        for size, (client, url, counts) in targets.items():
            with CaptureQueriesContext(connection) as captured:
                began = time.perf_counter()
                response = client.get(url)
                elapsed = time.perf_counter() - began
            if response.status_code != 200:
                raise AssertionError(f"B12 {url} answered {response.status_code}")
            html = response.content.decode()
            certified = counts["certified_first"] + counts["certified_repair"]
            expected = f"{counts['false_certification']} of {certified} certified"
            if MARKER not in html or expected not in html:
                raise AssertionError(f"B12 {size}: the page does not say {expected!r}")
            if round_no >= params["warmup"]:
                ms[size].append(elapsed * 1000)
                queries[size].add(len(captured.captured_queries))
                sizes[size] = len(response.content)
        if (round_no + 1) % 10 == 0:
            progress(f"{tag} round {round_no + 1}/{params['warmup'] + params['requests']}: "
                     + ", ".join(f"{size:,}: {median(ms[size]):.1f} ms"
                                 for size in targets if ms[size]))
    return {
        "database": database_version(connection),
        "sizes": {str(size): {
            "median_ms": round(median(ms[size]), 2), "p95_ms": round(p95(ms[size]), 2),
            "min_ms": round(min(ms[size]), 2), "queries": sorted(queries[size]),
            "bytes": sizes[size]} for size in targets},
    }


# --- in the parent: reporting -----------------------------------------------------------------

def table(result: dict[str, Any]) -> str:
    rows = [[r["database"], f"{int(size):,}", f"{s['median_ms']:.1f}", f"{s['p95_ms']:.1f}",
             "/".join(map(str, s["queries"])), f"{s['bytes'] / 1024:,.0f}"]
            for r in result["databases"].values() for size, s in r["sizes"].items()]
    p = result["params"]
    largest = str(p["sizes"][-1])
    over = [r["database"] for r in result["databases"].values()
            if r["sizes"][largest]["median_ms"] > CONTEXT_MEDIAN_MS]
    context = f"missed by {', '.join(over)}" if over else "met"
    note = (f"{p['requests']} timed GETs per size after {p['warmup']} warm-up rounds, the sizes "
            f"in turn; a {p['days']}-day period; server time in-process (Django test `Client`, "
            f"logged in). Goal: the same query count at every size. Context, not gated: the "
            f"design's median ≤ {CONTEXT_MEDIAN_MS:g} ms at {int(largest):,} sessions — "
            f"{context} here.")
    header = ["database", "ended sessions", "median ms", "p95 ms", "SQL queries", "KiB"]
    return markdown_table(header, rows) + "\n\n" + note


def gates(result: dict[str, Any]) -> list[str]:
    failed = []
    for label, r in result["databases"].items():
        counts = {size: tuple(s["queries"]) for size, s in r["sizes"].items()}
        if len(set(counts.values())) != 1 or any(len(c) != 1 for c in counts.values()):
            failed.append(f"{label}: query counts differ by size: {counts}")
    return failed

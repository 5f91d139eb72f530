"""B2. Event ingestion throughput (docs/benchmarks.md).

The accepted recorded Harness logs go through `events_append` (full validation, hash chain,
projection, one transaction per batch of at most 1,000), one fresh session per log per copy.
References in the same process, on the same database, against the same rows: the ORM's
`bulk_create` of the precomputed Event instances, and the driver's own `executemany` of the
precomputed column values, each batch in its own transaction like the governed path. The arms
take turns within each repetition (the order rotates), so drift hits all three alike.

Goal (the gate): governed ≥ 0.4 of the ORM reference, the median of the per-repetition ratios.
Events/s of every arm and both ratios are reported. The design's absolute rates (≥ 10,000
events/s on SQLite, ≥ 5,000 on PostgreSQL) are context, reported beside the figures and not
gated: a slower machine of the same kind misses them while every ratio holds.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from typing import Any

from bench.common import (
    database_env,
    database_labels,
    database_version,
    django_setup,
    isolated,
    markdown_table,
    median,
    postgres_url,
    progress,
    rate,
)

NAME = "B2"
BATCH = 1000
ARMS = ("governed", "orm", "executemany")
RATIO_GOAL = 0.4  # governed / ORM bulk_create: the gate
RATE_CONTEXT = {"sqlite": 10_000, "postgresql": 5_000}  # the design's governed events/s


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--copies", type=int, default=3,
                        help="B2: corpus copies per repetition (~11k events each; default 3)")
    parser.add_argument("--b2-logs", type=int, metavar="N",
                        help="B2: only the first N accepted logs of the corpus (default: all)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    return measure(args.copies, args.repeats, postgres_url(args.postgres), args.profile,
                   logs=getattr(args, "b2_logs", None))


def measure(copies: int, repeats: int, postgres: str | None, profile: bool = False,
            logs: int | None = None) -> dict[str, Any]:
    """B2 with `copies` copies of the corpus (its first `logs` accepted logs, else all) per
    repetition, on SQLite and, when `postgres` names a server, on PostgreSQL: each database in
    a fresh interpreter."""
    params = {"batch": BATCH, "copies": copies, "repeats": repeats, "logs": logs}
    result: dict[str, Any] = {"params": params, "databases": {}}
    for label in database_labels(postgres):
        with database_env(label, postgres) as env:
            result["databases"][label] = isolated(measure_database, label, params, profile,
                                                  env=env)
    return result


# --- in the child: one database, fresh Django -------------------------------------------------


def _corpus() -> list[tuple[list[dict[str, Any]], list[str]]]:
    """(envelopes, raw texts) of every accepted log, normalisation undone, in index order. The
    raw text is what a client would have sent for the event, which the API stores."""
    from governor.domain.harness import parse_log
    from tests.harness_corpus import denormalised_text, index_rows, restore_seq_and_time

    logs = []
    for row in index_rows():
        if row.verdict == "accept":
            _header, events = parse_log(denormalised_text(row.path))
            events = restore_seq_and_time(events)
            raws = [json.dumps(e, ensure_ascii=False, separators=(",", ":")) for e in events]
            logs.append((events, raws))
    return logs


def measure_database(label: str, params: dict[str, Any], profile: bool) -> dict[str, Any]:
    django_setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction

    from governor.domain.chain import GENESIS
    from governor.models import Event, Project, Session, SessionState
    from governor.services.events import _chain_rows, events_append
    from governor.services.sessions import session_create
    from governor.services.tokens import token_create

    workspace = settings.VAR_DIR / "workspace"
    workspace.mkdir()
    project = Project.objects.create(slug="bench", name="Bench", review_mode="off",
                                     workspace_roots=[str(settings.VAR_DIR)])
    owner = get_user_model().objects.create_user("bench-agent-owner")
    token, _secret = token_create(project=project, name="bench", owner=owner)
    logs = _corpus()[:params["logs"]]

    # The exact rows the governed path stores, built once by its own row builder (the session
    # and hashes differ per session; the references do not look at them).
    proto = Session(id=uuid.uuid4(), project=project)
    fields = [f for f in Event._meta.concrete_fields if f.attname not in ("id", "session_id")]
    rows_per_log = []
    for envelopes, raws in logs:
        state = SessionState(session=proto, next_seq=0, head=GENESIS)
        built = _chain_rows(proto, state, envelopes, raws, origin="agent", imported=False)
        rows_per_log.append([{f.attname: row.get(f.attname) for f in fields} for row in built])
    columns = ["session_id", *(f.column for f in fields)]
    preps = [f.get_db_prep_save for f in fields]
    mark = "?" if connection.vendor == "sqlite" else "%s"
    insert = (f"INSERT INTO {Event._meta.db_table} ({', '.join(columns)}) "
              f"VALUES ({', '.join([mark] * len(columns))})")
    session_pk = Session._meta.pk

    def sessions(copies: int) -> list[Session]:
        return [session_create(token=token, workspace={"kind": "path", "path": str(workspace)})[0]
                for _ in range(copies) for _log in logs]

    def batches(items: list[Any]) -> list[list[Any]]:
        return [items[i:i + BATCH] for i in range(0, len(items), BATCH)]

    # Each arm gets fresh sessions (one per log per copy); it prepares its inputs untimed, then
    # times its insert loop. Returns (events, seconds).
    def governed(fresh: list[Session]) -> tuple[int, float]:
        work = [(s, b, r) for s, (envs, raws) in zip(fresh, logs * copies_of(fresh), strict=True)
                for b, r in zip(batches(envs), batches(raws), strict=True)]
        start = time.perf_counter()
        for session, envelopes, raws in work:
            events_append(session=session, envelopes=envelopes, raws=raws)
        return sum(len(b) for _, b, _ in work), time.perf_counter() - start

    def orm(fresh: list[Session]) -> tuple[int, float]:
        work = [batch for s, rows in zip(fresh, rows_per_log * copies_of(fresh), strict=True)
                for batch in batches([Event(session=s, **row) for row in rows])]
        start = time.perf_counter()
        for batch in work:
            with transaction.atomic():
                Event.objects.bulk_create(batch)
        return sum(map(len, work)), time.perf_counter() - start

    def executemany(fresh: list[Session]) -> tuple[int, float]:
        work = []
        for s, rows in zip(fresh, rows_per_log * copies_of(fresh), strict=True):
            sid = session_pk.get_db_prep_value(s.id, connection)
            work += batches([(sid, *(prep(row[f.attname], connection)
                                     for f, prep in zip(fields, preps, strict=True)))
                             for row in rows])
        connection.ensure_connection()
        driver = connection.connection
        start = time.perf_counter()
        for batch in work:
            with transaction.atomic():
                cursor = driver.cursor()
                cursor.executemany(insert, batch)
                cursor.close()
        return sum(map(len, work)), time.perf_counter() - start

    def copies_of(fresh: list[Session]) -> int:
        return len(fresh) // len(logs)

    arms = {"governed": governed, "orm": orm, "executemany": executemany}
    progress(f"[B2 {label}] warm-up: one corpus copy through each arm, then check the arms "
             "stored the same rows")
    warm = {name: sessions(1) for name in ARMS}
    for name in ARMS:
        arms[name](warm[name])
    _check_same_rows(Event, [warm[name] for name in ARMS])

    copies, repeats = params["copies"], params["repeats"]
    seconds: dict[str, list[float]] = {name: [] for name in ARMS}
    events = 0
    for rep in range(repeats):
        order = ARMS[rep % 3:] + ARMS[:rep % 3]
        for name in order:
            events, elapsed = arms[name](sessions(copies))
            seconds[name].append(elapsed)
        progress(f"[B2 {label}] repeat {rep + 1}/{repeats}: " + ", ".join(
            f"{name} {rate(events / seconds[name][-1])}/s" for name in ARMS))

    if profile:
        fresh = sessions(copies)
        _profile(label, lambda: governed(fresh))

    eps = {name: [events / s for s in seconds[name]] for name in ARMS}
    return {
        "database": database_version(connection),
        "logs": len(logs),
        "events": events,
        "batches": sum(len(batches(rows)) for rows in rows_per_log) * copies,
        "governed_eps": round(median(eps["governed"])),
        "orm_eps": round(median(eps["orm"])),
        "executemany_eps": round(median(eps["executemany"])),
        "ratio_orm": round(median(
            [g / o for g, o in zip(eps["governed"], eps["orm"], strict=True)]), 3),
        "ratio_executemany": round(median(
            [g / x for g, x in zip(eps["governed"], eps["executemany"], strict=True)]), 3),
        "seconds": {name: [round(s, 3) for s in values] for name, values in seconds.items()},
    }


def _check_same_rows(event_model: Any, arms: list[list[Any]]) -> None:
    """Every arm stored the same column values for the same log (ids and hashes aside)."""
    columns = [f.attname for f in event_model._meta.concrete_fields
               if f.attname not in ("id", "session_id", "prev_hash", "hash")]

    def stored(session: Any) -> list[tuple[Any, ...]]:
        return list(event_model.objects.filter(session=session).order_by("seq")
                    .values_list(*columns))

    for sessions in zip(*arms, strict=True):
        first, *others = (stored(s) for s in sessions)
        if not first or any(other != first for other in others):
            raise AssertionError(f"B2 arms stored different rows for session {sessions[0].pk}")


def _profile(label: str, repetition: Any) -> None:
    import cProfile
    import io
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    events, elapsed = repetition()
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).sort_stats("cumulative")
    stats.print_stats(25)
    stats.print_callees("events_append")
    progress(f"[B2 {label}] cProfile of one governed repetition ({events} events, "
             f"{elapsed:.2f} s under the profiler):\n{out.getvalue()}")


# --- in the parent: reporting -----------------------------------------------------------------


def table(result: dict[str, Any]) -> str:
    rows = []
    for label, r in result["databases"].items():
        rows.append([
            r["database"], f"{r['events']:,}",
            rate(r["governed_eps"]), rate(r["orm_eps"]), rate(r["executemany_eps"]),
            f"**{r['ratio_orm']:.2f}**", f"{r['ratio_executemany']:.3f}",
            rate(RATE_CONTEXT[label]),
        ])
    p = result["params"]
    note = (f"Events/s are medians of {p['repeats']} repetitions; ratios are medians of the "
            f"per-repetition ratios. Batches of at most {p['batch']:,}, one session per log. "
            f"Goal: governed/ORM ≥ {RATIO_GOAL}. The design's governed rates (last column) are "
            f"context, not a goal here: they depend on the machine, the ratio does not.")
    header = ["database", "events/rep", "governed ev/s", "ORM bulk_create ev/s",
              "executemany ev/s", "governed/ORM", "governed/executemany",
              "context: design's governed ev/s"]
    return markdown_table(header, rows) + "\n\n" + note


def gates(result: dict[str, Any]) -> list[str]:
    return [f"{label}: governed/ORM {r['ratio_orm']:.2f} < {RATIO_GOAL}"
            for label, r in result["databases"].items() if r["ratio_orm"] < RATIO_GOAL]

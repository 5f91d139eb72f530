"""What every benchmark shares: fresh processes, throwaway databases, medians, progress.

Nothing here imports Django: a benchmark's parent process only orchestrates, and every
measurement runs in a fresh interpreter whose settings come from the environment it was given.
"""

from __future__ import annotations

import math
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from multiprocessing import get_context
from typing import Any
from urllib.parse import urlparse, urlunparse

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
# Where `python -m bench` keeps the served stack's log lines (a structured INFO line per request,
# thousands a run), so that the terminal shows progress and figures only. Unset (the smoke tests),
# they go to standard error as anywhere else.
SERVED_LOG = "BENCH_SERVED_LOG"
BENCH_DB_NAME = "bench_governor"


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def keep_served_log(text: str, source: str) -> None:
    """Add `text`, the log of `source`, to the run's served-stack log, when there is one."""
    if path := os.environ.get(SERVED_LOG):
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"===== {source}\n{text}")


def p95(values: list[float]) -> float:
    """Nearest-rank 95th percentile."""
    ordered = sorted(values)
    return ordered[math.ceil(0.95 * len(ordered)) - 1]


def database_version(connection: Any) -> str:
    if connection.vendor == "sqlite":
        import sqlite3

        return f"SQLite {sqlite3.sqlite_version}"
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        return f"PostgreSQL {cursor.fetchone()[0].split()[0]}"


def median(values: list[float]) -> float:
    return statistics.median(values)


def _set_env(env: dict[str, str]) -> None:
    os.environ.update(env)


def isolated(fn: Callable[..., Any], *args: Any, env: dict[str, str] | None = None) -> Any:
    """`fn(*args)` in a fresh interpreter (spawned, so no Django state is inherited), with `env`
    added to its environment before anything is imported. Exceptions come back with the child's
    traceback attached."""
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn"),
                             initializer=_set_env, initargs=(env or {},)) as pool:
        return pool.submit(fn, *args).result()


def django_setup() -> None:
    """In a child: prepare the var directory as every entry point does, configure Django from
    the environment and migrate the empty database. Tasks the measured code queues (a review's
    notifications, say) go to the filesystem broker under the throwaway var directory, never to
    a broker another governor's worker reads."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governor.settings")
    os.environ["GOVERNOR_BROKER_URL"] = "filesystem://"
    import django
    from django.core.management import call_command

    from governor.startup import prepare

    prepare()
    django.setup()
    if path := os.environ.get(SERVED_LOG):
        import logging

        log = open(path, "a", encoding="utf-8")  # noqa: SIM115 - open while the child lives
        for handler in logging.getLogger().handlers:
            if isinstance(handler, logging.StreamHandler):
                handler.setStream(log)
    call_command("migrate", verbosity=0, interactive=False)


# --- databases --------------------------------------------------------------------------------


def postgres_url(explicit: str | None) -> str | None:
    """The PostgreSQL server to use: --postgres, else $BENCH_DATABASE_URL, else the local test
    server if it answers. Only its host and credentials are used (see `postgres_database`)."""
    url = explicit or os.environ.get("BENCH_DATABASE_URL")
    if url:
        return url
    try:
        import psycopg

        with psycopg.connect(DEFAULT_POSTGRES, connect_timeout=2):
            return DEFAULT_POSTGRES
    except Exception:  # noqa: BLE001 - any failure means "no PostgreSQL here"
        return None


def _with_dbname(url: str, name: str) -> str:
    return urlunparse(urlparse(url)._replace(path="/" + name, query=""))


@contextmanager
def postgres_database(server_url: str) -> Iterator[str]:
    """A dedicated empty database on the server of `server_url`, dropped afterwards (rows of the
    events table cannot be deleted, so the whole database goes). Never touches other databases."""
    import psycopg

    maintenance = _with_dbname(server_url, "postgres")

    def admin(statement: str) -> None:
        with psycopg.connect(maintenance, autocommit=True) as conn:
            conn.execute(statement)

    admin(f"DROP DATABASE IF EXISTS {BENCH_DB_NAME} WITH (FORCE)")
    admin(f"CREATE DATABASE {BENCH_DB_NAME}")
    try:
        yield _with_dbname(server_url, BENCH_DB_NAME)
    finally:
        admin(f"DROP DATABASE IF EXISTS {BENCH_DB_NAME} WITH (FORCE)")


@contextmanager
def database_env(label: str, pg_server: str | None = None) -> Iterator[dict[str, str]]:
    """Environment for a child that gets a throwaway var dir and a throwaway database:
    label "sqlite" (a file in the var dir) or "postgresql" (on `pg_server`)."""
    var_dir = tempfile.mkdtemp(prefix="governor-bench-")
    try:
        env = {"GOVERNOR_VAR_DIR": var_dir, "DJANGO_SETTINGS_MODULE": "governor.settings"}
        if label == "sqlite":
            yield {**env, "DATABASE_URL": f"sqlite:///{var_dir}/bench.sqlite3"}
        elif label == "postgresql":
            assert pg_server is not None
            with postgres_database(pg_server) as url:
                yield {**env, "DATABASE_URL": url}
        else:
            raise ValueError(f"unknown database {label!r}")
    finally:
        shutil.rmtree(var_dir, ignore_errors=True)


def database_labels(postgres: str | None) -> list[str]:
    return ["sqlite", "postgresql"] if postgres else ["sqlite"]


# --- formatting -------------------------------------------------------------------------------


def rate(value: float) -> str:
    return f"{value:,.0f}"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---:" if i else "---" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)

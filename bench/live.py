"""A real governor for the benchmarks that need one (B1, B5): gunicorn and, when asked, a Celery
worker, started by `manage.py governor_serve` exactly as `tests/live.py` starts it for the
end-to-end tests (that module is reused, not copied), on a throwaway database: SQLite under a
temporary var dir by default, or a dedicated `bench_governor` database on a PostgreSQL server when
one is given. The broker is the one given, else Redis on 127.0.0.1:6379 (a dedicated database
number, flushed first) when it answers, else the embedded filesystem broker.

Nothing here imports Django: the benchmark's process is a client like any agent.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from bench.common import keep_served_log, postgres_database, progress
from governor.startup import redis_answers
from tests.live import Live, live_server

REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379


def flush_redis(url: str) -> None:
    import redis

    redis.Redis.from_url(url).flushdb()


def broker_for(explicit: str | None, redis_db: int) -> str:
    """The broker to use: `explicit`, else local Redis database `redis_db` (flushed) when Redis
    answers, else the filesystem broker under the server's var dir."""
    if explicit:
        if explicit.startswith("redis"):
            flush_redis(explicit)
        return explicit
    if redis_answers():
        url = f"redis://{REDIS_HOST}:{REDIS_PORT}/{redis_db}"
        flush_redis(url)
        return url
    return "filesystem://"


@contextmanager
def governor(*, worker: bool, broker: str, database_url: str | None = None,
             prefix: str = "governor-bench-",
             extra_env: dict[str, str] | None = None) -> Iterator[tuple[Live, Path]]:
    """A served governor and its temporary directory (workspaces live under
    `live.workspace_root`; the server's log is `tmp / "server.log"`; `extra_env` reaches the
    server's environment, e.g. a blob store). The directory is removed
    afterwards unless $BENCH_KEEP is set or something failed."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    (tmp / "tmp").mkdir()
    with ExitStack() as stack:
        # The stack's own temporary files (Celery's pool keeps a `pymp-*` directory, which a
        # worker stopped by a signal leaves behind) go with the rest of `tmp`.
        env: dict[str, str] = {"GOVERNOR_BROKER_URL": broker, "TMPDIR": str(tmp / "tmp"),
                               **(extra_env or {})}
        if database_url:
            env["DATABASE_URL"] = stack.enter_context(postgres_database(database_url))
        try:
            live = stack.enter_context(live_server(tmp, extra_env=env, worker=worker,
                                                      bootstrap=True))
        except Exception:
            log = tmp / "server.log"
            if log.exists():
                progress(log.read_text()[-4000:])
            raise
        try:
            yield live, tmp
        except BaseException:
            progress(f"kept {tmp} (server log, workspaces) for a look")
            raise
        finally:
            stack.close()  # the server stopped: its log is whole
            keep_served_log(server_log_tail(tmp, chars=-1), f"served at {live.url} ({tmp})")
    if not os.environ.get("BENCH_KEEP"):
        shutil.rmtree(tmp, ignore_errors=True)


def server_log_tail(tmp: Path, chars: int = 3000) -> str:
    """The last `chars` characters of the server's log (all of it for -1)."""
    log = tmp / "server.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    return text if chars < 0 else text[-chars:]


def load_profiles(live: Live, tmp: Path, profiles: list[dict[str, Any]], name: str) -> None:
    """`manage.py governor_profiles load` of `profiles` into the demo project, as an operator
    keeps them in a file."""
    path = tmp / f"{name}.json"
    path.write_text(json.dumps({"profiles": profiles}, indent=2))
    live.manage("governor_profiles", "load", str(path), "--project", "demo")


def set_project(live: Live, **options: str | int) -> None:
    """`manage.py governor_project set demo --option value ...`."""
    args: list[str] = []
    for name, value in options.items():
        args += ["--" + name.replace("_", "-"), str(value)]
    live.manage("governor_project", "set", "demo", *args)

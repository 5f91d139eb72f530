"""What each pytest-xdist worker has of its own (`make test` runs the suite in several processes),
set before Django reads its settings: pyproject.toml loads this module first (`-p tests.workers`).

- Redis: the database GOVERNOR_TEST_REDIS_URL names for the first worker (gw0), one lower for
  each further one (gw1: base − 1, ...), so that the workers' brokers, queues and flushes never
  meet (`tests.live.REDIS_URL`).
- The var directory (GOVERNOR_VAR_DIR; the checkout's var/ by default): a `pytest-gwN`
  directory inside it, so that the in-process tests' blob store, blob and tree caches and
  materialised trees are the worker's own.

The rest is already per process: pytest's tmp_path (one base directory per worker),
pytest-django's test databases (suffixed per worker, on SQLite and on PostgreSQL), the served
stacks (a free port, a copy of the worker's own template database, tests/live.py). A run in one
process changes nothing here."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/15"


def worker_redis_url(base: str, worker: str | None) -> str:
    """The Redis database of the pytest process `worker` names (None: a run in one process)."""
    index = int(worker.removeprefix("gw")) if worker else 0
    head, _, database = base.rpartition("/")
    number = int(database or 0) - index
    if number < 0:
        raise RuntimeError(f"GOVERNOR_TEST_REDIS_URL={base}: worker {worker} would need Redis "
                           f"database {number}; run fewer workers or start from a higher one")
    return f"{head}/{number}"


def worker_environment(environ: dict[str, str], worker: str | None) -> dict[str, str]:
    """What `worker` sets in its environment: nothing in a run of one process, nor once set
    (GOVERNOR_TEST_WORKER says so, in the worker and in the processes it starts)."""
    if not worker or environ.get("GOVERNOR_TEST_WORKER") == worker:
        return {}
    var = Path(environ.get("GOVERNOR_VAR_DIR") or ROOT / "var") / f"pytest-{worker}"
    return {"GOVERNOR_TEST_REDIS_URL": worker_redis_url(
                environ.get("GOVERNOR_TEST_REDIS_URL", DEFAULT_REDIS_URL), worker),
            "GOVERNOR_VAR_DIR": str(var), "GOVERNOR_TEST_WORKER": worker}


os.environ.update(worker_environment(dict(os.environ), os.environ.get("PYTEST_XDIST_WORKER")))

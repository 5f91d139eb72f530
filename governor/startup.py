"""What a process does before Django reads its settings, so that `governor/settings.py` only
reads the environment (no file is created and no socket opened at import).

`prepare()` runs first in every entry point — `manage.py` (and so `governor_serve`, which hands
its environment to gunicorn and the Celery worker), `governor/wsgi.py`, `governor/asgi.py` and
`governor/celery.py` (a worker started on its own) — and again harmlessly when one imports
another. It creates the var directory (0700), the SQLite database file and the generated secret
key (0600) when they are used and missing, and chooses the broker once: the configured one, else
local Redis if it answers, else the filesystem transport under var/, whose folders it creates.
The choice is written into the environment (`GOVERNOR_BROKER_URL`, and the reason as
`GOVERNOR_BROKER_CHOICE`), so the settings read it and every process started from this one
uses the same broker. The system checks (`governor/system_checks.py`) refuse to start when a
secret file is readable by others."""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import MutableMapping
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
LOCAL_REDIS = ("127.0.0.1", 6379)


def var_dir(environ: MutableMapping[str, str]) -> Path:
    return Path(environ.get("GOVERNOR_VAR_DIR", BASE_DIR / "var")).resolve()


def redis_answers(host: str = LOCAL_REDIS[0], port: int = LOCAL_REDIS[1]) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.3) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _create_owner_only(path: Path, content: str = "") -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as handle:
        handle.write(content)


def prepare(environ: MutableMapping[str, str] = os.environ, *,
            redis: tuple[str, int] = LOCAL_REDIS) -> None:
    var = var_dir(environ)
    var.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not environ.get("DATABASE_URL"):
        # Owner-only before SQLite first opens it: it holds the private signing keys, and SQLite
        # gives the -wal and -shm files the database's mode.
        _create_owner_only(var / "governor.sqlite3")
    if not environ.get("SECRET_KEY") and not environ.get("SECRET_KEY_FILE"):
        _create_owner_only(var / "secret_key", secrets.token_urlsafe(64))
    if not environ.get("GOVERNOR_BROKER_URL", "").strip():
        if redis_answers(*redis):
            # Database 0 of the host's Redis: every checkout started so on this host shares
            # its task queue, so the reason says so and how to take another (issue 40).
            environ["GOVERNOR_BROKER_URL"] = f"redis://{redis[0]}:{redis[1]}/0"
            environ["GOVERNOR_BROKER_CHOICE"] = (
                f"Redis answered on {redis[0]}:{redis[1]}; database 0 is shared with every "
                "other checkout on this host that found Redis too: set GOVERNOR_BROKER_URL="
                f"redis://{redis[0]}:{redis[1]}/N (N 1-15) to give this one a queue of its own")
        else:
            environ["GOVERNOR_BROKER_URL"] = "filesystem://"
            environ["GOVERNOR_BROKER_CHOICE"] = ("Redis did not answer; embedded filesystem "
                                                 f"broker under {var}")
    if environ["GOVERNOR_BROKER_URL"].strip().startswith("filesystem://"):
        for folder in ("queue", "processed"):
            (var / "broker" / folder).mkdir(parents=True, exist_ok=True)

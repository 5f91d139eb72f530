"""Run the web server and a Celery worker in the foreground until Ctrl-C (or SIGTERM), restarting
either one when it dies while the other keeps serving."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import connections
from django.db.backends.postgresql.base import DatabaseWrapper as PostgresWrapper

from governor.lib.metrics import MULTIPROC_ENV, prepare_multiprocess_directory
from governor.serving import connection_limit, raise_open_files_limit

STOP_SECONDS = 10  # after SIGTERM, what is left of a child's process group is killed
STABLE_SECONDS = 30  # a child that ran this long is restarted after the shortest delay
MAX_BACKOFF_SECONDS = 30


class Child:
    """One supervised program, in a process group of its own: Ctrl-C reaches only the
    supervisor, which stops everything in order, and whatever the program started (gunicorn's
    workers, Celery's pool and embedded beat) ends with it, never outlives it as an orphan."""

    def __init__(self, name: str, argv: list[str]) -> None:
        self.name, self.argv = name, argv
        self.process: subprocess.Popen[bytes] | None = None
        self.started = 0.0
        self.failures = 0  # deaths in a row, each within STABLE_SECONDS of its start
        self.restart_at = 0.0

    def start(self) -> int:
        self.process = subprocess.Popen(self.argv, start_new_session=True)  # noqa: S603
        self.started = time.monotonic()
        return self.process.pid

    def exited(self) -> bool:
        """Whether the program ended. It stays unreaped, so its pid, which is its group's id,
        cannot be given to another process before the group is cleaned up."""
        assert self.process is not None
        state = os.waitid(os.P_PID, self.process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        return state is not None

    def terminate(self) -> None:
        assert self.process is not None
        with suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)

    def reap(self) -> int:
        """Kill what is left of the group, reap the program and wait (briefly) until no process
        of the group is left; the program's exit status."""
        assert self.process is not None
        group = self.process.pid
        with suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)
        status = self.process.wait()
        self.process = None
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                os.killpg(group, 0)  # asks only whether a member is still alive
            except ProcessLookupError:
                break
            time.sleep(0.05)
        return status


def close_database_connections() -> None:
    """The supervisor uses no database once its children start, but its start-up checks opened
    a connection (on PostgreSQL, a pool keeping GOVERNOR_DB_POOL_MIN_SIZE open): closed, so the
    web processes' pools are all the connections a node holds."""
    for connection in connections.all(initialized_only=True):
        connection.close()
        if isinstance(connection, PostgresWrapper):
            connection.close_pool()  # type: ignore[attr-defined]  # Django 5.1+, not in django-stubs


class Command(BaseCommand):
    help = ("Serve the API, reviewer pages and admin (gunicorn running the ASGI application in "
            "uvicorn workers, so a long poll holds no thread) plus a Celery worker; a child that "
            "dies is restarted with backoff.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--bind", default=os.environ.get("GOVERNOR_BIND", "127.0.0.1:8000"))
        parser.add_argument("--workers", type=int, default=2, help="web processes")
        parser.add_argument("--no-worker", action="store_true", help="web only")

    def say(self, message: str) -> None:
        self.stdout.write(message)
        self.stdout.flush()

    def handle(self, *args: Any, **options: Any) -> None:
        # Before anything starts, so gunicorn, its workers and Celery inherit it: each client
        # connection holds a descriptor, and a common soft limit of 1,024 is reached by a few
        # hundred idle ones per process (issue 25). The hard limit is the administrator's.
        soft, hard = raise_open_files_limit()
        connections = connection_limit()  # refuses here a limit that leaves no room
        bin_dir = os.path.dirname(sys.executable)
        web = [
            os.path.join(bin_dir, "gunicorn"), "governor.asgi:application",
            # uvicorn with the connection timeouts and limits of governor/serving.py (the
            # keep-alive among them, GOVERNOR_KEEP_ALIVE_SECONDS: gunicorn's --keep-alive is
            # not used).
            "--bind", options["bind"], "--worker-class", "governor.serving.GovernorWorker",
            # Each request's log line is the application's (governor.middleware), not an access
            # log's: it carries the request id and is JSON when the logs are.
            "--workers", str(options["workers"]), "--timeout", "90",
            "--logger-class", "governor.serving.GovernorLogger",
            # The default control socket, ~/.gunicorn/gunicorn.ctl, is one for every instance.
            "--no-control-socket",
        ]
        worker = [
            os.path.join(bin_dir, "celery"), "-A", "governor.celery", "worker",
            "--loglevel", "INFO", "--concurrency", "2", "--without-gossip", "--without-mingle",
            # Periodic work (expiring reviews and lost runs) rides in the worker: one process.
            "--beat", "--schedule", str(settings.VAR_DIR / "celerybeat-schedule"),
        ]
        # One metrics directory for every process started here: gunicorn's workers and the
        # Celery worker add up on /metrics (governor.lib.metrics). Its own, var/metrics, is
        # emptied first; one the environment names may be shared with processes started
        # elsewhere (separate worker units on this host), so it is only created.
        if configured := os.environ.get(MULTIPROC_ENV):
            Path(configured).mkdir(mode=0o700, parents=True, exist_ok=True)
        else:
            prepare_multiprocess_directory(settings.VAR_DIR / "metrics")
            os.environ[MULTIPROC_ENV] = str(settings.VAR_DIR / "metrics")
        host = options["bind"]
        self.stdout.write(f"broker: {settings.BROKER_URL} ({settings.BROKER_REASON})")
        database = settings.DATABASES["default"]
        self.stdout.write(f"database: {str(database['ENGINE']).rsplit('.', 1)[-1]} "
                          f"{database['NAME']}")
        self.stdout.write(
            f"connections: at most {connections} per web process (open files {soft}/{hard}); "
            f"header {settings.GOVERNOR_HEADER_TIMEOUT_SECONDS} s, body pause "
            f"{settings.GOVERNOR_BODY_TIMEOUT_SECONDS} s, keep-alive "
            f"{settings.GOVERNOR_KEEP_ALIVE_SECONDS} s")
        # Links as people must open them: at GOVERNOR_PUBLIC_URL, the origin passkeys are
        # bound to, which may not be the address bound here (127.0.0.1 behind localhost).
        public = settings.PUBLIC_URL
        if urlsplit(public).netloc != host:
            self.stdout.write(f"listening on {host}; links use GOVERNOR_PUBLIC_URL {public}")
        self.say(self.style.SUCCESS(
            f"reviewer inbox {public}/reviews/  ·  API docs {public}/api/v1/docs  ·  "
            f"admin {public}/admin/  ·  Ctrl-C stops"
        ))
        close_database_connections()
        children = [Child("web", web)]
        if not options["no_worker"]:
            children.append(Child("worker", worker))

        stopping: list[int] = []
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda signum, frame: stopping.append(signum))
        try:
            while not stopping:
                self.supervise(children)
                time.sleep(0.2)
            self.say(f"{signal.Signals(stopping[0]).name}: stopping")
        finally:
            self.stop(children)
        self.say("stopped")

    def supervise(self, children: list[Child]) -> None:
        """Start what is due to start; clean up and schedule the restart of what died."""
        now = time.monotonic()
        for child in children:
            if child.process is None:
                if now >= child.restart_at:
                    self.say(f"started {child.name} (pid {child.start()})")
            elif child.exited():
                pid, ran = child.process.pid, now - child.started
                status = child.reap()
                child.failures = 0 if ran >= STABLE_SECONDS else child.failures + 1
                delay = min(MAX_BACKOFF_SECONDS, 2 ** child.failures)
                child.restart_at = time.monotonic() + delay
                self.say(f"{child.name} (pid {pid}) exited with status {status} after "
                         f"{ran:.0f} s; restarting in {delay} s")

    def stop(self, children: list[Child]) -> None:
        """SIGTERM to every group, up to STOP_SECONDS for the programs to end, then SIGKILL
        for what is left: no process and no listening port survive the supervisor."""
        running = [child for child in children if child.process is not None]
        for child in running:
            child.terminate()
        deadline = time.monotonic() + STOP_SECONDS
        while time.monotonic() < deadline and not all(child.exited() for child in running):
            time.sleep(0.1)
        for child in running:
            child.reap()

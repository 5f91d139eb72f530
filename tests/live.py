"""A real server for tests that need one: gunicorn (threaded, as `make run` starts it) on a
free port, against its own SQLite database, bootstrapped with the real management commands —
once per test run: each server starts from a copy of that database."""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.workers import DEFAULT_REDIS_URL

ROOT = Path(__file__).resolve().parents[1]
ADMIN_PASSWORD = "live-admin-password-1"


# This pytest process's Redis database (its own under pytest-xdist: tests/workers.py), the
# broker of the served stacks that need Redis.
REDIS_URL = os.environ.get("GOVERNOR_TEST_REDIS_URL", DEFAULT_REDIS_URL)


def stop_process_group(process: subprocess.Popen[Any], grace: float = 20) -> None:
    """End a process this test started with `start_new_session=True` and every process of its
    group: SIGTERM, wait for the leader without reaping it, then SIGKILL what is left. While
    the leader is unreaped its pid, the group id, belongs to no other process."""
    if process.returncode is not None:
        return  # reaped already: its pid may be another process's now
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while (os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
           and time.monotonic() < deadline):
        time.sleep(0.1)
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Live:
    url: str
    token: str
    env: dict[str, str]
    workspace_root: Path
    server_pid: int = 0  # `manage.py governor_serve`, parent of the web and worker processes
    review_mode: str = "required"  # the demo project's, as bootstrapped and as last set here

    def set_review_mode(self, mode: str) -> None:
        """The demo project's review mode, set with the operator's command when it differs
        from the one this object last saw (each command starts Django: ~2 s). For a server
        whose review mode only this method changes."""
        if mode != self.review_mode:
            self.manage("governor_project", "set", "demo", "--review-mode", mode)
            self.review_mode = mode

    def manage(self, *args: str) -> str:
        result = subprocess.run(  # noqa: S603
            [sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True,
            text=True, timeout=120, check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout

    def client(self, timeout: float = 70.0, connections: int = 100) -> httpx.Client:
        """`connections`: how many requests it may have open at once (httpx's client is
        thread-safe; one client serves many concurrent requests)."""
        return httpx.Client(base_url=self.url + "/api/v1", timeout=timeout,
                            headers={"Authorization": f"Bearer {self.token}"},
                            limits=httpx.Limits(max_connections=connections))


def served_env(tmp: Path, url: str, extra_env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a server whose var directory is `tmp/var`, reached at `url`."""
    workspace_root = tmp / "workspaces"
    env = {**os.environ, "GOVERNOR_VAR_DIR": str(tmp / "var"),
           "GOVERNOR_ADMIN_PASSWORD": ADMIN_PASSWORD,
           "GOVERNOR_WORKSPACE_ROOTS": str(workspace_root), "DEBUG": "0",
           "GOVERNOR_DEMO_WORKSPACE_ROOT": str(workspace_root),
           "GOVERNOR_BROKER_URL": "filesystem://", "GOVERNOR_PUBLIC_URL": url,
           **(extra_env or {})}
    if "DATABASE_URL" not in (extra_env or {}):
        env.pop("DATABASE_URL", None)
    return env


def bootstrapped(env: dict[str, str]) -> str:
    """`migrate` and `governor_bootstrap` in the installation `env` names; its agent token."""
    installation = Live(env["GOVERNOR_PUBLIC_URL"], "", env, Path(env["GOVERNOR_VAR_DIR"]))
    installation.manage("migrate", "--no-input", "-v", "0")
    out = installation.manage("governor_bootstrap")
    match = re.search(r"agent token:\s+(\S+)", out)
    assert match, out
    return match.group(1)


_template: tuple[Path, str] | None = None


def template_database() -> tuple[Path, str]:
    """One migrated and bootstrapped SQLite database per test run, and its agent token: the two
    commands as subprocesses cost ~7 s, and each server would otherwise run them before it
    serves."""
    global _template
    if _template is None:
        tmp = Path(tempfile.mkdtemp(prefix="governor-live-template-"))
        atexit.register(shutil.rmtree, tmp, ignore_errors=True)
        token = bootstrapped(served_env(tmp, "http://127.0.0.1"))
        _template = (tmp / "var" / "governor.sqlite3", token)
    return _template


def copy_template(var: Path, workspace_root: Path) -> str:
    """`var` holds a copy of the template database, owner-only as `make run` makes it, whose
    demo project works under `workspace_root` as a bootstrap there would have set; its token."""
    source, token = template_database()
    var.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = var / "governor.sqlite3"
    os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    with closing(sqlite3.connect(source)) as template, closing(sqlite3.connect(target)) as copy:
        template.backup(copy)
        copy.execute("UPDATE governor_project SET workspace_roots = ? WHERE slug = 'demo'",
                     (json.dumps([str(workspace_root)]),))
        copy.commit()
    return token


@contextmanager
def live_server(tmp: Path, *, extra_env: dict[str, str] | None = None,
                worker: bool = False, host: str = "127.0.0.1",
                preexec: Callable[[], None] | None = None,
                token: str | None = None, bootstrap: bool = False) -> Iterator[Live]:
    """`host`: the name the server is reached by (its GOVERNOR_PUBLIC_URL); passkeys need
    `localhost`, as an IP address cannot be a WebAuthn relying-party id. It listens on
    127.0.0.1 either way. `preexec` runs in the server's process before it starts (to lower a
    resource limit, say). `token`: the agent token of an installation already bootstrapped in
    `tmp/var` (a restored one), which is migrated as it is. `bootstrap`: migrate and bootstrap
    the server's own database instead of copying the run's template (the benchmarks, which
    measure a real installation and leave no files behind), as a server on PostgreSQL
    (`DATABASE_URL` in `extra_env`) always is."""
    port = free_port()
    url = f"http://{host}:{port}"  # the public URL may be another, in front of it (extra_env)
    env = served_env(tmp, url, extra_env)
    workspace_root = Path(env["GOVERNOR_DEMO_WORKSPACE_ROOT"])
    workspace_root.mkdir(parents=True, exist_ok=True)
    live = Live(url, token or "", env, workspace_root)
    if token is not None:
        live.manage("migrate", "--no-input", "-v", "0")
    elif bootstrap or "DATABASE_URL" in env:
        live.token = bootstrapped(env)
    else:
        live.token = copy_template(tmp / "var", workspace_root)
    command = [sys.executable, "manage.py", "governor_serve", "--bind", f"127.0.0.1:{port}"]
    if not worker:
        command.append("--no-worker")
    log = (tmp / "server.log").open("w")
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log,  # noqa: S603
                               stderr=subprocess.STDOUT, start_new_session=True,
                               preexec_fn=preexec)
    live.server_pid = process.pid
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(live.url + "/healthz", timeout=10).status_code in (200, 503):
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((tmp / "server.log").read_text())
            time.sleep(0.2)
        yield live
    finally:
        stop_process_group(process)
        log.close()

"""`make run`'s supervisor (manage.py governor_serve) with real processes: a child that dies is
restarted while the other keeps serving, and nothing it started outlives it — not a gunicorn
worker on the port, not Celery's embedded scheduler. Only processes this test started are
signalled, found by the pids the supervisor reports (never by name)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.api.test_contracts import readme_contract
from tests.conftest import INTENT
from tests.live import REDIS_URL, ROOT, copy_template, free_port

pytestmark = pytest.mark.redis

STARTED = re.compile(r"^started (\w+) \(pid (\d+)\)$", re.MULTILINE)


def start_time(pid: int) -> str | None:
    """The kernel's start time of a live (not zombie) process: with the pid, it names the
    process, even if the pid is later reused."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None if fields[0] == "Z" else fields[19]


def family(pid: int) -> dict[int, str]:
    """A process and all its descendants, each with its start time."""
    found: dict[int, str] = {}
    todo = [pid]
    while todo:
        current = todo.pop()
        started = start_time(current)
        if started is None:
            continue
        found[current] = started
        for task in Path(f"/proc/{current}/task").glob("*"):
            with suppress(FileNotFoundError, ProcessLookupError):  # the thread has ended
                todo += [int(child) for child in (task / "children").read_text().split()]
    return found


def alive(processes: dict[int, str]) -> dict[int, str]:
    return {pid: started for pid, started in processes.items() if start_time(pid) == started}


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is no listener
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@dataclass
class Served:
    process: subprocess.Popen[bytes]
    port: int
    log: Path
    token: str
    workspace_root: Path
    seen: dict[int, str] = field(default_factory=dict)  # every process of it ever observed

    def family(self, pid: int) -> dict[int, str]:
        found = family(pid)
        self.seen.update(found)
        return found

    def started(self) -> list[tuple[str, int]]:
        return [(name, int(pid)) for name, pid in STARTED.findall(self.log.read_text())]

    def pid(self, name: str) -> int:
        return [pid for child, pid in self.started() if child == name][-1]

    def worker_is_up(self) -> bool:
        """Celery's main process, its pool (2 processes) and its embedded beat all run."""
        return len(self.family(self.pid("worker"))) >= 4

    def api(self, timeout: float = 10) -> httpx.Client:
        return httpx.Client(base_url=f"http://127.0.0.1:{self.port}/api/v1", timeout=timeout,
                            headers={"Authorization": f"Bearer {self.token}"})

    def health(self) -> int:
        try:
            return httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=5).status_code
        except httpx.HTTPError:
            return 0


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    env = {**os.environ, "GOVERNOR_VAR_DIR": str(tmp_path / "var"),
           "GOVERNOR_DEMO_WORKSPACE_ROOT": str(tmp_path / "workspaces"),
           "GOVERNOR_BROKER_URL": REDIS_URL, "DEBUG": "0"}
    env.pop("DATABASE_URL", None)
    (tmp_path / "workspaces").mkdir()
    token = copy_template(tmp_path / "var", tmp_path / "workspaces")
    port, log = free_port(), tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(  # noqa: S603
            [sys.executable, "manage.py", "governor_serve", "--bind", f"127.0.0.1:{port}",
             "--workers", "2"],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    server = Served(process, port, log, token, tmp_path / "workspaces")
    try:
        wait_until(lambda: server.health() == 200 and len(server.started()) == 2, 60,
                   "the web server and the worker")
        wait_until(server.worker_is_up, 60, "the worker's children")
        yield server
    finally:  # whatever a failed test left: only processes this test started
        for pid in [process.pid] + [pid for _, pid in server.started()]:
            server.family(pid)
        for pid in alive(server.seen):
            os.kill(pid, signal.SIGKILL)
        process.wait()


def test_a_dead_worker_is_restarted_while_the_web_server_keeps_answering(
    served: Served,
) -> None:
    web, worker = served.pid("web"), served.pid("worker")
    old_worker = served.family(worker)  # the Celery main process, its pool and the embedded beat
    os.kill(worker, signal.SIGKILL)
    answers = []
    deadline = time.monotonic() + 60
    while served.pid("worker") == worker and time.monotonic() < deadline:
        answers.append(served.health())
        time.sleep(0.1)
    assert served.pid("worker") != worker, served.log.read_text()
    assert answers and set(answers) == {200}, answers
    assert served.pid("web") == web and served.process.poll() is None
    wait_until(lambda: not alive(old_worker), 10, "the dead worker's pool and scheduler to end")
    wait_until(served.worker_is_up, 60, "the new worker's children")
    assert f"worker (pid {worker}) exited with status -9" in served.log.read_text()

    old_web = served.family(web)  # the gunicorn master and its workers
    os.kill(web, signal.SIGKILL)
    wait_until(lambda: served.pid("web") != web, 30, "the web server's restart")
    wait_until(lambda: served.health() == 200, 60, "the new web server to answer")
    assert not alive(old_web)
    assert served.process.poll() is None


def long_poll_in_flight(served: Served) -> threading.Thread:
    """An agent waiting 60 s for a review decision: a request a gunicorn worker is busy with."""
    workspace = served.workspace_root / "waiting"
    workspace.mkdir()
    with served.api() as client:
        session = client.post("/sessions", json={
            "workspace": {"kind": "path", "path": str(workspace)}}).json()
        begun = client.post(f"/sessions/{session['id']}/contracts",
                            json=readme_contract(intent=INTENT))
        assert begun.status_code == 202, begun.text

    def wait() -> None:
        with suppress(httpx.HTTPError), served.api(timeout=90) as client:
            client.get(f"/sessions/{session['id']}/review", params={"wait": 60})

    waiting = threading.Thread(target=wait, daemon=True)
    waiting.start()
    time.sleep(1)
    return waiting


@pytest.mark.parametrize("stop", ["ctrl-c", "sigterm"])
def test_stopping_leaves_no_process_and_no_port_behind(served: Served, stop: str) -> None:
    long_poll_in_flight(served)
    everything = served.family(served.process.pid)
    assert len(everything) >= 8  # supervisor, gunicorn master + 2, celery + 2 + beat
    if stop == "ctrl-c":  # the terminal signals its whole foreground process group
        os.killpg(served.process.pid, signal.SIGINT)
    else:
        served.process.send_signal(signal.SIGTERM)
    assert served.process.wait(timeout=30) == 0
    assert "stopped" in served.log.read_text()
    wait_until(lambda: not alive(everything), 5, f"{alive(everything)} to end")
    assert port_is_free(served.port)

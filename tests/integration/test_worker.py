"""Verification end to end with the real parts: gunicorn, a Celery worker, Redis, bubblewrap.
Each test runs its own server and worker on its own port, database and Redis database, and
signals only the processes it started, so the suite passes beside any other instance."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from tests.api.test_contracts import readme_contract
from tests.live import REDIS_URL, ROOT, Live, live_server, stop_process_group

pytestmark = [pytest.mark.redis, pytest.mark.sandbox]

LEASE_SECONDS = 3  # the shortest the settings allow; the slow profile runs for 8 s
PROFILES = {"profiles": [
    {"id": "unit-tests", "description": "the unit tests", "argv": ["/bin/sh", "-c",
                                                                   "test -f ok"],
     "timeout_ms": 5000},
    {"id": "slow", "description": "sleeps past its timeout", "argv": ["/bin/sleep", "30"],
     "timeout_ms": 8000, "required": False},
    {"id": "fails", "description": "exits 7", "argv": ["/bin/sh", "-c", "exit 7"],
     "required": False},
    {"id": "missing", "description": "names no command",
     "argv": ["/usr/bin/definitely-not-here"], "required": False},
]}


@contextmanager
def server(tmp_path: Path, queue_timeout_seconds: int = 120) -> Iterator[Live]:
    """The web server alone, on this test's Redis database; the test starts the worker."""
    redis.Redis.from_url(REDIS_URL).flushdb()
    env = {"GOVERNOR_BROKER_URL": REDIS_URL, "GOVERNOR_RUN_LEASE_SECONDS": str(LEASE_SECONDS),
           "GOVERNOR_RUN_QUEUE_TIMEOUT_SECONDS": str(queue_timeout_seconds)}
    with live_server(tmp_path, extra_env=env) as live:
        profiles = tmp_path / "profiles.json"
        profiles.write_text(json.dumps(PROFILES))
        live.manage("governor_profiles", "load", str(profiles), "--project", "demo")
        live.manage("governor_project", "set", "demo", "--review-mode", "off")
        yield live


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    with server(tmp_path) as started:
        yield started


@contextmanager
def celery_worker(env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """A Celery worker with the periodic jobs embedded, as `make run` runs it, in a process
    group of its own: the test signals that group and nothing else on the machine."""
    var = Path(env["GOVERNOR_VAR_DIR"])
    with (var.parent / "worker.log").open("ab") as log:
        process = subprocess.Popen(  # noqa: S603 - a fixed argv
            [sys.executable, "-m", "celery", "-A", "governor.celery", "worker",
             "--loglevel", "INFO", "--concurrency", "1", "--without-gossip", "--without-mingle",
             "--beat", "--schedule", str(var / "celerybeat-schedule")],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            yield process
        finally:
            stop_process_group(process)


def finished(client: httpx.Client, run_id: str) -> dict[str, Any]:
    done = client.get(f"/code-verifications/{run_id}", params={"wait": 60}).json()
    assert done["state"] == "finished", done
    return dict(done["result"])


def run(client: httpx.Client, session_id: str, profile: str) -> dict[str, Any]:
    response = client.post(f"/sessions/{session_id}/code-verifications",
                           json={"profile": profile})
    assert response.status_code == 202, response.text
    return finished(client, response.json()["id"])


def verification_events(client: httpx.Client, session_id: str) -> list[dict[str, Any]]:
    events = client.get(f"/sessions/{session_id}/events").json()["events"]
    return [e for e in events if e["type"] == "reliability/code-verification"]


def session_in(live: Live, name: str) -> tuple[str, Path]:
    workspace = live.workspace_root / name
    workspace.mkdir()
    with live.client() as client:
        session = client.post("/sessions", json={"workspace": {"kind": "path",
                                                               "path": str(workspace)}}).json()
    return session["id"], workspace


def test_a_code_contract_is_certified_only_after_a_fresh_pass_through_the_worker(
    live: Live,
) -> None:
    session_id, workspace = session_in(live, "certify")
    (workspace / "README.md").write_text("## Install\n")
    with celery_worker(live.env), live.client() as client:
        begun = client.post(f"/sessions/{session_id}/code-contracts", json=readme_contract())
        assert begun.status_code == 201, begun.text
        assert client.post(f"/sessions/{session_id}/turn-stop").json()["action"] == "steer"
        (workspace / "ok").write_text("")
        required = [p["id"] for p in client.get("/code-profiles").json()["profiles"]
                    if p["required"]]
        assert "unit-tests" in required  # with the bootstrap's sample profile
        for profile in required:
            assert run(client, session_id, profile)["passed"] is True
        final = client.post(f"/sessions/{session_id}/turn-stop").json()
        assert final["terminal"]["status"] == "certified", final


def test_each_way_a_run_fails_arrives_through_the_worker_with_its_kind(live: Live) -> None:
    session_id, workspace = session_in(live, "failures")
    with celery_worker(live.env), live.client() as client:
        timed_out = run(client, session_id, "slow")
        # 8 s of running against a 3 s lease: the worker's heartbeat kept the run its own.
        assert (timed_out["failureKind"], timed_out["signal"]) == ("timeout", signal.SIGKILL)
        assert timed_out["durationMs"] >= 8000
        exited = run(client, session_id, "fails")
        assert (exited["failureKind"], exited["exitCode"]) == ("exit", 7)
        assert run(client, session_id, "missing")["failureKind"] == "configuration"
        workspace.rmdir()  # the bound directory is gone: nothing the command could fix
        assert run(client, session_id, "unit-tests")["failureKind"] == "infrastructure"
        results = [e["data"] for e in verification_events(client, session_id)]
    assert [r["failureKind"] for r in results] == ["timeout", "exit", "configuration",
                                                   "infrastructure"]
    assert not any(r["passed"] for r in results)


@contextmanager
def another_instance(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The worker of another instance of the service on this machine (its own database and
    broker), which no test of ours may touch."""
    other = Live("", "", {**os.environ, "GOVERNOR_VAR_DIR": str(tmp_path / "other" / "var"),
                          "GOVERNOR_BROKER_URL": "filesystem://"}, tmp_path)
    other.manage("migrate", "--no-input", "-v", "0")
    with celery_worker(other.env) as worker:
        yield worker


def test_a_worker_killed_mid_run_ends_it_as_infrastructure_within_seconds(
    live: Live, tmp_path: Path,
) -> None:
    session_id, _ = session_in(live, "killed")
    with (another_instance(tmp_path) as bystander, celery_worker(live.env) as worker,
          live.client() as client):
        run_id = client.post(f"/sessions/{session_id}/code-verifications",
                             json={"profile": "slow"}).json()["id"]
        deadline = time.monotonic() + 30
        while client.get(f"/code-verifications/{run_id}").json()["state"] != "running":
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.2)
        os.killpg(worker.pid, signal.SIGKILL)  # the worker this test started, all of it
        killed = time.monotonic()
        result = finished(client, run_id)
        took = time.monotonic() - killed
        assert (result["passed"], result["failureKind"]) == (False, "infrastructure")
        assert took < LEASE_SECONDS + 3, f"the lost run ended {took:.1f} s after the kill"
        # recorded once, never executed again behind anyone's back
        assert len(verification_events(client, session_id)) == 1
        assert bystander.poll() is None, "another instance's worker was signalled"


def test_a_run_whose_task_message_was_lost_ends_as_infrastructure_after_the_queue_timeout(
    tmp_path: Path,
) -> None:
    with server(tmp_path, queue_timeout_seconds=3) as live, live.client() as client:
        session_id, _ = session_in(live, "lost-message")
        requested = client.post(f"/sessions/{session_id}/code-verifications",
                                json={"profile": "unit-tests"})
        assert requested.status_code == 202, requested.text
        assert redis.Redis.from_url(REDIS_URL).delete("celery") == 1  # the message is lost
        with celery_worker(live.env):
            # Nobody reads the run: the worker's periodic job alone must end it.
            deadline = time.monotonic() + 30
            while not (events := verification_events(client, session_id)):
                assert time.monotonic() < deadline, "the lost run was never ended"
                time.sleep(0.5)
        [event] = events
        assert (event["data"]["passed"], event["data"]["failureKind"]) == (False,
                                                                            "infrastructure")
        assert event["data"]["verificationId"] == requested.json()["id"]


def test_with_the_broker_down_runs_are_refused_with_503_and_turn_stop_still_works(
    tmp_path: Path,
) -> None:
    env = {"GOVERNOR_BROKER_URL": "redis://127.0.0.1:9/0"}  # nothing listens on port 9
    with live_server(tmp_path, extra_env=env) as live:
        profiles = tmp_path / "profiles.json"
        profiles.write_text(json.dumps(PROFILES))
        live.manage("governor_profiles", "load", str(profiles), "--project", "demo")
        live.manage("governor_project", "set", "demo", "--review-mode", "off")
        session_id, workspace = session_in(live, "down")
        (workspace / "README.md").write_text("## Install\n")
        with live.client() as client:
            before = client.get(f"/sessions/{session_id}").json()["head"]
            refused = client.post(f"/sessions/{session_id}/code-verifications",
                                  json={"profile": "unit-tests"})
            assert refused.status_code == 503
            assert "broker" in refused.json()["error"]["message"]
            assert client.get(f"/sessions/{session_id}").json()["head"] == before
            client.post(f"/sessions/{session_id}/contracts", json=readme_contract())
            stop = client.post(f"/sessions/{session_id}/turn-stop").json()
            assert stop["terminal"]["status"] == "certified"

"""Verification end to end with the real parts: gunicorn, a Celery worker, Redis, bubblewrap."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import redis

from tests.api.test_contracts import readme_contract
from tests.live import Live, live_server

pytestmark = [pytest.mark.redis, pytest.mark.sandbox]

REDIS_URL = os.environ.get("GOVERNOR_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
PROFILES = {"profiles": [
    {"id": "unit-tests", "description": "the unit tests", "argv": ["/bin/sh", "-c",
                                                                   "test -f ok"],
     "timeout_ms": 5000},
    {"id": "slow", "description": "sleeps", "argv": ["/bin/sleep", "30"], "timeout_ms": 4000,
     "required": False},
]}


@pytest.fixture
def live(tmp_path: Path) -> Live:
    redis.Redis.from_url(REDIS_URL).flushdb()
    env = {"GOVERNOR_BROKER_URL": REDIS_URL, "GOVERNOR_RUN_LEASE_GRACE_SECONDS": "2"}
    with live_server(tmp_path, extra_env=env, worker=True) as server:
        profiles = tmp_path / "profiles.json"
        profiles.write_text(json.dumps(PROFILES))
        server.manage("governor_profiles", "load", str(profiles), "--project", "demo")
        server.manage("governor_project", "set", "demo", "--review-mode", "off")
        yield server


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
    with live.client() as client:
        begun = client.post(f"/sessions/{session_id}/code-contracts", json=readme_contract())
        assert begun.status_code == 201, begun.text
        assert client.post(f"/sessions/{session_id}/turn-stop").json()["action"] == "steer"
        (workspace / "ok").write_text("")
        required = [p["id"] for p in client.get("/code-profiles").json()["profiles"]
                    if p["required"]]
        assert "unit-tests" in required  # with the bootstrap's sample profile
        for profile in required:
            run = client.post(f"/sessions/{session_id}/code-verifications",
                              json={"profile": profile})
            assert run.status_code == 202, run.text
            done = client.get(f"/code-verifications/{run.json()['id']}",
                              params={"wait": 30}).json()
            assert done["state"] == "finished" and done["result"]["passed"] is True, done
        final = client.post(f"/sessions/{session_id}/turn-stop").json()
        assert final["terminal"]["status"] == "certified", final


def _worker_pids(live: Live) -> list[int]:
    out = subprocess.run(["pgrep", "-f", "celery -A governor.celery worker"],  # noqa: S607
                         capture_output=True, text=True, check=False).stdout
    return [int(pid) for pid in out.split()]


def test_a_worker_killed_mid_run_leaves_an_infrastructure_failure_never_a_pass(
    live: Live,
) -> None:
    session_id, _ = session_in(live, "killed")
    with live.client() as client:
        run = client.post(f"/sessions/{session_id}/code-verifications",
                          json={"profile": "slow"}).json()
        deadline = time.monotonic() + 20
        while client.get(f"/code-verifications/{run['id']}").json()["state"] != "running":
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.2)
        for pid in _worker_pids(live):
            os.kill(pid, signal.SIGKILL)
        done = client.get(f"/code-verifications/{run['id']}", params={"wait": 30}).json()
        assert done["state"] == "finished", done
        assert done["result"]["passed"] is False
        assert done["result"]["failureKind"] == "infrastructure"
        events = client.get(f"/sessions/{session_id}/events").json()["events"]
        verifications = [e for e in events if e["type"] == "reliability/code-verification"]
        assert len(verifications) == 1  # recorded once, never executed again behind our back


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

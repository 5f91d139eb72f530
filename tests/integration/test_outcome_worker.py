"""Outcome contracts with the real parts: gunicorn, two Celery workers each embedding a beat
scheduler, Redis, bubblewrap. The server observes a certified delivery on its own — no agent
call — and two schedulers observe each due time once."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.integration.test_worker import celery_worker
from tests.live import Live, live_server

pytestmark = [pytest.mark.redis, pytest.mark.sandbox]

REDIS_URL = os.environ.get("GOVERNOR_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
PROFILE = {
    "id": "checkout-conversion", "description": "Share of checkouts that complete",
    "argv": ["/usr/bin/cat", "/outcome-data/answer.json"],
    "metrics": [{"name": "conversion", "unit": "ratio"}],
    "target": {"id": "conversion-up", "metric": "conversion", "operator": "gte",
               "value": 0.031},
    "observe_every_ms": 60_000,
}


@pytest.fixture
def data_dir() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="outcome-data-", dir="/tmp"))  # noqa: S108
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def live(tmp_path: Path, data_dir: Path) -> Iterator[Live]:
    redis.Redis.from_url(REDIS_URL).flushdb()
    env = {"GOVERNOR_BROKER_URL": REDIS_URL, "GOVERNOR_OUTCOME_TICK_SECONDS": "1",
           "GOVERNOR_OUTCOME_DATA_DIR": str(data_dir)}
    with live_server(tmp_path, extra_env=env) as started:
        profiles = tmp_path / "profiles.json"
        profiles.write_text(json.dumps({"outcome_profiles": [PROFILE]}))
        started.manage("governor_profiles", "load", str(profiles), "--project", "demo")
        started.manage("governor_project", "set", "demo", "--review-mode", "off")
        yield started


def test_rule_4_the_server_observes_on_its_own_and_two_beats_observe_once(
        live: Live, data_dir: Path, tmp_path: Path) -> None:
    answer = data_dir / "answer.json"
    answer.write_text(json.dumps({"dataAsOf": int(time.time() * 1000),
                                  "metrics": {"conversion": 0.05}}))
    answer.chmod(0o644)
    workspace = live.workspace_root / "outcome"
    workspace.mkdir()
    (workspace / "README.md").write_text("## Install\n")
    second = {**live.env, "GOVERNOR_VAR_DIR": str(tmp_path / "var2")}
    Path(second["GOVERNOR_VAR_DIR"]).mkdir(mode=0o700)
    with live.client() as client, celery_worker(live.env), celery_worker(second):
        session = client.post("/sessions", json={"workspace": {"kind": "path",
                                                               "path": str(workspace)}}).json()
        begun = client.post(f"/sessions/{session['id']}/contracts", json={
            "objective": "Write README.md with an Install section",
            "claims": [{"id": "readme", "statement": "README.md documents installation",
                        "importance": "critical", "verification": "deterministic",
                        "check_ids": ["install"]}],
            "checks": [{"id": "install", "kind": "file_contains", "path": "README.md",
                        "text": "## Install"}],
            "outcome_profile": "checkout-conversion"})
        assert begun.status_code == 201, begun.text
        verified = client.post(f"/sessions/{session['id']}/verify").json()
        assert verified["decision"] == "certified", verified
        deadline = time.monotonic() + 60
        status = client.get(f"/sessions/{session['id']}/outcome").json()
        while not status["observations"] and time.monotonic() < deadline:
            time.sleep(0.5)
            status = client.get(f"/sessions/{session['id']}/outcome").json()
        time.sleep(4)  # several more ticks of both schedulers: the due time was claimed once
        status = client.get(f"/sessions/{session['id']}/outcome").json()
    assert [o["trigger"] for o in status["observations"]] == ["schedule"], status
    assert status["status"] == "achieved"  # not_before 0: the first observation judges
    assert status["terminal"]["status"] == "achieved"

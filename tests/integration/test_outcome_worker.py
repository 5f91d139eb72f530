"""Outcome contracts with the real parts: gunicorn, two Celery workers each embedding a beat
scheduler, Redis, bubblewrap. The server observes a certified delivery on its own — no agent
call — and two schedulers observe each due time once."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.api.test_contracts import readme_contract
from tests.integration.test_worker import celery_worker
from tests.live import REDIS_URL, Live, live_server
from tests.outcomes import Answers

pytestmark = [pytest.mark.redis, pytest.mark.sandbox]

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


def _certified_watching(client: Any, live: Live, name: str, profile: str) -> str:
    """A session whose README contract, watching `profile`'s outcome, is certified."""
    workspace = live.workspace_root / name
    workspace.mkdir()
    (workspace / "README.md").write_text("## Install\n")
    session = client.post("/sessions", json={"workspace": {"kind": "path",
                                                           "path": str(workspace)}}).json()
    begun = client.post(f"/sessions/{session['id']}/contracts",
                        json=readme_contract(outcome_profile=profile))
    assert begun.status_code == 201, begun.text
    assert client.post(f"/sessions/{session['id']}/verify").json()["decision"] == "certified"
    return str(session["id"])


def test_rule_4_the_server_observes_on_its_own_and_two_beats_observe_once(
        live: Live, data_dir: Path, tmp_path: Path) -> None:
    Answers(data_dir).metrics(0.05)
    second = {**live.env, "GOVERNOR_VAR_DIR": str(tmp_path / "var2")}
    Path(second["GOVERNOR_VAR_DIR"]).mkdir(mode=0o700)
    with live.client() as client, celery_worker(live.env), celery_worker(second):
        session = {"id": _certified_watching(client, live, "outcome", "checkout-conversion")}
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


def test_rule_4_an_observation_the_agent_asks_for_is_probed_by_a_worker_never_the_web_node(
        live: Live, data_dir: Path, tmp_path: Path) -> None:
    """The web node's data directory answers 0.01, the worker's 0.05: the observation says which
    process ran the probe. Without a worker the request is answered 202 with `pending`, and the
    observation comes once one runs; with one, `?wait=` answers 200 with it."""
    profiles = tmp_path / "slow.json"
    profiles.write_text(json.dumps({"outcome_profiles": [
        {**PROFILE, "id": "slow-to-judge", "not_before_ms": 86_400_000}]}))  # stays observing
    live.manage("governor_profiles", "load", str(profiles), "--project", "demo")
    Answers(data_dir).metrics(0.01)
    worker_data = Path(tempfile.mkdtemp(prefix="outcome-worker-data-", dir="/tmp"))  # noqa: S108
    worker_data.chmod(0o755)
    Answers(worker_data).metrics(0.05)
    worker_env = {**live.env, "GOVERNOR_OUTCOME_DATA_DIR": str(worker_data)}
    try:
        with live.client() as client:
            queued_session = _certified_watching(client, live, "queued", "slow-to-judge")
            queued = client.post(f"/sessions/{queued_session}/outcome/observations")
            assert queued.status_code == 202, queued.text
            assert queued.json()["pending"]["requestedAt"] > 0
            assert queued.json()["observations"] == []  # nothing probed on the web node
            with celery_worker(worker_env):
                deadline = time.monotonic() + 60
                agents: list[dict[str, Any]] = []
                while not agents and time.monotonic() < deadline:
                    time.sleep(0.5)
                    status = client.get(f"/sessions/{queued_session}/outcome").json()
                    agents = [o for o in status["observations"] if o["trigger"] == "agent"]
                assert [o["result"]["metrics"] for o in agents] == [{"conversion": 0.05}]
                assert "pending" not in status or status["pending"] is None

                waited_session = _certified_watching(client, live, "waited", "slow-to-judge")
                waited = client.post(f"/sessions/{waited_session}/outcome/observations",
                                     params={"wait": 30})
                assert waited.status_code == 200, waited.text
                [mine] = [o for o in waited.json()["observations"] if o["trigger"] == "agent"]
                assert mine["result"]["metrics"] == {"conversion": 0.05}
                assert waited.json().get("pending") is None
    finally:
        shutil.rmtree(worker_data, ignore_errors=True)


def test_with_the_broker_down_an_observation_is_refused_with_503_and_nothing_is_held(
        tmp_path: Path, data_dir: Path) -> None:
    """Nothing is recorded, nothing stays pending, and the agent's one-a-minute is given back:
    a second request is refused for the broker again, not for the rate limit."""
    env = {"GOVERNOR_BROKER_URL": "redis://127.0.0.1:9/0",  # nothing listens on port 9
           "GOVERNOR_OUTCOME_DATA_DIR": str(data_dir)}
    Answers(data_dir).metrics(0.05)
    with live_server(tmp_path, extra_env=env) as down, down.client() as client:
        profiles = tmp_path / "profiles.json"
        profiles.write_text(json.dumps({"outcome_profiles": [
            {**PROFILE, "id": "slow-to-judge", "not_before_ms": 86_400_000}]}))
        down.manage("governor_profiles", "load", str(profiles), "--project", "demo")
        down.manage("governor_project", "set", "demo", "--review-mode", "off")
        session_id = _certified_watching(client, down, "down", "slow-to-judge")
        for _ in range(2):
            refused = client.post(f"/sessions/{session_id}/outcome/observations")
            assert refused.status_code == 503, refused.text
            assert "broker" in refused.json()["error"]["message"]
        status = client.get(f"/sessions/{session_id}/outcome").json()
        assert status["observations"] == [] and status.get("pending") is None

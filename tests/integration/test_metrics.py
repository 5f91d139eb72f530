"""`/metrics` (docs/operations.md, "Metrics"): the served stack — `governor_serve` with two web
processes and its Celery worker — scraped by Debian's Prometheus server on loopback with the
bearer token, and PromQL over its HTTP API returning what the agent did. Every process here is
one this test started, on free ports, signalled through its own process group."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from governor.lib.metrics import prepare_multiprocess_directory
from governor.lib.queue import queue_depth
from tests.api.test_contracts import readme_contract
from tests.conftest import INTENT
from tests.live import REDIS_URL, Live, free_port, live_server, stop_process_group

pytestmark = [pytest.mark.sandbox]

METRICS_TOKEN = "metrics-token-for-the-scraper-0123456789"  # noqa: S105 - the test's own
PROFILES = {"profiles": [
    {"id": "passes", "description": "exits 0", "argv": ["/bin/true"], "required": False},
    {"id": "fails", "description": "exits 7", "argv": ["/bin/sh", "-c", "exit 7"],
     "required": False},
]}
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


@contextmanager
def prometheus(tmp: Path, target: str, token: str) -> Iterator[str]:
    """Debian's Prometheus server scraping `target` every second, with the right bearer token
    (job `governor`) and a wrong one (job `governor-wrong-token`); its HTTP API's URL."""
    tmp.mkdir(parents=True, exist_ok=True)
    config = tmp / "prometheus.yml"
    jobs = [("governor", token), ("governor-wrong-token", "not-the-metrics-token-at-all")]
    config.write_text(json.dumps({
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
        "scrape_configs": [{"job_name": job, "metrics_path": "/metrics",
                            "authorization": {"type": "Bearer", "credentials": credentials},
                            "static_configs": [{"targets": [target]}]}
                           for job, credentials in jobs],
    }))
    port = free_port()
    log = (tmp / "prometheus.log").open("w")
    process = subprocess.Popen(  # noqa: S603 - a fixed argv
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(url + "/-/ready", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((tmp / "prometheus.log").read_text())
            time.sleep(0.2)
        yield url
    finally:
        stop_process_group(process)
        log.close()


def query(url: str, promql: str) -> dict[str, float]:
    """An instant query's samples, by their labels other than job and instance."""
    answer = httpx.get(url + "/api/v1/query", params={"query": promql}, timeout=10).json()
    assert answer["status"] == "success", answer
    return {",".join(f"{k}={v}" for k, v in sorted(sample["metric"].items())
                     if k not in ("job", "instance", "__name__")): float(sample["value"][1])
            for sample in answer["data"]["result"]}


def settles(url: str, promql: str, expected: dict[str, float], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while (found := query(url, promql)) != expected and time.monotonic() < deadline:
        time.sleep(0.5)
    assert found == expected, promql


def agent_works(live: Live) -> None:
    """What the queries count: a withdrawn intent proposal; a contract steered once, then
    certified at its second attempt, then allowed; one passing and one failing run."""
    root = live.workspace_root
    with live.client() as client:
        live.manage("governor_project", "set", "demo", "--review-mode", "required")
        (root / "reviewed").mkdir()
        reviewed = client.post("/sessions", json={"workspace": {
            "kind": "path", "path": str(root / "reviewed")}}).json()["id"]
        proposed = client.post(f"/sessions/{reviewed}/contracts",
                               json=readme_contract(intent=INTENT))
        assert proposed.status_code == 202, proposed.text
        assert client.delete(f"/sessions/{reviewed}/review").status_code == 200

        live.manage("governor_project", "set", "demo", "--review-mode", "off")
        (root / "certified").mkdir()
        session = client.post("/sessions", json={"workspace": {
            "kind": "path", "path": str(root / "certified")}}).json()["id"]
        assert client.post(f"/sessions/{session}/contracts",
                           json=readme_contract()).status_code == 201
        first = client.post(f"/sessions/{session}/turn-stop").json()
        assert first["action"] == "steer" and not first.get("terminal"), first
        (root / "certified" / "README.md").write_text("# Tool\n\n## Install\n")
        second = client.post(f"/sessions/{session}/turn-stop").json()
        assert second["terminal"]["status"] == "certified", second
        assert client.post(f"/sessions/{session}/turn-stop").json()["action"] == "allow"

        for profile in ("passes", "fails"):
            queued = client.post(f"/sessions/{session}/code-verifications",
                                 json={"profile": profile})
            assert queued.status_code == 202, queued.text
            done = client.get(f"/code-verifications/{queued.json()['id']}",
                              params={"wait": 60}).json()
            assert done["state"] == "finished", done


def test_prometheus_scrapes_the_served_stack_with_the_bearer_token_and_counts_what_agents_did(
        tmp_path: Path) -> None:
    env = {"GOVERNOR_METRICS_TOKEN": METRICS_TOKEN}
    with live_server(tmp_path, extra_env=env, worker=True) as live:
        profiles = tmp_path / "profiles.json"
        profiles.write_text(json.dumps(PROFILES))
        live.manage("governor_profiles", "load", str(profiles), "--project", "demo")
        target = live.url.removeprefix("http://")
        with prometheus(tmp_path / "prometheus", target, METRICS_TOKEN) as url:
            agent_works(live)
            settles(url, "governor_turn_stops_total", {"action=allow": 1, "action=steer": 2})
            settles(url, "governor_terminals_total",
                    {"project=demo,status=certified": 1})
            settles(url, "governor_attempts_per_certification_sum", {"project=demo": 2})
            settles(url, "governor_review_decisions_total",
                    {"decision=cancelled,project=demo,stage=intent": 1})
            # Counted in the Celery worker's process, read through the web processes' files.
            settles(url, "sum by (outcome, profile) (governor_verification_runs_total)",
                    {"outcome=passed,profile=passes": 1, "outcome=exit,profile=fails": 1})
            settles(url, "sum by (status) (governor_http_requests_total{route="
                    "'/api/v1/sessions/<session_id>/turn-stop'})", {"status=200": 3})
            settles(url, "sum(governor_http_request_duration_seconds_count{route="
                    "'/api/v1/sessions/<session_id>/turn-stop'})", {"": 3})
            settles(url, "governor_queue_depth", {"": 0})
            settles(url, "governor_verification_runs_in_progress",
                    {"state=queued": 0, "state=running": 0})
            settles(url, "governor_waits_total", {"waiter=token": 2})
            assert query(url, "sum(governor_blob_store_bytes) > 0") != {}
            # The scrape with a wrong token fails (404): that job never sees a sample. Each
            # job scrapes on its own schedule, so its first `up` may still be on its way.
            settles(url, "up{job='governor'}", {"": 1.0})
            settles(url, "up{job='governor-wrong-token'}", {"": 0.0})
            assert query(url, "count({job='governor-wrong-token', __name__=~'governor_.*'})"
                         ) == {}


def exposition(live: Live, **headers: str) -> httpx.Response:
    return httpx.get(live.url + "/metrics", headers=headers, timeout=10)


def test_metrics_answer_only_the_bearer_of_the_metrics_token(tmp_path: Path) -> None:
    with live_server(tmp_path, extra_env={"GOVERNOR_METRICS_TOKEN": METRICS_TOKEN}) as live:
        for refused in (exposition(live), exposition(live, Authorization="Bearer wrong-token"),
                        exposition(live, Authorization=f"Bearer {live.token}"),  # an agent's
                        exposition(live, Authorization=METRICS_TOKEN)):
            assert refused.status_code == 404
            assert b"governor_" not in refused.content
        allowed = exposition(live, Authorization=f"Bearer {METRICS_TOKEN}")
        assert allowed.status_code == 200
        assert allowed.headers["Content-Type"].startswith("text/plain; version=")
        assert b"governor_http_requests_total" in allowed.content


def test_without_the_metrics_token_setting_metrics_do_not_exist(tmp_path: Path) -> None:
    with live_server(tmp_path) as live:
        answer = exposition(live, Authorization="Bearer anything-at-all")
        assert answer.status_code == 404
        assert b"governor_" not in answer.content


def test_the_serve_commands_own_metrics_directory_starts_empty_and_owner_only(
        tmp_path: Path) -> None:
    """What processes of an earlier `governor_serve` counted is not added to this one's."""
    directory = tmp_path / "var" / "metrics"
    directory.mkdir(parents=True)
    (directory / "counter_4242.db").write_bytes(b"an earlier run's counts")
    prepare_multiprocess_directory(directory)
    assert list(directory.iterdir()) == []
    assert directory.stat().st_mode & 0o777 == 0o700


@pytest.mark.redis
def test_queue_depth_counts_the_messages_waiting_in_redis_and_in_the_filesystem_broker(
        settings: Any, tmp_path: Path) -> None:
    broker = redis.Redis.from_url(REDIS_URL)
    broker.flushdb()
    settings.BROKER_URL = REDIS_URL
    try:
        assert queue_depth() == 0
        broker.rpush("celery", b"{}", b"{}")
        assert queue_depth() == 2
    finally:
        broker.flushdb()
    queue = tmp_path / "queue"
    queue.mkdir()
    for name in ("1_a.celery.msg", "2_b.celery.msg", "3_c.other.msg"):
        (queue / name).write_text("{}")
    settings.BROKER_URL = "filesystem://"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"data_folder_in": str(queue)}
    assert queue_depth() == 2  # the other queue's message is not the default queue's

"""Logs (docs/operations.md, "Logs"): the served stack with GOVERNOR_LOG_FORMAT=json writes one
JSON object per request with the request id it was given (and echoes it), the session, the
project and the token's prefix — never the token, the metrics token or what the agent sent; a
failed login is logged with the user name and address tried; a task's lines name the task and
what it works on; the periodic tasks say nothing while they do nothing, and one line when they do
something."""

from __future__ import annotations

import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.test_contracts import readme_contract
from tests.integration.test_metrics import METRICS_TOKEN, PROFILES
from tests.live import Live, live_server

MARKER = "agent-content-that-stays-in-the-session-log-only"


def json_lines(log: Path) -> list[dict[str, Any]]:
    lines = []
    for line in log.read_text().splitlines():
        if line.startswith("{"):
            lines.append(json.loads(line))
    return lines


def login_fails(live: Live, username: str) -> None:
    with httpx.Client(base_url=live.url, timeout=30) as browser:
        page = browser.get("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token, page.text
        refused = browser.post("/accounts/login/", data={
            "csrfmiddlewaretoken": token.group(1), "username": username,
            "password": "not-the-password-1"}, headers={"Referer": live.url + "/"})
        assert refused.status_code == 200  # the form again, with its error


@pytest.mark.sandbox
def test_json_request_lines_carry_the_ids_and_never_a_token_or_the_agents_content(
        tmp_path: Path) -> None:
    env = {"GOVERNOR_LOG_FORMAT": "json", "GOVERNOR_METRICS_TOKEN": METRICS_TOKEN}
    with live_server(tmp_path, extra_env=env) as live, live.client() as client:
        live.manage("governor_project", "set", "demo", "--review-mode", "off")
        workspace = live.workspace_root / "logged"
        workspace.mkdir()
        session = client.post("/sessions", json={"workspace": {"kind": "path",
                                                               "path": str(workspace)}})
        session_id = session.json()["id"]
        client.post(f"/sessions/{session_id}/contracts", json=readme_contract())
        given = client.post(f"/sessions/{session_id}/abstain", json={"reason": MARKER},
                            headers={"X-Request-ID": "client-chosen-id.42"})
        assert given.status_code == 200
        assert given.headers["X-Request-ID"] == "client-chosen-id.42"
        refused = httpx.get(f"{live.url}/api/v1/sessions/{session_id}", timeout=10,
                            headers={"Authorization": f"Bearer {live.token}x",
                                     "X-Request-ID": "not a plain id; " + "x" * 200})
        assert refused.status_code == 401
        assert re.fullmatch(r"[0-9a-f]{32}", refused.headers["X-Request-ID"])
        scraped = httpx.get(f"{live.url}/metrics", timeout=10,
                            headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
        assert scraped.status_code == 200
        login_fails(live, "mallory")
        time.sleep(0.5)  # the lines of the last requests reach the file
        log = tmp_path / "server.log"
        lines = json_lines(log)
        text = log.read_text()

    abstained = [line for line in lines if line.get("request_id") == "client-chosen-id.42"]
    assert abstained, text[-3000:]
    request = abstained[-1]
    assert request["event"] == "request" and request["level"] == "info"
    assert request["route"] == "/api/v1/sessions/<session_id>/abstain"
    assert (request["status"], request["method"]) == (200, "POST")
    assert request["session_id"] == session_id and request["project"] == "demo"
    assert request["token_prefix"] == live.token[:12]
    assert request["time"].endswith("Z") and request["duration_ms"] >= 0
    assert any(line.get("request_id") == refused.headers["X-Request-ID"]
               and line.get("status") == 401 for line in lines)
    failed = [line for line in lines if line.get("event") == "login failed"]
    assert failed and failed[0]["username"] == "mallory"
    assert failed[0]["address"] == "127.0.0.1" and failed[0]["level"] == "warning"
    assert "not-the-password-1" not in text
    assert live.token not in text and live.token[12:] not in text
    assert METRICS_TOKEN not in text
    assert MARKER not in text


def test_periodic_tasks_log_nothing_while_idle_and_one_line_when_they_end_a_lost_run(
        tmp_path: Path) -> None:
    # The lease's shortest: expire_lost_runs runs every second.
    env = {"GOVERNOR_LOG_FORMAT": "json", "GOVERNOR_RUN_LEASE_SECONDS": "3"}
    with live_server(tmp_path, extra_env=env, worker=True) as live, live.client() as client:
        profiles = tmp_path / "profiles.json"
        profiles.write_text(json.dumps(PROFILES))
        live.manage("governor_profiles", "load", str(profiles), "--project", "demo")
        workspace = live.workspace_root / "lost"
        workspace.mkdir()
        session_id = client.post("/sessions", json={"workspace": {
            "kind": "path", "path": str(workspace)}}).json()["id"]
        run_id = client.post(f"/sessions/{session_id}/code-verifications",
                             json={"profile": "passes"}).json()["id"]
        assert client.get(f"/code-verifications/{run_id}",
                          params={"wait": 60}).json()["state"] == "finished"
        time.sleep(8)  # some eight rounds of every periodic task with nothing to do
        log = tmp_path / "server.log"
        periodic = ("expire_lost_runs", "expire-lost-runs", "expire_due_reviews",
                    "Sending due task")
        said = [line for line in json_lines(log) if any(name in str(line.get("event"))
                                                        for name in periodic)]
        assert said == []  # (the worker's start-up banner lists the tasks; that is no log line)
        # A run whose worker died mid-run: running, its lease lapsed.
        lost = str(uuid.uuid4())
        live.manage("shell", "-c", (
            "from datetime import timedelta; from django.utils import timezone; "
            "from verification.models import VerificationRun as R; "
            f"run = R.objects.get(pk='{run_id}'); run.pk = '{lost}'; run.state = 'running'; "
            "run.result = None; run.event_seq = None; "
            "run.lease_expires_at = timezone.now() - timedelta(minutes=1); "
            "run._state.adding = True; run.save()"))
        # Watched in the log, not by reading the run: a read ends a lost run itself, and
        # the periodic task would then find nothing to end.
        def ended() -> list[dict[str, Any]]:
            return [line for line in json_lines(log) if "lost verification runs" in
                    str(line.get("event"))]
        deadline = time.monotonic() + 30
        while not ended() and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(2)  # two more rounds, which find nothing
        assert client.get(f"/code-verifications/{lost}").json()["state"] == "finished"
        ended_lines = ended()
    assert len(ended_lines) == 1, ended_lines
    assert ended_lines[0]["logger"] == "verification.tasks"
    assert ended_lines[0]["event"].startswith("ended 1 lost")


@pytest.mark.sandbox
def test_a_runs_worker_lines_name_the_task_the_run_its_session_and_project(
        tmp_path: Path) -> None:
    env = {"GOVERNOR_LOG_FORMAT": "json"}
    with live_server(tmp_path, extra_env=env, worker=True) as live, live.client() as client:
        profiles = tmp_path / "profiles.json"
        profiles.write_text(json.dumps({"profiles": [
            {"id": "missing", "description": "a command that is not there",
             "argv": ["/nonexistent/tool"], "required": False}]}))
        live.manage("governor_profiles", "load", str(profiles), "--project", "demo")
        workspace = live.workspace_root / "named"
        workspace.mkdir()
        session_id = client.post("/sessions", json={"workspace": {
            "kind": "path", "path": str(workspace)}}).json()["id"]
        run_ids = [client.post(f"/sessions/{session_id}/code-verifications",
                               json={"profile": "missing"}).json()["id"] for _ in range(2)]
        for run_id in run_ids:
            run = client.get(f"/code-verifications/{run_id}", params={"wait": 60}).json()
            assert run["state"] == "finished" and not run["result"]["passed"], run
        time.sleep(0.5)
        lines = json_lines(tmp_path / "server.log")
    for run_id in run_ids:  # each run's own ids: nothing carried over from the task before
        [said] = [line for line in lines if str(line.get("event")).startswith(
            f"run {run_id} (missing)")]
        assert said["level"] == "warning" and said["run_id"] == run_id
        assert (said["session_id"], said["project"]) == (session_id, "demo")
        assert said["task"] == "verification.tasks.run_verification" and said["task_id"]

"""Issue 17 item 2: web and worker processes are stateless. Two web nodes and two workers, each
with its own var directory, share only PostgreSQL, Redis and the blob store (a directory all
mount, as a shared volume would be). Whole sessions alternate their requests between the web
nodes, runs land on both workers, a reviewer's login made on one node works on the other, and
every export verifies. Nothing any node needs is a local file: the secret key comes from the
environment and the signing keys, login sessions and wait slots from the database."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import psycopg
import pytest
import redis

from tests.api.test_contracts import readme_contract
from tests.integration.test_remote_worker import upload
from tests.integration.test_worker import celery_worker
from tests.live import ADMIN_PASSWORD, REDIS_URL, ROOT, free_port, stop_process_group
from verification.models import RunState

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.sandbox]
SERVER = "postgres://postgres@127.0.0.1:5432"
SESSIONS = 4


@contextmanager
def scratch_database() -> Iterator[str]:
    name = f"governor_nodes_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{SERVER}/{name}"
    finally:
        with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def manage(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=180, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@contextmanager
def web_node(env: dict[str, str], port: int) -> Iterator[str]:
    var = Path(env["GOVERNOR_VAR_DIR"])
    with (var.parent / "web.log").open("wb") as log:
        process = subprocess.Popen(  # noqa: S603
            [sys.executable, "manage.py", "governor_serve", "--no-worker", "--workers", "1",
             "--bind", f"127.0.0.1:{port}"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/healthz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, \
                (var.parent / "web.log").read_text()
            time.sleep(0.2)
        yield url
    finally:
        stop_process_group(process)


def node_env(base: dict[str, str], home: Path) -> dict[str, str]:
    home.mkdir(mode=0o700, parents=True)
    return {**base, "GOVERNOR_VAR_DIR": str(home / "var")}


def test_two_web_nodes_and_two_workers_share_only_the_database_redis_and_the_blob_store(
        tmp_path: Path) -> None:
    redis.Redis.from_url(REDIS_URL).flushdb()
    with ExitStack() as stack:
        database = stack.enter_context(scratch_database())
        ports = [free_port(), free_port()]
        base = {**os.environ, "DATABASE_URL": database, "GOVERNOR_BROKER_URL": REDIS_URL,
                "GOVERNOR_BLOB_STORE": "filesystem",
                "GOVERNOR_BLOB_DIR": str(tmp_path / "shared-blobs"),
                "SECRET_KEY": secrets.token_urlsafe(50), "DEBUG": "0",
                "GOVERNOR_ADMIN_PASSWORD": ADMIN_PASSWORD,
                "GOVERNOR_PUBLIC_URL": f"http://127.0.0.1:{ports[0]}"}
        webs = [node_env(base, tmp_path / f"web{n}") for n in (1, 2)]
        workers = [node_env(base, tmp_path / f"worker{n}") for n in (1, 2)]
        manage(webs[0], "migrate", "--no-input", "-v", "0")
        token = re.search(r"agent token:\s+(\S+)", manage(webs[0], "governor_bootstrap"))
        assert token, "no agent token printed"
        profiles = tmp_path / "profiles.json"
        profiles.write_text(
            '{"profiles": [{"id": "checks", "description": "reads the tree, takes a moment",'
            ' "argv": ["/bin/sh", "-c", "grep -q Install README.md && sleep 1"],'
            ' "timeout_ms": 20000}]}')
        manage(webs[1], "governor_profiles", "load", str(profiles), "--project", "demo")
        manage(webs[1], "governor_project", "set", "demo", "--review-mode", "off")
        urls = [stack.enter_context(web_node(env, port)) for env, port in zip(webs, ports,
                                                                             strict=True)]
        for env in workers:
            stack.enter_context(celery_worker(env))
        # Both ready before the first run is queued: one that boots seconds earlier would
        # otherwise take every run.
        logs = [Path(env["GOVERNOR_VAR_DIR"]).parent / "worker.log" for env in workers]
        deadline = time.monotonic() + 90
        while not all(" ready." in log.read_text(errors="replace") for log in logs):
            assert time.monotonic() < deadline, [log.read_text()[-2000:] for log in logs]
            time.sleep(0.2)
        clients = [stack.enter_context(httpx.Client(
            base_url=url + "/api/v1", timeout=90,
            headers={"Authorization": f"Bearer {token.group(1)}"})) for url in urls]

        def whole_session(n: int) -> tuple[str, str, str]:
            a, b = clients[n % 2], clients[(n + 1) % 2]  # every step on the other node
            laptop = tmp_path / f"laptop{n}"
            laptop.mkdir()
            (laptop / "README.md").write_text(f"# Tool {n}\n\n## Install\n")
            session = a.post("/sessions", json={"workspace": {"kind": "snapshot"}}).json()["id"]
            tree = upload(b, session, laptop)
            contract = {**readme_contract(), "tree": tree,
                        "checks": [*readme_contract()["checks"],
                                   {"id": "runs", "kind": "code_verification_succeeded",
                                    "profile": "checks"}]}
            contract["claims"][0]["check_ids"].append("runs")
            begun = a.post(f"/sessions/{session}/contracts", json=contract)
            assert begun.status_code == 201, begun.text
            run = b.post(f"/sessions/{session}/code-verifications",
                         json={"profile": "checks", "tree": tree})
            assert run.status_code == 202, run.text
            done = a.get(f"/code-verifications/{run.json()['id']}", params={"wait": 60}).json()
            assert done["state"] == RunState.FINISHED and done["result"]["passed"], done
            final = b.post(f"/sessions/{session}/turn-stop", json={"tree": tree}).json()
            assert final.get("terminal", {}).get("status") == "certified", final
            export = a.get(f"/sessions/{session}/export")
            assert export.status_code == 200, export.text
            path = tmp_path / f"export{n}.jsonl"
            path.write_bytes(export.content)
            return session, run.json()["id"], str(path)

        with ThreadPoolExecutor(max_workers=SESSIONS) as pool:
            done = list(pool.map(whole_session, range(SESSIONS)))

        for _, _, path in done:
            verified = subprocess.run(  # noqa: S603
                [sys.executable, "-m", "governor.verify", path], cwd=ROOT,
                capture_output=True, text=True, timeout=60, check=False)
            assert verified.returncode == 0, verified.stdout + verified.stderr
        with psycopg.connect(database) as db:
            owners = {row[0] for row in db.execute(
                "SELECT DISTINCT lease_owner FROM verification_verificationrun")}
        assert len(owners) == 2, owners  # both workers ran some

        # A reviewer's login made on one node is a login on the other (sessions, CSRF and
        # the secret key are shared through the database and the environment, not var/).
        with httpx.Client(timeout=30) as browser:
            form = browser.get(urls[0] + "/accounts/login/")
            csrf = browser.cookies["csrftoken"]
            logged_in = browser.post(urls[0] + "/accounts/login/", data={
                "username": "admin", "password": ADMIN_PASSWORD, "csrfmiddlewaretoken": csrf},
                headers={"Referer": urls[0] + "/accounts/login/"})
            assert form.status_code == 200 and logged_in.status_code == 302, logged_in.text
            inbox = browser.get(urls[1] + "/reviews/")
            assert inbox.status_code == 200 and "Log in" not in inbox.text, inbox.status_code

    for home in [*webs, *workers]:  # each node's own var/ holds nothing the others need
        assert not (Path(home["GOVERNOR_VAR_DIR"]) / "governor.sqlite3").exists()
        assert not (Path(home["GOVERNOR_VAR_DIR"]) / "secret_key").exists()

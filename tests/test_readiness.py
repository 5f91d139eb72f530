"""`/readyz` (docs/operations.md, "Health and readiness"): the database, the broker, the blob
store and the signing keys, each really broken in turn — a database and a broker on closed
ports, a blob store directory that is a file, an active key whose private half no longer
matches — and named in the answer; `/healthz` stays cheap and answers 200 with the blob store
broken. Each case is the real application in a process of its own, set up from its
environment as `manage.py` sets it up. The answer is public: it names the failed parts only
(never a path, a host name, a process id or an address); why each failed is in the log. And
concurrent probes of one served process each probe the blob store under their own name."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.live import ROOT, free_port, live_server

PROBE = """
import json, os
from governor.startup import prepare
prepare()
import django
django.setup()
from django.test import Client
from governor.services.keys import key_active
if os.environ.get("PROBE_SIGN_FIRST"):
    key_active()
if os.environ.get("PROBE_BREAK_KEY"):
    from governor.models import SigningKey
    SigningKey.objects.filter(active=True).update(private_key=bytes(32))
client = Client()
ready, health = client.get("/readyz"), client.get("/healthz")
print(json.dumps({"ready": [ready.status_code, ready.json()],
                  "health": [health.status_code, health.json()]}))
"""


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite database under a var directory of its own."""
    var = tmp_path_factory.mktemp("ready") / "var"
    env = {**os.environ, "GOVERNOR_VAR_DIR": str(var), "GOVERNOR_BROKER_URL": "filesystem://"}
    env.pop("DATABASE_URL", None)
    subprocess.run([sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"],  # noqa: S603
                   cwd=ROOT, env=env, check=True, timeout=120)
    return var


def probe(var: Path, tmp: Path, **extra: str) -> dict[str, Any]:
    """/readyz and /healthz of the application started with `extra` in its environment, on
    a copy of the migrated database; `log`: what the application logged."""
    own = tmp / "var"
    shutil.copytree(var, own)
    env = {**os.environ, "GOVERNOR_VAR_DIR": str(own), "GOVERNOR_BROKER_URL": "filesystem://",
           "ALLOWED_HOSTS": "testserver", "DEBUG": "0", **extra}
    if "DATABASE_URL" not in extra:
        env.pop("DATABASE_URL", None)
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env,  # noqa: S603
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return {**json.loads(result.stdout.strip().splitlines()[-1]), "log": result.stderr}


def names_the_part_only(body: dict[str, Any], failed: list[str], *secrets: str) -> None:
    """The public answer is the status and the failed parts, and none of `secrets`."""
    assert body == {"status": "failed", "failed": failed}, body
    text = json.dumps(body)
    for secret in (socket.gethostname(), *secrets):
        assert secret not in text


def test_ready_when_the_database_broker_blob_store_and_signing_keys_all_work(
        migrated: Path, tmp_path: Path) -> None:
    answer = probe(migrated, tmp_path, PROBE_SIGN_FIRST="1")
    status, body = answer["ready"]
    assert (status, body) == (200, {"status": "ready", "failed": []})
    assert not list((tmp_path / "var" / "blobs").rglob("probe*"))  # the probe was deleted


def test_a_broker_on_a_closed_port_is_named(migrated: Path, tmp_path: Path) -> None:
    closed = free_port()  # bound and released: nothing listens there
    answer = probe(migrated, tmp_path, GOVERNOR_BROKER_URL=f"redis://127.0.0.1:{closed}/0")
    status, body = answer["ready"]
    assert status == 503
    names_the_part_only(body, ["broker"], str(closed), "127.0.0.1")
    assert "readiness: broker failed" in answer["log"] and str(closed) in answer["log"]
    assert answer["health"][0] == 200  # degraded, still serving


def test_a_database_on_a_closed_port_is_named(migrated: Path, tmp_path: Path) -> None:
    closed = free_port()
    # Without the pool, whose wait for a connection (GOVERNOR_DB_POOL_TIMEOUT) would say only
    # that none came: psycopg's own error names the server.
    answer = probe(migrated, tmp_path, GOVERNOR_DB_POOL_MAX_SIZE="0",
                   DATABASE_URL=f"postgres://governor@127.0.0.1:{closed}/governor")
    status, body = answer["ready"]
    assert status == 503 and "database" in body["failed"], body
    names_the_part_only(body, body["failed"], str(closed), "127.0.0.1")
    assert "readiness: database failed" in answer["log"]
    assert "OperationalError" in answer["log"] and str(closed) in answer["log"]
    assert answer["health"][0] == 503


def test_a_blob_store_that_cannot_be_written_is_named_and_healthz_stays_cheap(
        migrated: Path, tmp_path: Path) -> None:
    not_a_directory = tmp_path / "blobs-is-a-file"
    not_a_directory.write_text("")
    answer = probe(migrated, tmp_path, GOVERNOR_BLOB_DIR=str(not_a_directory))
    status, body = answer["ready"]
    assert status == 503
    names_the_part_only(body, ["blob_store"], str(tmp_path), "probe", str(os.getpid()))
    assert "readiness: blob_store failed" in answer["log"]
    assert str(not_a_directory) in answer["log"]
    assert answer["health"][0] == 200  # /healthz never touches the blob store


def test_an_active_signing_key_that_no_longer_signs_is_named(migrated: Path,
                                                             tmp_path: Path) -> None:
    answer = probe(migrated, tmp_path, PROBE_SIGN_FIRST="1", PROBE_BREAK_KEY="1")
    status, body = answer["ready"]
    assert status == 503
    names_the_part_only(body, ["signing_keys"], "ed25519:")
    assert "InvalidSignature" in answer["log"]


def test_concurrent_probes_of_one_served_process_are_all_ready(tmp_path: Path) -> None:
    """Each probe writes, reads back and deletes its own object: eight threads at once against
    the served stack (a load balancer and an orchestrator probing together) all answer 200.
    When every probe of a process used one name, about one in thirty answered a false 503."""
    with live_server(tmp_path) as live, httpx.Client(
            base_url=live.url, timeout=60, limits=httpx.Limits(max_connections=8)) as client:

        def ready(_: int) -> tuple[int, Any]:
            answer = client.get("/readyz")
            return answer.status_code, answer.json()

        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(pool.map(ready, range(300)))
    refused = [answer for answer in answers if answer[0] != 200]
    assert not refused, f"{len(refused)} of 300 were not ready: {refused[:3]}"
    assert not list((tmp_path / "var").rglob("probe*"))  # every probe deleted its object

"""Issue 14 item 4, rules §11.3: a worker that shares no disk with the agent or the server.

The agent uploads its directory as a snapshot and deletes it; the worker runs with its own var
directory (its own blob cache and private trees), reaching the server only through the database,
the broker and the blob store — the filesystem store (a directory both mount, as a shared volume
would be) and a real S3-compatible server. It materialises the snapshot, runs the profile in the
bubblewrap sandbox there, and deletes it."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from governor.domain.tree import hash_tree
from tests.api.test_contracts import readme_contract
from tests.integration.test_worker import celery_worker, finished
from tests.live import REDIS_URL, Live, live_server
from tests.s3_server import S3Server, s3_server  # noqa: F401 - the fixture

pytestmark = [pytest.mark.redis, pytest.mark.sandbox]

PROFILES = {"profiles": [
    {"id": "checks", "description": "reads the tree as uploaded",
     "argv": ["/bin/sh", "-c", 'grep -q Install README.md && test -x run.sh && '
                               'test "$(readlink docs)" = README.md && ./run.sh'],
     "timeout_ms": 20000},
    {"id": "writes", "description": "writes into a private copy", "required": False,
     "sandbox_mode": "workspace-write",
     "argv": ["/bin/sh", "-c", "echo changed > README.md && echo new > new.txt"],
     "timeout_ms": 20000},
]}


def upload(client: httpx.Client, session: str, root: Path) -> str:
    """The agent's side (issue 14 item 2): the tree computed locally, the missing blobs sent."""
    tree = hash_tree(str(root), max_files=1000, max_bytes=10**7)
    contents = {e.blob: (os.fsencode(os.readlink(root / e.path)) if e.mode == "120000"
                         else (root / e.path).read_bytes()) for e in tree.manifest}
    missing = client.post("/blobs/missing", json={"blobs": sorted(contents)}).json()["missing"]
    for blob in missing:
        response = client.put(f"/blobs/{blob}", content=contents[blob],
                              headers={"Content-Type": "application/octet-stream"})
        assert response.status_code == 201, response.text
    response = client.post(f"/sessions/{session}/snapshots", json={"entries": [
        {"path": e.path, "mode": e.mode, "blob": e.blob} for e in tree.manifest]})
    assert response.status_code == 201, response.text
    assert response.json()["tree"] == tree.id
    return tree.id


@pytest.fixture(params=["filesystem", "s3"])
def store_env(request: Any, tmp_path: Path) -> dict[str, str]:
    if request.param == "s3":
        server: S3Server = request.getfixturevalue("s3_server")
        return server.environment(server.bucket())
    return {"GOVERNOR_BLOB_STORE": "filesystem", "GOVERNOR_BLOB_DIR": str(tmp_path / "shared")}


@pytest.fixture
def live(tmp_path: Path, store_env: dict[str, str]) -> Iterator[Live]:
    redis.Redis.from_url(REDIS_URL).flushdb()
    with live_server(tmp_path / "server", extra_env={"GOVERNOR_BROKER_URL": REDIS_URL,
                                                     **store_env}) as started:
        profiles = tmp_path / "profiles.json"
        profiles.write_text(json.dumps(PROFILES))
        started.manage("governor_profiles", "load", str(profiles), "--project", "demo")
        started.manage("governor_project", "set", "demo", "--review-mode", "off")
        yield started


def test_a_worker_without_the_agents_directory_runs_the_uploaded_tree(
        live: Live, tmp_path: Path) -> None:
    laptop = tmp_path / "laptop"  # the agent's machine: no workspace root of the server's
    laptop.mkdir()
    (laptop / "README.md").write_text("# Tool\n\n## Install\n")
    (laptop / "run.sh").write_text("#!/bin/sh\nexit 0\n")
    os.chmod(laptop / "run.sh", 0o755)
    os.symlink("README.md", laptop / "docs")
    worker_var = tmp_path / "worker-var"
    server_db = Path(live.env["GOVERNOR_VAR_DIR"]) / "governor.sqlite3"
    worker_env = {**live.env, "GOVERNOR_VAR_DIR": str(worker_var),
                  "DATABASE_URL": f"sqlite:///{server_db}"}
    with live.client() as client:
        session = client.post("/sessions", json={"workspace": {"kind": "snapshot"}}).json()["id"]
        tree = upload(client, session, laptop)
        shutil.rmtree(laptop)  # nothing of the agent's is left on any disk
        contract = {**readme_contract(), "tree": tree,
                    "checks": [*readme_contract()["checks"],
                               {"id": "runs", "kind": "code_verification_succeeded",
                                "profile": "checks"}]}
        contract["claims"][0]["check_ids"].append("runs")
        begun = client.post(f"/sessions/{session}/contracts", json=contract)
        assert begun.status_code == 201, begun.text
        with celery_worker(worker_env):
            # A workspace-write run writes a private copy: it counts for the snapshot given.
            wrote = client.post(f"/sessions/{session}/code-verifications",
                                json={"profile": "writes", "tree": tree}).json()
            written = finished(client, wrote["id"])
            assert written["passed"] is True, written
            assert written["tree"]["id"] == written["treeBefore"]["id"] == tree
            requested = client.post(f"/sessions/{session}/code-verifications",
                                    json={"profile": "checks", "tree": tree})
            assert requested.status_code == 202, requested.text
            result = finished(client, requested.json()["id"])
            assert result["passed"] is True, result
            assert result["tree"]["id"] == tree
            # The task deletes its private tree after the result is committed, so the answer
            # can come first; the worker is stopped only once that is done.
            deadline = time.monotonic() + 30
            while any((worker_var / "materialised").iterdir()) and time.monotonic() < deadline:
                time.sleep(0.1)
        final = client.post(f"/sessions/{session}/turn-stop", json={"tree": tree}).json()
        assert final.get("terminal", {}).get("status") == "certified", final["attempt"]["results"]
    assert list((worker_var / "materialised").iterdir()) == []  # each private tree deleted
    assert any((worker_var / "blob-cache").rglob("*"))  # the worker's own blob cache
    assert not (worker_var / "blobs").exists()  # the store is elsewhere

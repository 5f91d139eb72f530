"""Many agents can wait for a review decision at once without tying up the server."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from tests.api.test_contracts import readme_contract
from tests.conftest import INTENT
from tests.live import live_server

WAITERS = 50


def test_fifty_concurrent_review_waits_are_served(tmp_path: Path) -> None:
    with live_server(tmp_path) as live, live.client() as client:
        session_ids = []
        for n in range(WAITERS):
            workspace = live.workspace_root / f"w{n}"
            workspace.mkdir()
            session = client.post("/sessions", json={
                "workspace": {"kind": "path", "path": str(workspace)}}).json()
            begun = client.post(f"/sessions/{session['id']}/contracts",
                                json=readme_contract(intent=INTENT))
            assert begun.status_code == 202, begun.text
            session_ids.append(session["id"])

        def wait(session_id: str) -> tuple[int, str, float]:
            started = time.monotonic()
            with live.client() as own:
                response = own.get(f"/sessions/{session_id}/review", params={"wait": 6})
            return (response.status_code, response.json()["review"]["status"],
                    time.monotonic() - started)

        with ThreadPoolExecutor(max_workers=WAITERS) as pool:
            futures = [pool.submit(wait, session_id) for session_id in session_ids]
            time.sleep(1.5)  # every waiter is now parked on the server
            started = time.monotonic()
            health = httpx.get(live.url + "/healthz", timeout=5)
            health_seconds = time.monotonic() - started
            withdrawn = client.delete(f"/sessions/{session_ids[0]}/review")
            results = [future.result(timeout=30) for future in futures]

        assert health.status_code == 200 and health_seconds < 2, health_seconds
        assert withdrawn.status_code == 200
        assert all(status == 200 for status, _, _ in results)
        first_status, _, first_seconds = results[0]
        assert results[0][1] == "cancelled" and first_seconds < 5, results[0]
        assert all(state == "pending" and seconds >= 5.5 for _, state, seconds in results[1:])

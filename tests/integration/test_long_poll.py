"""Many agents can wait for a review decision at once without tying up the server (the served
ASGI stack: a wait holds no thread), and no one token holds more than
GOVERNOR_MAX_WAITS_PER_TOKEN waits at once."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from tests.api.test_contracts import readme_contract
from tests.conftest import INTENT
from tests.live import Live, live_server

WAITERS = 50


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """One server with the default caps for the tests that neither stop nor reconfigure it;
    each gives back every wait slot it took."""
    with live_server(tmp_path_factory.mktemp("long-poll")) as live:
        yield live


def test_fifty_concurrent_review_waits_are_served(tmp_path: Path) -> None:
    cap = {"GOVERNOR_MAX_WAITS_PER_TOKEN": str(WAITERS)}  # as fifty agents' tokens would allow
    with live_server(tmp_path, extra_env=cap) as live, live.client() as client:
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
            response = waiters.get(f"/sessions/{session_id}/review", params={"wait": 6})
            return (response.status_code, response.json()["review"]["status"],
                    time.monotonic() - started)

        with (live.client(connections=WAITERS) as waiters,
              ThreadPoolExecutor(max_workers=WAITERS) as pool):
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


def pending_review(live: Live, client: httpx.Client) -> str:
    """A session whose intent proposal waits for review: its review long-polls until `wait`."""
    workspace = Path(tempfile.mkdtemp(prefix="w", dir=live.workspace_root))
    session = client.post("/sessions", json={
        "workspace": {"kind": "path", "path": str(workspace)}}).json()
    begun = client.post(f"/sessions/{session['id']}/contracts", json=readme_contract(intent=INTENT))
    assert begun.status_code == 202, begun.text
    return f"/sessions/{session['id']}/review"


def second_token(live: Live) -> Live:
    secret = live.manage("governor_token", "create", "--project", "demo", "--owner",
                         "demo-agent").split()[-1]
    return replace(live, token=secret)


def test_140_waits_from_one_token_hold_four_slots_and_the_server_stays_responsive(
    served: Live,
) -> None:
    live = served
    with live.client() as client:
        review = pending_review(live, client)
        other = second_token(live)

        def wait(agent: httpx.Client, seconds: int) -> tuple[int, str | None, float]:
            """Timed from the request alone: building 140 clients at once (each loads its TLS
            context) took the test itself up to 2 s on an idle machine, enough to push a
            refusal past 5 s in a busy CI run."""
            started = time.monotonic()
            response = agent.get(review, params={"wait": seconds})
            return (response.status_code, response.headers.get("Retry-After"),
                    time.monotonic() - started)

        with (live.client(connections=140) as flooding, other.client() as others_client,
              ThreadPoolExecutor(max_workers=150) as pool):
            flood = [pool.submit(wait, flooding, 8) for _ in range(140)]
            time.sleep(2)  # every request of the flood has been answered or is parked
            started = time.monotonic()
            health = httpx.get(live.url + "/healthz", timeout=30)
            health_seconds = time.monotonic() - started
            others = [pool.submit(wait, others_client, 2) for _ in range(4)]
            other_results = [future.result(timeout=60) for future in others]
            results = [future.result(timeout=60) for future in flood]

        # A thread held by every wait would keep it 6 s.
        assert health.status_code == 200 and health_seconds < 3, health_seconds
        assert [status for status, _, _ in other_results] == [200] * 4
        held = [seconds for status, _, seconds in results if status == 200]
        refused = [(after, seconds) for status, after, seconds in results if status == 429]
        assert len(held) == 4 and len(refused) == 136, sorted({s for s, _, _ in results})
        assert all(seconds >= 7.5 for seconds in held)
        assert all(after is not None and 1 <= int(after) <= 8 for after, _ in refused)
        slowest_refusal = max(seconds for _, seconds in refused)
        assert slowest_refusal < 5, slowest_refusal  # refused at once, no thread held
        answer = client.get(review, params={"wait": 1})  # every slot was given back
        assert answer.status_code == 200, answer.text
        assert answer.json()["review"]["status"] == "pending"


def test_a_wait_whose_client_went_away_frees_its_slot_at_once(served: Live) -> None:
    """Served over ASGI, a client that hangs up cancels its wait: the slot is free again at
    once, not when the 30 s it asked for have passed."""
    live = served
    with live.client() as client:
        review = pending_review(live, client)

        def give_up(_: int) -> None:
            with live.client(timeout=1) as own, suppress(httpx.ReadTimeout):
                own.get(review, params={"wait": 30})

        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(give_up, range(4)))  # four clients gone after 1 s each
        deadline = time.monotonic() + 5
        while (answer := client.get(review, params={"wait": 1})).status_code == 429:
            assert time.monotonic() < deadline, answer.text
            time.sleep(0.2)
        assert answer.status_code == 200, answer.text
        assert answer.json()["review"]["status"] == "pending"

"""B9 at a tiny size, in the normal suite, so the benchmark cannot rot: two agents doing whole
lifecycles (a trusted run, a review-off certification) and twenty held long polls against the
served stack for a few seconds, then the checks for lost events (refold, every export verified),
the table, the gates' wording and the chart. No figure is kept: nothing is timed that matters
and nothing is written outside tmp_path."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bench import b9_load
from bench.charts import draw_b9
from tests.live import REDIS_URL

pytestmark = [pytest.mark.redis, pytest.mark.sandbox]


def test_b9_agents_certify_with_no_error_and_no_lost_event(tmp_path: Path) -> None:
    # On a thread of its own: the session's sync Playwright driver, once started by a browser
    # test, keeps an event loop running on the main thread, where asyncio.run refuses to start.
    with ThreadPoolExecutor(max_workers=1) as thread:
        # This pytest process's Redis database: B9's own (12) may be another worker's.
        result = thread.submit(b9_load.measure, [2], 6, 20, {"sqlite": None},
                               REDIS_URL).result()
    level = result["databases"]["sqlite"]["2"]
    assert level["errors"] == 0, level["error_examples"]
    assert level["lifecycles"] >= 2
    assert level["exports_checked"] == level["routes"]["POST /sessions"]["count"]
    assert level["lost_events"] == 0 and level["exports_failed"] == 0
    assert level["refold"].endswith(" 0 with differences"), level["refold"]
    assert level["long_polls_open_max"] == 20
    assert level["health_alone"]["count"] >= 10  # /healthz asked with only the polls open
    assert level["wake_ms"] is not None and level["wake_ms"]["count"] >= 2
    assert {"POST /turn-stop", "GET /code-verifications?wait", "GET /healthz"} <= set(
        level["routes"])
    assert not [gate for gate in b9_load.gates(result)
                if "errors" in gate or "lost" in gate or "refold" in gate]
    assert "| 2 | `POST /turn-stop` |" in b9_load.table(result)
    assert "polls alone" in b9_load.table(result)
    cpu = level["cpu"]  # where the machine's CPU went while the agents worked
    assert cpu["web"] > 0 and cpu["worker"] > 0 and cpu["client"] > 0
    assert cpu["web"] + cpu["worker"] + cpu["client"] <= cpu["busy"] + 5  # /proc's tick rounding
    assert "| 2 | " in b9_load.table(result).split("CPU busy")[1]
    per_lifecycle = level["cpu_ms_per_lifecycle"]  # the figure to size a machine by
    assert min(per_lifecycle.values()) > 0
    assert f"| {per_lifecycle['service']} / {per_lifecycle['web']} / " in b9_load.table(result)
    draw_b9(result, tmp_path / "b9.png")
    assert (tmp_path / "b9.png").read_bytes().startswith(b"\x89PNG")

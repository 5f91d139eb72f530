"""B5 at a tiny size, in the normal suite, so the benchmark cannot rot: a served governor
(gunicorn and a Celery worker on this suite's Redis database), `/bin/true` round trips seen
through the events and through the long poll, one on a workspace of 40 files, the split from
the runs' timestamps and the worker's log, the table and the gates. Its time gates are
absolute (the module says why), which a slow or busy machine may miss: only their wording is
checked here. Nothing timed here matters, and nothing is written outside tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import b5_roundtrip
from tests.live import REDIS_URL

pytestmark = [pytest.mark.redis, pytest.mark.sandbox]



def test_b5_sees_every_result_directly_and_through_the_long_poll(scratch: Path) -> None:
    result = b5_roundtrip.measure(3, long_poll_runs=2, sizes=[40], broker=REDIS_URL)
    assert result["params"]["broker"] == "redis"
    assert len(result["round_trip_ms"]) == 3
    assert set(result["parts"]) == set(b5_roundtrip.PARTS)  # the worker logged every receipt
    assert result["long_poll"]["median_ms"] > 0
    assert result["sized"]["40"]["runs"] == b5_roundtrip.SIZED_RUNS
    failed = b5_roundtrip.gates(result)
    assert [f for f in failed
            if not f.startswith(("round-trip median ", "the long poll adds "))] == []
    table = b5_roundtrip.table(result)
    assert "long poll − direct" in table and "workspace of 40 files" in table

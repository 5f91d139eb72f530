"""B3 at two small log sizes, in the normal suite, so the benchmark cannot rot: sessions built
through `events_append`, the contract begun over the API, verification results on the tree the
attempt judges, and nine timed turn-stops a session, each answer checked to be a repair attempt
in which only the CHANGELOG check failed (so the two code checks count). Then the table, the
ratio gate and the chart. Nothing timed here matters, and nothing is written outside tmp_path."""

from __future__ import annotations

from pathlib import Path

from bench import b3_turn_stop
from bench.charts import draw_b3


def test_b3_times_repair_attempts_in_which_only_the_changelog_check_fails(
        scratch: Path, tmp_path: Path) -> None:
    result = b3_turn_stop.measure([700, 2000], 1, None)
    r = result["databases"]["sqlite"]
    for size in ("700", "2000"):
        per = r["sizes"][size]
        assert per["samples"] == b3_turn_stop.STOPS
        assert sum(per["mix"].values()) == int(size)
        assert len(per["queries"]) == 1  # the same statements at every turn-stop
    assert r["sizes"]["700"]["queries"] == r["sizes"]["2000"]["queries"]
    assert b3_turn_stop.gates(result) == []
    assert "| 2,000 |" in b3_turn_stop.table(result)
    draw_b3(result, tmp_path / "b3.png")
    assert (tmp_path / "b3.png").read_bytes().startswith(b"\x89PNG")

"""B12 at tiny sizes, in the normal suite, so the benchmark cannot rot: a project of 20 and one
of 300 ended sessions, the reliability page fetched logged in and its numbers checked against
what was written, in a fresh interpreter on SQLite; the table and the query-count gate. Nothing
timed here matters, and nothing is written outside tmp_path."""

from __future__ import annotations

from pathlib import Path

from bench import b12_reliability


def test_b12_fetches_the_page_with_one_query_count_at_every_size(scratch: Path) -> None:
    result = b12_reliability.measure(3, (20, 300), None)
    sizes = result["databases"]["sqlite"]["sizes"]
    assert list(sizes) == ["20", "300"]
    assert all(size["median_ms"] > 0 and size["bytes"] > 0 for size in sizes.values())
    assert b12_reliability.gates(result) == []
    table = b12_reliability.table(result)
    assert "| 300 |" in table and "Context, not gated" in table

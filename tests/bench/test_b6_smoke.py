"""B6 at tiny sizes, in the normal suite, so the benchmark cannot rot: proposals made through
the services, the evidence page of 3 and of 12 claims, the inbox of 2 and of 60 pending
reviews (past one page of them), and the delivery and changes pages of 2 and of 30 changed
files fetched logged in, each answer checked, in a fresh interpreter
on SQLite; the table and the query-count gate. Nothing timed here matters, and nothing is
written outside tmp_path."""

from __future__ import annotations

from pathlib import Path

from bench import b6_review_pages


def test_b6_fetches_every_page_with_one_query_count_at_both_sizes(scratch: Path) -> None:
    result = b6_review_pages.measure(3, {"evidence": (3, 12), "inbox": (2, 60),
                                         "delivery": (2, 30), "changes": (2, 30)}, None)
    pages = result["databases"]["sqlite"]["pages"]
    assert {page: list(sizes) for page, sizes in pages.items()} == {
        "evidence": ["3", "12"], "inbox": ["2", "60"], "delivery": ["2", "30"],
        "changes": ["2", "30"]}
    for sizes in pages.values():
        assert all(size["median_ms"] > 0 and size["bytes"] > 0 for size in sizes.values())
    # The time goal means nothing at these sizes; the query counts do.
    assert [gate for gate in b6_review_pages.gates(result) if "queries" in gate] == []
    table = b6_review_pages.table(result)
    assert "| inbox, pending reviews = 60 |" in table and "Context, not gated" in table
    assert "| delivery page, changed files = 30 |" in table and "× the evidence" in table

"""B2 on a slice of the corpus, in the normal suite, so the benchmark cannot rot: the first 15
accepted logs through the governed path and both references in a fresh interpreter on SQLite
(the check that every arm stored the same rows included), the table and the ratio gate. Nothing
timed here matters, and nothing is written outside tmp_path."""

from __future__ import annotations

from pathlib import Path

from bench import b2_ingest


def test_b2_ingests_through_every_arm_and_reports_the_ratios(scratch: Path) -> None:
    result = b2_ingest.measure(1, 2, None, logs=15)
    assert list(result["databases"]) == ["sqlite"]
    r = result["databases"]["sqlite"]
    assert r["logs"] == 15 and r["events"] > 1000
    for arm in b2_ingest.ARMS:
        assert r[f"{arm}_eps"] > 0 and len(r["seconds"][arm]) == 2
    assert r["ratio_orm"] > 0 and r["ratio_executemany"] > 0
    assert b2_ingest.gates(result) == []  # governed/ORM is above 1 here: far from 0.4
    table = b2_ingest.table(result)
    assert f"| {r['events']:,} |" in table and "context" in table

"""B1 through the real Harness (bench/b1_harness.py), one trial per case per arm, gates included:
the governed arm makes no false completion and every outcome is the expected one."""

from __future__ import annotations

from bench.b1_harness import CASES, measure


def test_b1_through_the_harness_meets_its_gates() -> None:
    rows = measure(trials=1)["rows"]
    assert len(rows) == 2 * len(CASES)
    wrong = [row for row in rows if row["outcome"] != row["expected"]]
    assert not wrong, wrong
    governed = [row for row in rows if row["arm"] == "governed"]
    assert not [row for row in governed if row["false_completion"] or row["false_certification"]]
    baseline_false = sum(row["false_completion"] for row in rows if row["arm"] == "baseline")
    assert baseline_false == len(CASES) - 1  # every case but already-correct is a false claim

"""B10 at a tiny size, in the normal suite, so the benchmark cannot rot: turn-stops with and
without the scope and protected checks, begin with and without baselines, and a report
profile's baseline run while a served agent works. Nothing timed here matters (the gates are
ratios of a few milliseconds on a busy machine: only their wording is checked), and nothing is
written outside tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import b10_evidence

pytestmark = pytest.mark.sandbox  # the report profile runs pytest in bubblewrap


def test_b10_measures_the_scope_checks_the_baselines_and_a_baseline_run(scratch: Path) -> None:
    result = b10_evidence.measure([60], 2, 0.2, 2, str(scratch), broker="filesystem://")
    row = result["sizes"]["60"]
    assert row["files"] == 60 and len(row["times_ms"]["scoped"]) == 2
    assert len(row["begin_times_ms"]["with"]) == len(row["begin_times_ms"]["without"]) == 6
    baseline = result["baseline_run"]
    assert [len(walls) for walls in baseline["walls_s"].values()] == [2, 2]
    assert all(failure.startswith(("turn-stop", "begin", "the baseline run"))
               for failure in b10_evidence.gates(result))
    table = b10_evidence.table(result)
    assert "| 60 |" in table and "what the baseline run adds" in table

"""B1 with one trial per case per arm, in the normal suite, so the benchmark harness cannot rot:
a real served governor (gunicorn + Celery worker on the filesystem broker, its own SQLite
database), the scripted agent and reviewer over HTTP, the oracle, the summary, the gates, the
table and the chart. Nothing is timed."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import b1_faults
from bench.cases import CASES
from bench.charts import draw_b1

pytestmark = pytest.mark.sandbox  # trusted verifier runs go through bubblewrap


def test_b1_runs_every_case_in_both_arms_and_passes_its_gates(tmp_path: Path) -> None:
    # The filesystem broker keeps this server's tasks to itself: a Redis database would be
    # shared with any other run of the suite on the machine.
    result = b1_faults.measure(trials=1, broker="filesystem://")
    assert list(result["per_case"]) == [case.name for case in CASES]
    assert len(CASES) == 23 and sum(case.classic for case in CASES) == 9
    for name, arms in result["per_case"].items():
        for arm, stats in arms.items():
            assert stats["runs"] == 1 and stats["errors"] == 0, (name, arm, stats)
    assert result["arms"]["baseline"]["claims"] == len(CASES)
    assert b1_faults.gates(result) == []
    assert "false completions" in b1_faults.table(result)
    draw_b1(result, tmp_path / "b1.png")
    assert (tmp_path / "b1.png").read_bytes().startswith(b"\x89PNG")

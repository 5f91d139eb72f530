"""B15 at a tiny size, in the normal suite, so the benchmark cannot rot: a served governor with
its worker (filesystem broker), `governor-agent gate` end to end and incrementally, and the
profile run twice directly in bubblewrap. Nothing is timed against a goal and nothing is
published."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import b15_gate

pytestmark = pytest.mark.sandbox


def test_b15_gates_a_small_change_and_runs_the_direct_arm(scratch: Path) -> None:
    result = b15_gate.measure([120], 1, "filesystem://")
    row = result["sizes"]["120"]
    assert row["gate"] > 0 and row["incremental"] > 0 and row["direct"] > 0
    assert "gate / direct" in b15_gate.table(result)

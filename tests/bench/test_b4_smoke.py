"""B4 at a tiny size, in the normal suite, so the benchmark cannot rot: `/bin/true` bare and
through the sandbox a few runs each, then a run's private copy of two small trees against
`git checkout-index`, the table and the gates. The overhead's gate is an absolute time (the
module says why), which a slow or busy machine may miss: only its wording is checked here.
Nothing timed here matters, and nothing is written outside tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import b4_sandbox

pytestmark = pytest.mark.sandbox  # the sandboxed arm goes through bubblewrap


def test_b4_starts_the_sandbox_and_copies_trees_beside_git(scratch: Path) -> None:
    result = b4_sandbox.measure(4, [40, 200], 2, str(scratch))
    assert result["params"]["runs"] == 4
    for arm in ("bare", "sandboxed"):
        assert len(result["times_ms"][arm]) == 4 and result[arm]["median_ms"] > 0
    assert result["overhead_ms"] == pytest.approx(
        result["sandboxed"]["median_ms"] - result["bare"]["median_ms"], abs=0.002)
    copies = result["copies"]
    assert list(copies["sizes"]) == ["40", "200"] and copies["repeats"] == 2
    for files, row in copies["sizes"].items():
        assert row["files"] == int(files)
        assert len(row["times_ms"]["ours"]) == len(row["times_ms"]["git"]) == 2
    failed = b4_sandbox.gates(result)
    assert [f for f in failed if not f.startswith("sandbox overhead ")] == []
    table = b4_sandbox.table(result)
    assert "| overhead (median difference) |" in table and "| 200 |" in table

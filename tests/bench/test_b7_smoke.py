"""B7 on two tiny trees, in the normal suite, so the benchmark cannot rot: trees built, both
arms run cold and warm, ids compared with git's, the table, the gates and the chart. Nothing is
timed that matters and nothing is written outside tmp_path."""

from __future__ import annotations

from pathlib import Path

from bench import b7_tree_hash
from bench.charts import draw_b7


def test_b7_hashes_cold_and_warm_with_the_ids_git_gives(tmp_path: Path) -> None:
    result = b7_tree_hash.measure((40, 300), repeats=2, directory=str(tmp_path))
    for files, size in result["sizes"].items():
        assert size["files"] == int(files) and size["ids_equal"], size["mismatches"]
        assert size["files_read_cold"] == size["files"]
        assert size["files_read_warm"] == [1, 1]  # only the changed file is read
    assert b7_tree_hash.gates(result) == []
    assert "| 300 |" in b7_tree_hash.table(result)
    assert list(tmp_path.iterdir()) == []  # the trees and git's repository are gone
    draw_b7(result, tmp_path / "b7.png")
    assert (tmp_path / "b7.png").read_bytes().startswith(b"\x89PNG")

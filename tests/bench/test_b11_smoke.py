"""B11 at a tiny size, in the normal suite, so the benchmark cannot rot: commits in SHA-1 and
SHA-256 repositories verified from their objects against `git ls-tree -r`, and pushes with and
without the hook, which accepts the certified commit. Nothing timed here matters (only the
gates' wording is checked), and nothing is written outside tmp_path."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench import b11_certified_commits

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def test_b11_verifies_commits_and_times_the_hook(scratch: Path) -> None:
    result = b11_certified_commits.measure((40,), 2, str(scratch))
    assert sorted(result["rows"]) == ["40-sha1", "40-sha256"]
    for row in result["rows"].values():
        assert row["accepted"] and len(row["times_ms"]["verify"]) == 2
        assert len(row["times_ms"]["push_hook"]) == len(row["times_ms"]["push_plain"]) == 2
    assert all(failure.startswith("verify --commit")
               for failure in b11_certified_commits.gates(result))
    assert "| 40 | sha256 |" in b11_certified_commits.table(result)

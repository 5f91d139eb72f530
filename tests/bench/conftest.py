"""What the benchmarks' smoke tests share: a benchmark may write only under the test's tmp_path."""

from __future__ import annotations

import multiprocessing.util
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PUBLISHED = [ROOT / "bench" / "results" / "latest.json", ROOT / "docs" / "benchmarks.md",
             *sorted((ROOT / "docs" / "img").glob("*.png"))]


def _published() -> dict[Path, tuple[int, int] | None]:
    """Size and modification time of each file `python -m bench` publishes (None: absent)."""
    return {path: (path.stat().st_size, path.stat().st_mtime_ns) if path.exists() else None
            for path in PUBLISHED}


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The temporary directory of this process and of every interpreter it starts (TMPDIR),
    inside tmp_path. Afterwards it must be empty again — the benchmark removed its databases,
    var directories and servers' files — and the published results untouched."""
    directory = tmp_path / "scratch"
    directory.mkdir()
    # multiprocessing makes its own temporary directory once per process, where TMPDIR says at
    # the time, and keeps it until the process exits: made here first, it is not the scratch's.
    multiprocessing.util.get_temp_dir()
    monkeypatch.setenv("TMPDIR", str(directory))
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    before = _published()
    yield directory
    assert _published() == before, "a benchmark wrote the published results"
    assert sorted(path.name for path in directory.iterdir()) == [], "a benchmark left files"

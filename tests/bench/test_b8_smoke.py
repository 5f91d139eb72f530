"""B8 on a tiny workspace, in the normal suite, so the benchmark cannot rot: a real governor on
each store (the filesystem, then moto's S3 server), the client's first and incremental uploads,
git's pushes to a bare repository, the table, the byte goal and the chart. Nothing timed here
matters, and nothing is left on disk."""

from __future__ import annotations

from pathlib import Path

from bench import b8_snapshot_upload
from bench.charts import draw_b8


def test_b8_uploads_first_and_incremental_on_both_stores(tmp_path: Path) -> None:
    result = b8_snapshot_upload.measure(60, 0, 2, directory=str(tmp_path))
    for store in ("filesystem", "s3"):
        arm = result["stores"][store]
        assert arm["runs"]["files"] == 60 and arm["runs"]["first_blobs"] >= 50
        assert [run["sent_blobs"] for run in arm["runs"]["incremental"]] == [1, 1]
    assert [f for f in b8_snapshot_upload.gates(result) if "sent" in f] == []
    assert "| client, s3 store |" in b8_snapshot_upload.table(result)
    assert list(tmp_path.iterdir()) == []
    draw_b8(result, tmp_path / "b8.png")
    assert (tmp_path / "b8.png").read_bytes().startswith(b"\x89PNG")

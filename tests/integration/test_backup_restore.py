"""The restore drill docs/operations.md promises ("Backup and restore"): a running instance with
a certified session is backed up while it serves, the documented restore block runs as written
into a new installation, and the new instance serves the same sessions — every export verifies
offline against the keys it publishes, and the refold is clean."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
from pathlib import Path

from governor.verify import Report, load_trusted_keys, verify_export
from tests.api.test_contracts import readme_contract
from tests.live import ROOT, Live, live_server


def restore_block() -> str:
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text[text.index("To restore (SQLite)"):]
    match = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert match is not None
    return match.group(1)


def certified_session(live: Live, name: str) -> str:
    workspace = live.workspace_root / name
    workspace.mkdir()
    with live.client() as client:
        session = client.post("/sessions", json={"workspace": {"kind": "path",
                                                               "path": str(workspace)}}).json()
        begun = client.post(f"/sessions/{session['id']}/contracts", json=readme_contract())
        assert begun.status_code == 201, begun.text
        (workspace / "README.md").write_text("## Install\n")
        stop = client.post(f"/sessions/{session['id']}/turn-stop").json()
        assert stop["terminal"]["status"] == "certified", stop
    return str(session["id"])


def export_report(live: Live, session_id: str) -> Report:
    with live.client() as client:
        keys = load_trusted_keys(client.get("/keys").content)
        export = client.get(f"/sessions/{session_id}/export")
        assert export.status_code == 200, export.text
        return verify_export(export.text.splitlines(), keys)


def test_a_backup_of_a_running_instance_restores_into_a_new_one(tmp_path: Path) -> None:
    backup = tmp_path / "backup"
    with live_server(tmp_path / "old") as old:
        old.manage("governor_project", "set", "demo", "--review-mode", "off")
        sessions = [certified_session(old, "before")]
        # Writers go on while the backup is taken; what they commit after it is not in it.
        writer = threading.Thread(target=lambda: sessions.append(certified_session(old, "during")))
        writer.start()
        out = old.manage("governor_backup", str(backup))
        writer.join()
        assert out.startswith(f"backed up to {backup}: sqlite database, ")
        token = old.token
    manifest = json.loads((backup / "backup.json").read_text())
    assert {"governor.sqlite3", "secret_key"} <= set(manifest["files"])
    assert any(name.startswith("blobs/") for name in manifest["files"])
    assert oct(backup.stat().st_mode & 0o777) == "0o700"
    assert all(oct((backup / name).stat().st_mode & 0o777) == "0o600"
               for name in manifest["files"])

    new = tmp_path / "new"
    env = {**os.environ, "BACKUP": str(backup), "GOVERNOR_VAR_DIR": str(new / "var")}
    env.pop("DATABASE_URL", None)
    env.pop("GOVERNOR_BLOB_DIR", None)
    restored = subprocess.run(["bash", "-euo", "pipefail", "-c", restore_block()],  # noqa: S603, S607
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert "0 with differences" in restored.stdout
    with live_server(new, token=token) as live:
        with live.client() as client:
            found = [session_id for session_id in sessions
                     if client.get(f"/sessions/{session_id}").status_code == 200]
        assert found[0] == sessions[0]
        first = export_report(live, sessions[0])
        assert first.ok and first.certified, first.summary()
        for session_id in found[1:]:  # the one written during the backup: as far as it got
            report = export_report(live, session_id)
            assert report.ok, report.summary()
        assert "0 with differences" in live.manage("governor_refold", "--check")

    again = subprocess.run(["bash", "-euo", "pipefail", "-c", restore_block()],  # noqa: S603, S607
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 1 and "already holds a database" in again.stdout


def test_a_backup_never_overwrites_and_leaves_nothing_half_written(tmp_path: Path) -> None:
    with live_server(tmp_path / "old") as old:
        (tmp_path / "exists").mkdir()
        result = subprocess.run(  # noqa: S603
            [".venv/bin/python", "manage.py", "governor_backup", str(tmp_path / "exists")],
            cwd=ROOT, env=old.env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 1
        assert "exists: a backup goes into a new directory" in result.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["exists", "old"]

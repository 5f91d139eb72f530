"""The files that hold secrets (the SQLite database with the private signing keys, its -wal and
-shm, the secret key) and var/ itself are the owner's alone, from the first start; the server
refuses to start while any of them is wider."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from governor.services.projects import bootstrap
from tests.live import ROOT, free_port
from verification.sandbox import NOBODY


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    # A permissive umask, as on most machines: the modes must not depend on it.
    return subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=120, check=False, preexec_fn=lambda: os.umask(0o022),
    )


@pytest.fixture(scope="module")
def installation(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A fresh installation, migrated and bootstrapped (the signing key exists)."""
    var = tmp_path_factory.mktemp("installation") / "var"
    env = {**os.environ, "GOVERNOR_VAR_DIR": str(var), "GOVERNOR_BROKER_URL": "filesystem://",
           "GOVERNOR_DEMO_WORKSPACE_ROOT": str(var.parent / "workspaces")}
    for name in ("DATABASE_URL", "SECRET_KEY", "SECRET_KEY_FILE"):
        env.pop(name, None)
    for command in (["migrate", "--no-input", "-v", "0"], ["governor_bootstrap"]):
        result = manage(env, *command)
        assert result.returncode == 0, result.stdout + result.stderr
    return var, env


@pytest.fixture
def world_reachable_dir() -> Iterator[Path]:
    """On the file system of the installation, but reachable by every uid (tmp_path is not)."""
    root = Path(tempfile.mkdtemp(prefix="governor-modes-test-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root)


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_a_fresh_installation_keeps_var_the_database_and_the_secret_key_owner_only(
    installation: tuple[Path, dict[str, str]],
) -> None:
    var, _ = installation
    database = var / "governor.sqlite3"
    assert mode(var) == 0o700
    assert mode(database) == 0o600
    assert mode(var / "secret_key") == 0o600
    # While the service writes, SQLite keeps its -wal and -shm beside the database.
    with sqlite3.connect(database) as connection:
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("CREATE TABLE probe (x)")
        assert mode(var / "governor.sqlite3-wal") == 0o600
        assert mode(var / "governor.sqlite3-shm") == 0o600


def test_a_hard_link_to_the_database_in_a_workspace_is_unreadable_by_the_sandbox_uid(
    installation: tuple[Path, dict[str, str]], world_reachable_dir: Path
) -> None:
    var, _ = installation
    workspace = world_reachable_dir / "workspace"
    workspace.mkdir(mode=0o755)
    os.link(var / "governor.sqlite3", workspace / "db")  # what a hostile agent can do
    # The identity bubblewrap runs verifier commands as (verification.sandbox.NOBODY).
    uid, gid = NOBODY
    stolen = subprocess.run(  # noqa: S603
        ["/bin/cat", str(workspace / "db")], user=uid, group=gid, extra_groups=[],
        capture_output=True, check=False,
    )
    assert stolen.stdout == b"", "uid 65534 read the database"
    assert stolen.returncode != 0 and b"Permission denied" in stolen.stderr, stolen.stderr


@pytest.mark.parametrize(("name", "loose"), [
    ("governor.sqlite3", 0o644), ("secret_key", 0o640), (".", 0o755),
])
def test_the_server_refuses_to_start_while_a_secret_is_readable_by_others(
    installation: tuple[Path, dict[str, str]], name: str, loose: int
) -> None:
    var, env = installation
    path = (var / name).resolve()
    kept = mode(path)
    path.chmod(loose)
    try:
        out, err = serve(env)
    finally:
        path.chmod(kept)
    assert f"{path} has mode {loose:04o}" in err, err
    wanted = 0o700 if path.is_dir() else 0o600
    assert f"chmod {wanted:o} {path}" in err, err
    assert "reviewer inbox" not in out  # nothing was served


def test_a_bare_gunicorn_refuses_to_serve_while_the_database_is_readable_by_others(
    installation: tuple[Path, dict[str, str]],
) -> None:
    var, env = installation
    database = var / "governor.sqlite3"
    database.chmod(0o644)
    try:
        _, err = serve(env, [str(Path(sys.executable).parent / "gunicorn"),
                             "governor.wsgi:application", "--no-control-socket"])
    finally:
        database.chmod(0o600)
    assert f"{database} has mode 0644" in err and f"chmod 600 {database}" in err, err


def serve(env: dict[str, str], command: list[str] | None = None) -> tuple[str, str]:
    """Start governor_serve (or `command`) and expect it to refuse: its output."""
    command = command or [sys.executable, "manage.py", "governor_serve", "--no-worker"]
    server = subprocess.Popen(  # noqa: S603
        [*command, "--bind", f"127.0.0.1:{free_port()}"], cwd=ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        out, err = server.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.communicate()
        pytest.fail(f"{command} started")
    assert server.returncode != 0
    return out, err


# --- issue 25, finding 11: workspaces never inside var/ or the blob directory ------------------


def test_issue_25_the_demo_projects_workspace_root_is_workspaces_beside_var_and_git_ignored(
    db: None, settings: Any, tmp_path: Path
) -> None:
    """var/ is the server's (0700, the signing keys and the database): an agent that can write
    under it runs as the server's user. The demo project works in workspaces/ beside it."""
    default = settings.GOVERNOR_DEMO_WORKSPACE_ROOT if hasattr(
        settings, "GOVERNOR_DEMO_WORKSPACE_ROOT") else None
    settings.VAR_DIR = tmp_path / "var"
    settings.GOVERNOR_DEMO_WORKSPACE_ROOT = tmp_path / "workspaces"  # not the checkout's
    created = bootstrap()
    assert created is not None
    assert created.project.workspace_roots == [str(tmp_path / "workspaces")]
    assert (tmp_path / "workspaces").is_dir() and not (tmp_path / "var" / "workspaces").exists()
    assert default == ROOT / "workspaces"  # unless GOVERNOR_DEMO_WORKSPACE_ROOT says otherwise
    ignored = subprocess.run(["git", "check-ignore", "-q", "workspaces/"], cwd=ROOT,  # noqa: S607
                             check=False)
    assert ignored.returncode == 0


def test_issue_25_a_workspace_root_inside_var_or_the_blob_directory_or_holding_them_is_warned_at_start(  # noqa: E501
    installation: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    var, env = installation
    old_demo_root = var / "workspaces"  # where the demo project worked before issue 25
    result = manage(env, "governor_project", "set", "demo", "--workspace-root",
                    str(old_demo_root))
    assert result.returncode == 0, result.stdout + result.stderr
    blobs = tmp_path / "blobs"
    roots = [blobs / "agents", tmp_path]
    result = manage({**env, "GOVERNOR_BLOB_DIR": str(blobs),
                     "GOVERNOR_WORKSPACE_ROOTS": ":".join(map(str, roots))}, "check")
    manage(env, "governor_project", "set", "demo", "--workspace-root",
           env["GOVERNOR_DEMO_WORKSPACE_ROOT"])
    assert result.returncode == 0, result.stdout + result.stderr  # warned, not refused
    warned = [line for line in result.stderr.splitlines() if "governor.W001" in line]
    resolved = var.resolve()
    assert any(f"the workspace root {old_demo_root} (project demo's workspace roots) is inside "
               f"the server's data directory (GOVERNOR_VAR_DIR) {resolved}" in line
               for line in warned), result.stderr
    assert any(f"the workspace root {blobs / 'agents'} (GOVERNOR_WORKSPACE_ROOTS) is inside the "
               f"blob directory (GOVERNOR_BLOB_DIR) {blobs.resolve()}" in line
               for line in warned), result.stderr
    assert any(f"the workspace root {tmp_path} (GOVERNOR_WORKSPACE_ROOTS) contains the blob "
               "directory" in line for line in warned), result.stderr
    assert "governor_project set demo --workspace-root DIR" in result.stderr
    assert "remove it from GOVERNOR_WORKSPACE_ROOTS" in result.stderr

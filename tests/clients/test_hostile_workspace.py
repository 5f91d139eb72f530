"""Issue 25: a workspace is the agent's, and whoever wrote it — a cloned repository can carry a
`.governor/` of its own (git refuses to check out only `.git`) and any file at all. Nothing the
workspace holds makes the client run a command, read its token out, or write outside it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.clients.conftest import agent_env, hook
from tests.clients.test_hooks import ClaudeCode
from tests.clients.test_snapshots import expected_tree, snapshot_cli
from tests.live import Live

SNAPSHOT = {"GOVERNOR_WORKSPACE": "snapshot"}


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A repository cloned on the agent's machine: under none of the server's roots."""
    root = tmp_path / "clone"
    (root / "src").mkdir(parents=True)
    (root / "src" / "tool.py").write_text("print('tool')\n")
    (root / "README.md").write_text("# Tool\n")
    return root


def plant_repository(git_dir: Path, stolen: Path) -> None:
    """A SHA-256 git directory whose config makes git run a command that writes out the token."""
    subprocess.run(["git", "init", "-q", "--bare", "--object-format=sha256", str(git_dir)],  # noqa: S607
                   check=True, env={"PATH": os.environ["PATH"], "GIT_CONFIG_NOSYSTEM": "1",
                                    "GIT_CONFIG_GLOBAL": os.devnull})
    with (git_dir / "config").open("a") as config:
        config.write(f'[core]\n\tfsmonitor = "echo $GOVERNOR_TOKEN > {stolen}; false"\n'
                     f"\thooksPath = {git_dir}/hooks\n")


def snapshot_state(root: Path) -> Path:
    """Where the client keeps `root`'s snapshot state: the user's cache, keyed by the path."""
    digest = hashlib.sha256(str(root.resolve()).encode()).hexdigest()
    return Path(os.environ["XDG_CACHE_HOME"]) / "governor-agent" / "snapshots" / digest


def test_a_git_config_planted_in_the_workspace_runs_nothing_and_never_sees_the_token(
        live: Live, repository: Path, tmp_path: Path) -> None:
    stolen = tmp_path / "stolen"
    plant_repository(repository / ".governor" / "snapshot.git", stolen)
    answer, _ = snapshot_cli(live, repository, "snapshot")
    assert not stolen.exists()
    assert answer["tree"] == expected_tree(repository)


def test_the_snapshot_repository_is_the_users_own_and_is_made_anew_unless_the_client_made_it(
        live: Live, repository: Path, tmp_path: Path) -> None:
    stolen = tmp_path / "stolen"
    state = snapshot_state(repository)
    snapshot_cli(live, repository, "snapshot")
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    assert sorted(path.name for path in state.iterdir()) == [
        "repository.json", "snapshot.git", "snapshot.json", "upload.lock"]
    assert sorted(path.name for path in (repository / ".governor").iterdir()) == [
        ".gitignore", "lock", "session.json"]

    # A config changed since the client made the repository is never used: made anew.
    config = state / "snapshot.git" / "config"
    made = config.read_bytes()
    with config.open("a") as changed:
        changed.write(f'[core]\n\tfsmonitor = "echo $GOVERNOR_TOKEN > {stolen}; false"\n')
    (repository / "NEWS.md").write_text("news\n")
    answer, _ = snapshot_cli(live, repository, "snapshot")
    assert not stolen.exists() and config.read_bytes() == made
    assert answer["tree"] == expected_tree(repository)

    # Nor is a repository the client has no record of making.
    shutil.rmtree(state / "snapshot.git")
    (state / "repository.json").unlink()
    plant_repository(state / "snapshot.git", stolen)
    (repository / "NEWS.md").write_text("more news\n")
    answer, _ = snapshot_cli(live, repository, "snapshot")
    assert not stolen.exists() and config.read_bytes() == made
    assert answer["tree"] == expected_tree(repository)


def test_a_governor_client_package_planted_in_the_workspace_is_not_what_the_hook_starts(
        live: Live, repository: Path, tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    planted = repository / "governor_client"
    planted.mkdir()
    (planted / "__init__.py").write_text("")
    (planted / "__main__.py").write_text(
        f"import os, pathlib\npathlib.Path({str(ran)!r}).write_text(os.environ['GOVERNOR_TOKEN'])"
    )
    agent = ClaudeCode(repository, "planted-package")
    for payload in (agent.event("UserPromptSubmit", prompt="go"),
                    agent.tool_use("Write", {"file_path": "README.md"}, {"success": True})):
        # -P: run as the installed `governor-agent` script runs, nothing from the current
        # directory on the module path, so that only the upload the hook starts can import it.
        subprocess.run([sys.executable, "-P", "-m", "governor_client", "hook", "claude-code"],  # noqa: S603
                       input=json.dumps(payload), cwd=repository, text=True, check=True,
                       env=agent_env(live, **SNAPSHOT), capture_output=True, timeout=120)
    log = repository / ".governor" / "upload.log"
    deadline = time.monotonic() + 60
    while not (ran.exists() or '"tree"' in log.read_text()):
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)  # the background upload the tool use started
    assert not ran.exists()


@pytest.mark.parametrize("planted", [
    ".governor", ".governor/.gitignore", ".governor/lock", ".governor/session.json",
    ".governor/upload.log", ".governor/upload.lock", ".governor/snapshot.json",
])
def test_a_symlink_planted_in_the_state_directory_makes_the_client_write_nothing_outside(
        live: Live, repository: Path, tmp_path: Path, planted: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    link = repository / planted
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(outside / link.name)
    agent = ClaudeCode(repository, f"planted-{link.name}")
    for payload in (agent.event("SessionStart", source="startup"),
                    agent.event("UserPromptSubmit", prompt="go"),
                    agent.tool_use("Write", {"file_path": "README.md"}, {"success": True}),
                    agent.stop()):
        hook(live, payload, **SNAPSHOT)
    subprocess.run([sys.executable, "-m", "governor_client", "snapshot"], cwd=repository,  # noqa: S603
                   env=agent_env(live, **SNAPSHOT), capture_output=True, timeout=120,
                   check=False)
    log = repository / ".governor" / "upload.log"
    deadline = time.monotonic() + 60
    while log.is_file() and not log.read_text().endswith("\n"):
        assert time.monotonic() < deadline
        time.sleep(0.2)  # the background upload a tool use started, when it could log
    assert list(outside.iterdir()) == []

"""Per-run totals (issue 11 item 11): a run's memory and processes are capped as a whole by a
cgroup of its own, not only per process by rlimits."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from governor.domain.profiles import GIB, MIB, profile_definition, validate_profile
from governor.domain.workspace import identity_at
from verification.cgroups import CgroupsUnavailable, run_cgroup
from verification.sandbox import run_sandboxed

pytestmark = pytest.mark.sandbox

HOLDERS = 12
HOLD = 256 * MIB


@pytest.fixture(autouse=True)
def cgroups_writable() -> None:
    if os.geteuid() != 0:
        pytest.skip("per-run cgroups need a root worker (or a delegated cgroup)")
    try:
        run_cgroup(memory_bytes=64 * MIB, pids=8).remove()
    except CgroupsUnavailable as exc:
        pytest.fail(f"a root worker must have per-run cgroups here: {exc}")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir(mode=0o755)
    tmp_path.chmod(0o755)
    return root


def test_twelve_processes_of_256_mib_never_hold_more_than_the_runs_memory(
    workspace: Path,
) -> None:
    """Each stays far below its own 2 GiB address space; together they would hold 3 GiB."""
    hold = (f"import time; held = b'x' * {HOLD}; time.sleep(3); "
            f"print('held', len(held), flush=True)")
    script = (f"pids=''; for i in $(seq {HOLDERS}); do /usr/bin/python3 -c \"{hold}\" & "
              f"pids=\"$pids $!\"; done; status=0; "
              f"for p in $pids; do wait $p || status=1; done; exit $status")
    definition = profile_definition(validate_profile({
        "id": "memory-total", "description": "Twelve holders.", "argv": ["sh", "-c", script],
        "limits": {"memory_bytes": 2 * GIB}, "timeout_ms": 60_000}))
    result = run_sandboxed(definition, str(workspace), identity_at(str(workspace)))
    held = result.stdout.tail.count(f"held {HOLD}")
    # Those that printed held their 256 MiB at the same time (all sleep 3 s after allocating).
    assert held * HOLD < 2 * GIB, (held, result.stdout.tail, result.stderr.tail)
    assert result.failure_kind == "exit", result.detail


def test_forking_more_processes_than_the_runs_pids_fails(tmp_path: Path) -> None:
    """As root, whom RLIMIT_NPROC never stops, only the run's cgroup limits the processes."""
    cgroup = run_cgroup(memory_bytes=256 * MIB, pids=8)
    try:
        forked = subprocess.run(  # noqa: S603 - a fixed argv
            ["/bin/sh", "-c", "n=0; for i in $(seq 20); do sleep 2 & n=$((n+1)); done; "
                              "echo started $n; wait"],
            preexec_fn=cgroup.join, capture_output=True, text=True, timeout=30, check=False)
    finally:
        cgroup.remove()
    assert "Resource temporarily unavailable" in forked.stderr or "fork" in forked.stderr, forked
    assert "started 20" not in forked.stdout


def test_the_runs_cgroup_holds_the_run_and_is_gone_afterwards(workspace: Path) -> None:
    definition = profile_definition(validate_profile({
        "id": "where", "description": "Where am I.", "argv": ["/bin/true"],
        "limits": {"memory_bytes": 512 * MIB, "pids": 16}}))
    seen: dict[str, str] = {}

    def look(pid: int) -> None:
        for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
            _number, controllers, path = line.split(":", 2)
            if controllers in ("memory", "pids", ""):
                seen[controllers] = path

    result = run_sandboxed(definition, str(workspace), identity_at(str(workspace)),
                           on_start=look)
    assert result.passed, result.detail
    runs = {name: path for name, path in seen.items() if "/governor-run-" in path}
    assert runs, seen
    for controller, path in runs.items():
        directory = Path("/sys/fs/cgroup", controller, path.lstrip("/"))
        assert not directory.exists(), f"{directory} was left behind"


# --- what a workspace-write run may write ------------------------------------------------------


@pytest.fixture
def writable(workspace: Path) -> Path:
    workspace.chmod(0o777)
    (workspace / "README.md").write_text("original\n")
    (workspace / "README.md").chmod(0o666)
    (workspace / "old").mkdir()
    (workspace / "old").chmod(0o777)
    (workspace / "old" / "file").write_text("old\n")
    (workspace / "old" / "file").chmod(0o666)
    (workspace / "keep").mkdir()
    (workspace / "keep").chmod(0o777)
    return workspace


def tree(root: Path) -> dict[str, str]:
    return {str(path.relative_to(root)): (f"-> {os.readlink(path)}" if path.is_symlink()
                                          else "dir" if path.is_dir() else path.read_text())
            for path in sorted(root.rglob("*"))}


def write_run(workspace: Path, script: str, write_bytes: int = 4 * MIB):
    definition = profile_definition(validate_profile({
        "id": "writer", "description": "Writes the workspace.", "argv": ["sh", "-c", script],
        "sandbox_mode": "workspace-write"}))
    return run_sandboxed(definition, str(workspace), identity_at(str(workspace)),
                         write_bytes=write_bytes)


def test_writing_more_than_the_cap_fails_and_leaves_the_workspace_unchanged(
    writable: Path,
) -> None:
    before = tree(writable)
    result = write_run(writable, "echo changed > README.md && rm -r old && "
                                 "head -c 8388608 /dev/zero > big", write_bytes=4 * MIB)
    assert result.failure_kind == "exit", result.detail
    assert "No space left on device" in result.stderr.tail
    assert tree(writable) == before


def test_a_failing_run_changes_nothing(writable: Path) -> None:
    before = tree(writable)
    result = write_run(writable, "echo changed > README.md && touch new && exit 3")
    assert result.exit_code == 3
    assert tree(writable) == before


def test_a_passing_runs_changes_reach_the_workspace(writable: Path) -> None:
    result = write_run(writable, (
        "echo changed > README.md && rm -r old && "
        "mkdir -p new/deeper && echo n > new/deeper/n && chmod 640 new/deeper/n && "
        "ln -s ../README.md new/link && "
        "rmdir keep && mkdir keep && echo k > keep/k && mkfifo fifo"))
    assert result.passed, (result.detail, result.stderr.tail)
    assert tree(writable) == {
        "README.md": "changed\n", "keep": "dir", "keep/k": "k\n", "new": "dir",
        "new/deeper": "dir", "new/deeper/n": "n\n", "new/link": "-> ../README.md"}
    info = (writable / "new" / "deeper" / "n").stat()
    assert (info.st_uid, info.st_gid) == (65534, 65534)
    assert info.st_mode & 0o777 == 0o640
    assert not list(writable.glob(".governor-change-*"))

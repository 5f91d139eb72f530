"""rules §8 "Run", two limits of the bubblewrap sandbox: a command cannot hold more open
files than its profile's `open_files`, and a sandbox does not outlive the process that started
bubblewrap (`--die-with-parent`): when that process is killed, every process of the sandbox
ends with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.integration.test_sandbox_escapes import output, run

pytestmark = pytest.mark.sandbox


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir(mode=0o755)
    (root / "README.md").write_text("# the agent's work\n")
    return root

OPEN_MANY = textwrap.dedent("""\
    import sys
    held = [open("/workspace/README.md") for _ in range(int(sys.argv[1]))]
    print("held", len(held))
""")


def test_a_command_cannot_open_more_files_than_the_open_files_limit(workspace: Path) -> None:
    argv = ["python3", "-c", OPEN_MANY]
    control = run([*argv, "100"], workspace, limits={"open_files": 1024})
    assert control.passed is True, output(control)
    assert control.stdout.tail == "held 100\n"

    result = run([*argv, "100"], workspace, limits={"open_files": 32})
    assert (result.passed, result.failure_kind, result.exit_code) == (False, "exit", 1)
    assert "Too many open files" in result.stderr.tail
    assert "held" not in result.stdout.tail


def test_a_worker_holding_many_descriptors_still_starts_a_sandbox_with_a_low_open_files_limit(
    workspace: Path,
) -> None:
    """A long-lived worker holds many descriptors, all below the profile's `open_files`; the
    child that starts bubblewrap still has them until just before exec, so it must stage the
    workspace before that limit applies, or the run fails as infrastructure."""
    held = [os.open("/dev/null", os.O_RDONLY) for _ in range(64)]
    try:
        result = run(["python3", "-c", OPEN_MANY, "100"], workspace, limits={"open_files": 32})
    finally:
        for descriptor in held:
            os.close(descriptor)
    assert (result.passed, result.failure_kind, result.exit_code) == (False, "exit", 1), (
        output(result))
    assert "Too many open files" in result.stderr.tail


# --- the sandbox dies with the process that started it ---------------------------------------

STARTER = textwrap.dedent("""\
    import sys
    from governor.domain.canonical import receipt
    from governor.domain.profiles import profile_definition, validate_profile
    from governor.domain.workspace import identity_at
    from verification.sandbox import run_sandboxed

    workspace, pid_file = sys.argv[1], sys.argv[2]
    # A child in a session of its own that ignores hangups, and the command itself: both sleep.
    raw = {"id": "long-sleep", "description": "Sleeps.", "timeout_ms": 600_000,
           "argv": ["sh", "-c", "trap '' HUP TERM; setsid sleep 300 & exec sleep 300"]}

    def started(pid: int) -> None:
        with open(pid_file, "w") as out:
            out.write(str(pid))

    run_sandboxed(profile_definition(validate_profile(raw)), workspace,
                  identity_at(workspace), on_start=started)
""")


def start_time(pid: int) -> str | None:
    """The process's start time (field 22 of its stat), or None once it has ended or is a
    zombie: together with the pid it names one process, never a later one reusing the pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def descendants(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        for child in map(int, children):
            found += [child, *descendants(child)]
    return found


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except (FileNotFoundError, ProcessLookupError):
        return ""


def test_killing_the_process_that_started_bubblewrap_ends_every_process_of_the_sandbox(
        workspace: Path, tmp_path: Path) -> None:
    pid_file = tmp_path / "bwrap.pid"
    starter = subprocess.Popen([sys.executable, "-c", STARTER, str(workspace), str(pid_file)],
                               cwd=Path(__file__).resolve().parents[2])
    try:
        deadline = time.monotonic() + 20
        while not pid_file.exists() or not pid_file.read_text():
            assert starter.poll() is None, "the starter ended before bubblewrap ran"
            assert time.monotonic() < deadline, "bubblewrap never started"
            time.sleep(0.05)
        bwrap = int(pid_file.read_text())
        # The sandbox is up once both sleeps run: learn every pid of the tree, then kill.
        while [comm(pid) for pid in descendants(bwrap)].count("sleep") < 2:
            assert time.monotonic() < deadline, f"the sandbox never started: {descendants(bwrap)}"
            time.sleep(0.05)
        tree = [bwrap, *descendants(bwrap)]
        started = {pid: start_time(pid) for pid in tree}
        assert all(started.values()) and len(tree) >= 3
    finally:
        starter.send_signal(signal.SIGKILL)
        starter.wait()

    deadline = time.monotonic() + 5
    while (alive := [pid for pid in tree if start_time(pid) == started[pid]]) and (
            time.monotonic() < deadline):
        time.sleep(0.05)
    for pid in alive:  # only the pids learned above, and only if still the same process
        os.kill(pid, signal.SIGKILL)
    assert not alive, f"outlived the process that started bubblewrap: {alive}"

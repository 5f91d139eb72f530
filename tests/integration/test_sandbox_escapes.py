"""rules §8 "Run": the bubblewrap sandbox runs the command, contains it, and reports how it
ended; every escape attempt fails inside."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import stat
import subprocess
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from governor.domain.canonical import receipt
from governor.domain.profiles import profile_definition, validate_profile
from governor.domain.workspace import identity_at
from verification.sandbox import SandboxResult, run_sandboxed

pytestmark = pytest.mark.sandbox

HUNDRED_MB = 100 * 1024 * 1024


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir(mode=0o755)
    (root / "README.md").write_text("# the agent's work\n")
    return root


@pytest.fixture
def writable_workspace(workspace: Path) -> Path:
    workspace.chmod(0o777)
    return workspace


@pytest.fixture
def world_reachable_dir() -> Iterator[Path]:
    """For a program run by path after the switch to uid 65534 (tmp_path is private to root)."""
    root = Path(tempfile.mkdtemp(prefix="governor-sandbox-test-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root)


def define(argv: list[str], **profile: Any) -> dict[str, Any]:
    raw = {"id": "escape-test", "description": "An escape attempt.", "argv": argv, **profile}
    return profile_definition(validate_profile(raw))


def run(argv: list[str], workspace: Path, **profile: Any) -> SandboxResult:
    return run_sandboxed(define(argv, **profile), str(workspace), bound(workspace))


def bound(workspace: Path) -> str:
    """The identity a session records when it binds `workspace`."""
    return identity_at(str(workspace))


def sh(script: str, workspace: Path, **profile: Any) -> SandboxResult:
    return run(["sh", "-c", script], workspace, **profile)


def output(result: SandboxResult) -> str:
    return result.stdout.tail + result.stderr.tail


# --- how a run ends ---------------------------------------------------------------------------


def test_a_command_that_exits_0_passes(workspace: Path) -> None:
    result = run(["/bin/true"], workspace)
    assert result.passed is True
    assert (result.failure_kind, result.exit_code, result.signal) == (None, 0, None)
    assert result.sandbox_mode == "read-only"


def test_a_shell_command_that_exits_0_passes(workspace: Path) -> None:
    assert sh("exit 0", workspace).passed is True


def test_exit_7_fails_with_kind_exit(workspace: Path) -> None:
    result = sh("exit 7", workspace)
    assert (result.passed, result.failure_kind, result.exit_code, result.signal) == (
        False, "exit", 7, None)


def test_death_by_a_signal_is_recorded_as_the_signal(workspace: Path) -> None:
    result = run(["python3", "-c", "import ctypes; ctypes.string_at(0)"], workspace)
    assert (result.passed, result.failure_kind, result.exit_code, result.signal) == (
        False, "exit", None, 11)


def test_on_start_gets_the_pid_once_the_sandbox_runs(workspace: Path) -> None:
    started: list[int] = []
    result = run_sandboxed(define(["/bin/true"]), str(workspace), bound(workspace),
                           on_start=started.append)
    assert result.passed is True
    assert len(started) == 1 and started[0] > 0


def test_the_record_holds_counts_and_receipts_never_output(workspace: Path) -> None:
    record = sh("echo secret-looking-output", workspace).record()
    assert set(record) == {"passed", "failureKind", "exitCode", "signal", "durationMs",
                           "sandboxMode", "stdout", "stderr"}
    assert record["stdout"] == {"bytes": 22, "truncated": False, "receipt": receipt(
        "code-verification-output",
        {"stream": "stdout", "sha256": hashlib.sha256(b"secret-looking-output\n").hexdigest()})}
    assert "secret-looking-output" not in repr(record)


# --- nothing starts when the sandbox cannot be set up -----------------------------------------


def test_a_missing_command_is_a_configuration_failure_and_never_starts(workspace: Path) -> None:
    started: list[int] = []
    result = run_sandboxed(define(["no-such-command"]), str(workspace), bound(workspace),
                           on_start=started.append)
    assert (result.passed, result.failure_kind, result.exit_code) == (False, "configuration", None)
    assert "no-such-command" in result.detail
    assert started == []


def test_a_missing_absolute_command_is_a_configuration_failure(workspace: Path) -> None:
    result = run(["/usr/bin/no-such-command"], workspace)
    assert result.failure_kind == "configuration"


def test_a_command_that_is_not_executable_is_a_configuration_failure(workspace: Path) -> None:
    script = workspace / "run-tests.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o644)
    started: list[int] = []
    result = run_sandboxed(define(["/workspace/run-tests.sh"]), str(workspace), bound(workspace),
                           on_start=started.append)
    assert result.failure_kind == "configuration"
    assert "not an executable file" in result.detail
    assert started == []


def test_unavailable_bubblewrap_is_an_infrastructure_failure_and_nothing_starts(
        writable_workspace: Path) -> None:
    started: list[int] = []
    result = run_sandboxed(
        define(["sh", "-c", "echo ran > /workspace/marker"], sandbox_mode="workspace-write"),
        str(writable_workspace), bound(writable_workspace), on_start=started.append,
        bwrap="/nonexistent/bwrap")
    assert (result.passed, result.failure_kind) == (False, "infrastructure")
    assert "/nonexistent/bwrap" in result.detail
    assert started == []
    assert not (writable_workspace / "marker").exists()


def test_bubblewrap_failing_during_setup_is_an_infrastructure_failure_before_the_command(
        world_reachable_dir: Path, writable_workspace: Path) -> None:
    broken = world_reachable_dir / "broken-bwrap"
    broken.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --version ]; then echo "bubblewrap 0.8.0"; exit 0; fi\n'
        "echo \"bwrap: Can't mount proc on /newroot/proc: Operation not permitted\" >&2\n"
        "exit 1\n")
    broken.chmod(0o755)
    result = run_sandboxed(
        define(["sh", "-c", "echo ran > /workspace/marker; exit 1"],
               sandbox_mode="workspace-write"),
        str(writable_workspace), bound(writable_workspace), bwrap=str(broken))
    assert (result.passed, result.failure_kind, result.exit_code) == (False, "infrastructure",
                                                                      None)
    assert "Can't mount proc" in result.detail
    assert not (writable_workspace / "marker").exists()


def test_a_workspace_inside_a_directory_private_to_root_is_still_reached(
        tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (private / "workspace").mkdir(mode=0o755)
    (private / "workspace" / "ok").write_text("yes\n")
    result = run(["cat", "ok"], private / "workspace")
    assert result.passed is True
    assert result.stdout.tail == "yes\n"


def test_a_workspace_the_sandbox_user_cannot_read_is_an_infrastructure_failure(
        tmp_path: Path) -> None:
    (tmp_path / "workspace").mkdir(mode=0o700)
    started: list[int] = []
    result = run_sandboxed(define(["/bin/true"]), str(tmp_path / "workspace"),
                           bound(tmp_path / "workspace"),
                           on_start=started.append)
    assert result.failure_kind == "infrastructure"
    assert "not readable by the sandbox user 65534" in result.detail
    assert started == []


def test_a_missing_workspace_is_an_infrastructure_failure(workspace: Path) -> None:
    identity = bound(workspace)
    workspace.rename(workspace.with_name("gone"))
    result = run_sandboxed(define(["/bin/true"]), str(workspace), identity)
    assert result.failure_kind == "infrastructure"
    assert "not its bound directory" in result.detail


def test_workspace_write_needs_a_workspace_the_sandbox_user_can_write(workspace: Path) -> None:
    result = run(["/bin/true"], workspace, sandbox_mode="workspace-write")
    assert result.failure_kind == "infrastructure"
    assert "not readable and writable by the sandbox user" in result.detail


# --- the wall-clock timeout kills the whole tree ----------------------------------------------


def test_timeout_kills_the_tree_and_a_detached_grandchild_ignoring_sigterm_never_writes(
        writable_workspace: Path) -> None:
    script = writable_workspace / "slow.sh"
    script.write_text(
        "#!/bin/sh\n"
        "( trap '' TERM HUP INT\n"
        "  setsid sh -c 'trap \"\" TERM HUP INT; sleep 2; echo late > /workspace/marker' &\n"
        ") &\n"
        "echo started\n"
        "sleep 100\n")
    script.chmod(0o755)
    began = time.monotonic()
    result = run(["/workspace/slow.sh"], writable_workspace, timeout_ms=1_000,
                 sandbox_mode="workspace-write")
    assert (result.passed, result.failure_kind, result.signal) == (False, "timeout", 9)
    assert 1_000 <= result.duration_ms < 3_000
    assert result.stdout.tail == "started\n"
    assert time.monotonic() - began < 3.5
    time.sleep(3)
    assert not (writable_workspace / "marker").exists()


def test_a_background_child_left_running_after_the_command_exits_is_killed(
        writable_workspace: Path) -> None:
    control = sh("( sleep 0.2; echo early > /workspace/marker ) & sleep 1", writable_workspace,
                 sandbox_mode="workspace-write")
    assert control.passed and (writable_workspace / "marker").read_text() == "early\n"
    (writable_workspace / "marker").unlink()

    result = sh("( trap '' TERM HUP; sleep 2; echo late > /workspace/marker ) & echo left",
                writable_workspace, sandbox_mode="workspace-write", timeout_ms=1_000)
    assert result.passed is True
    time.sleep(3)
    assert not (writable_workspace / "marker").exists()


# --- no network -------------------------------------------------------------------------------


def test_tcp_connect_to_a_port_listening_on_the_hosts_loopback_fails(workspace: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        result = run(["python3", "-c", "import socket; "
                      f"socket.create_connection(('127.0.0.1', {port}), timeout=2)"], workspace)
        assert result.failure_kind == "exit"
        assert "ConnectionRefusedError" in result.stderr.tail
        listener.settimeout(0.2)
        with pytest.raises(TimeoutError):
            listener.accept()


def test_tcp_connect_to_a_public_address_fails_at_once_with_no_route(workspace: Path) -> None:
    result = run(["python3", "-c",
                  "import socket; socket.create_connection(('1.1.1.1', 443), timeout=5)"],
                 workspace)
    assert result.failure_kind == "exit"
    assert "Network is unreachable" in result.stderr.tail
    assert result.duration_ms < 5_000


def test_only_loopback_exists_inside(workspace: Path) -> None:
    result = run(["cat", "/proc/net/dev"], workspace)
    assert re.findall(r"^\s*(\w+):", result.stdout.tail, re.MULTILINE) == ["lo"]


# --- no writes outside the workspace, and only in workspace-write mode ------------------------


@pytest.mark.parametrize("target", ["/usr/escape", "/usr/bin/escape", "/etc/escape", "/escape",
                                    "/proc/escape", "/workspace/../escape"])
def test_writes_outside_the_workspace_fail(workspace: Path, target: str) -> None:
    result = sh(f"echo x > {target}", workspace)
    assert result.failure_kind == "exit"
    assert not Path("/usr/escape").exists() and not Path("/usr/bin/escape").exists()
    assert not Path("/etc/escape").exists() and not Path("/escape").exists()


def test_the_private_tmp_is_writable_and_gone_afterwards(workspace: Path) -> None:
    result = sh("echo x > /tmp/governor-sandbox-scratch && cat /tmp/governor-sandbox-scratch",
                workspace)
    assert result.passed and result.stdout.tail == "x\n"
    assert not Path("/tmp/governor-sandbox-scratch").exists()


def test_the_workspace_cannot_be_written_in_read_only_mode(writable_workspace: Path) -> None:
    result = sh("echo x > /workspace/new.txt; echo y >> README.md; rm /workspace/README.md",
                writable_workspace)
    assert result.failure_kind == "exit"
    assert "Read-only file system" in result.stderr.tail
    assert not (writable_workspace / "new.txt").exists()
    assert (writable_workspace / "README.md").read_text() == "# the agent's work\n"


def test_workspace_write_mode_can_write_the_workspace(writable_workspace: Path) -> None:
    result = sh("cat README.md > /workspace/copy.md && echo written > out.txt",
                writable_workspace, sandbox_mode="workspace-write")
    assert result.passed is True
    assert result.sandbox_mode == "workspace-write"
    assert (writable_workspace / "out.txt").read_text() == "written\n"
    assert (writable_workspace / "copy.md").read_text() == "# the agent's work\n"


# --- nothing of the host to read --------------------------------------------------------------


def test_root_home_does_not_exist_inside(workspace: Path) -> None:
    result = sh("ls -a /root", workspace)
    assert result.failure_kind == "exit"
    assert "No such file or directory" in result.stderr.tail


def test_etc_shadow_cannot_be_read(workspace: Path) -> None:
    result = sh("cat /etc/shadow || cat /proc/1/root/etc/shadow || cat /proc/self/root/etc/shadow",
                workspace)
    assert result.failure_kind == "exit"
    assert result.stdout.bytes == 0
    assert "root:" not in output(result)


def test_the_workers_env_secrets_are_not_visible(workspace: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_API_TOKEN", "tok-live-123456")
    monkeypatch.setenv("SIGNING_KEY", "key-live-654321")
    result = sh("env; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done", workspace)
    assert result.passed is True
    seen = result.stdout.tail
    assert "PATH=/usr/local/bin:/usr/bin:/bin" in seen and "HOME=/tmp" in seen
    for leaked in ("SOME_API_TOKEN", "tok-live-123456", "SIGNING_KEY", "key-live-654321"):
        assert leaked not in seen


def test_only_the_profile_env_and_the_fixed_set_are_visible(workspace: Path) -> None:
    result = run(["env"], workspace, env={"CI": "1"})
    names = sorted(line.split("=", 1)[0] for line in result.stdout.tail.splitlines())
    assert names == ["CI", "HOME", "LANG", "PATH", "PWD",  # bubblewrap sets PWD
                     "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX", "TMPDIR"]


def test_only_the_sandboxes_own_processes_are_visible(workspace: Path) -> None:
    result = sh("ps -eo pid,comm; echo; ls /proc | grep -c '^[0-9]'", workspace)
    assert result.passed is True
    table, count = result.stdout.tail.rsplit("\n\n", 1)
    rows = [line.split() for line in table.splitlines()[1:]]
    assert {command for _pid, command in rows} <= {"bwrap", "sh", "ps"}
    assert int(count) <= 5
    assert str(os.getpid()) not in {pid for pid, _command in rows}


# --- resource limits --------------------------------------------------------------------------


def test_a_fork_bomb_is_contained_by_the_pids_limit(workspace: Path) -> None:
    # The watcher uses only shell builtins, so it keeps counting while no fork succeeds.
    script = (
        "bomb() { bomb | bomb & }\n"
        "bomb 2>/dev/null &\n"
        "max=0\n"
        "for ((i = 0; i < 3000; i++)); do\n"
        "  n=0; for p in /proc/[0-9]*; do n=$((n + 1)); done\n"
        "  (( n > max )) && max=$n\n"
        "done\n"
        "echo max=$max\n")
    began = time.monotonic()
    result = run(["bash", "-c", script], workspace, limits={"pids": 64}, timeout_ms=30_000)
    assert result.passed is True, result
    most = int(result.stdout.tail.strip().removeprefix("max="))
    assert 20 < most <= 64
    assert time.monotonic() - began < 30


def test_more_processes_than_the_pids_limit_cannot_start(workspace: Path) -> None:
    result = sh("i=0; while [ $i -lt 100 ]; do sleep 30 & i=$((i + 1)); echo $i; done", workspace,
                limits={"pids": 16})
    assert result.failure_kind == "exit", result
    assert "Cannot fork" in result.stderr.tail
    assert len(result.stdout.tail.split()) < 16


def test_the_pids_budget_is_shared_by_every_process_of_the_sandbox_user(
        workspace: Path) -> None:
    # RLIMIT_NPROC counts host processes of uid 65534, so other runs' processes count too.
    others = [subprocess.Popen(["sleep", "30"], user=65534, group=65534, extra_groups=[])
              for _ in range(10)]
    try:
        started: list[int] = []
        result = run_sandboxed(define(["/bin/true"], limits={"pids": 8}), str(workspace),
                               bound(workspace),
                               on_start=started.append)
    finally:
        for other in others:
            other.kill()
            other.wait()
    assert result.failure_kind == "infrastructure"
    assert "already runs as many processes as the pids limit (8) allows" in result.detail
    assert started == []


def test_the_sandbox_never_runs_as_host_root(workspace: Path) -> None:
    with pytest.raises(ValueError, match="never runs as host root"):
        run_sandboxed(define(["/bin/true"]), str(workspace), bound(workspace), run_as=(0, 0))


def test_allocating_4_gib_is_refused_by_the_memory_limit(workspace: Path) -> None:
    result = run(["python3", "-c", "block = bytearray(4 * 1024**3)"], workspace,
                 limits={"memory_bytes": 1024**3})
    assert result.failure_kind == "exit"
    assert "MemoryError" in result.stderr.tail


def test_cpu_seconds_stop_a_busy_loop(workspace: Path) -> None:
    result = sh("while :; do :; done", workspace, limits={"cpu_seconds": 1}, timeout_ms=20_000)
    assert (result.failure_kind, result.signal) == ("exit", 9)
    assert result.duration_ms < 10_000


def test_file_bytes_stop_a_file_growing_past_the_limit(workspace: Path) -> None:
    result = sh("head -c 2097152 /dev/zero > /tmp/big; echo status=$?; wc -c < /tmp/big",
                workspace, limits={"file_bytes": 1024**2})
    assert result.stdout.tail.split() == ["status=153", "1048576"]  # 128 + SIGXFSZ


def test_100_mb_on_both_streams_is_counted_hashed_and_truncated_in_bounded_memory(
        workspace: Path) -> None:
    tracemalloc.start()
    try:
        result = sh(f"head -c {HUNDRED_MB} /dev/zero >&2 & head -c {HUNDRED_MB} /dev/zero; wait",
                    workspace, timeout_ms=60_000)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.passed is True
    zeros = hashlib.sha256()
    chunk = bytes(1024 * 1024)
    for _ in range(100):
        zeros.update(chunk)
    for name, stream in (("stdout", result.stdout), ("stderr", result.stderr)):
        assert (stream.bytes, stream.truncated) == (HUNDRED_MB, True)
        assert stream.receipt == receipt("code-verification-output",
                                         {"stream": name, "sha256": zeros.hexdigest()})
        assert stream.tail == "\0" * 65_536
    assert peak < 8 * 1024 * 1024


def test_the_output_receipt_covers_every_byte_and_the_tail_keeps_the_last(
        workspace: Path) -> None:
    result = run(["seq", "1", "100000"], workspace, limits={"output_bytes": 1024})
    produced = "".join(f"{n}\n" for n in range(1, 100_001)).encode()
    assert (result.stdout.bytes, result.stdout.truncated) == (len(produced), True)
    assert result.stdout.receipt == receipt(
        "code-verification-output",
        {"stream": "stdout", "sha256": hashlib.sha256(produced).hexdigest()})
    assert result.stdout.tail.encode() == produced[-1024:]
    assert (result.stderr.bytes, result.stderr.truncated) == (0, False)


# --- no privilege -----------------------------------------------------------------------------


def test_setuid_binaries_give_no_privilege(workspace: Path) -> None:
    setuid_id = workspace / "id-suid"
    shutil.copy("/usr/bin/id", setuid_id)
    os.chown(setuid_id, 0, 0)
    setuid_id.chmod(0o4755)
    assert setuid_id.stat().st_mode & stat.S_ISUID
    result = sh(
        "id; grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs)' /proc/self/status;"
        " /workspace/id-suid;"
        " su -c id root </dev/null; echo su=$?;"
        " sudo id; echo sudo=$?;"
        " cp /usr/bin/id /tmp/id && chmod u+s /tmp/id && /tmp/id;"
        " python3 -c 'import os; os.setuid(0)' 2>/dev/null; echo setuid=$?",
        workspace)
    seen = result.stdout.tail
    assert seen.count("uid=65534 gid=65534") == 3, seen
    assert "euid=" not in seen and "uid=0" not in seen
    for capability in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert re.search(rf"^{capability}:\s+0+$", seen, re.MULTILINE)
    assert re.search(r"^NoNewPrivs:\s+1$", seen, re.MULTILINE)
    assert re.search(r"^su=[1-9]", seen, re.MULTILINE)
    assert re.search(r"^sudo=[1-9]", seen, re.MULTILINE)
    assert "setuid=1" in seen


# --- image mode -------------------------------------------------------------------------------


@pytest.fixture
def busybox_rootfs(tmp_path: Path) -> Path:
    """A tiny image: Debian's static busybox and the links a shell needs, nothing else."""
    rootfs = tmp_path / "image"
    (rootfs / "bin").mkdir(parents=True)
    shutil.copy("/bin/busybox", rootfs / "bin" / "busybox")
    for applet in ("sh", "echo", "cat", "ls", "id"):
        (rootfs / "bin" / applet).symlink_to("/bin/busybox")
    for mount_point in ("proc", "dev", "tmp", "workspace"):
        (rootfs / mount_point).mkdir()
    for path in [rootfs, *rootfs.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755)
    return rootfs


def test_image_mode_runs_the_command_in_the_rootfs_instead_of_the_host(
        workspace: Path, busybox_rootfs: Path) -> None:
    result = sh("echo hello from busybox; ls /; cat /workspace/README.md; id; ls /usr || true",
                workspace, rootfs=str(busybox_rootfs))
    assert result.passed is True, result
    lines = result.stdout.tail.splitlines()
    assert lines[0] == "hello from busybox"
    assert lines[1:6] == ["bin", "dev", "proc", "tmp", "workspace"]
    assert "# the agent's work" in lines
    assert "uid=65534 gid=65534" in result.stdout.tail
    assert "No such file or directory" in result.stderr.tail


def test_image_mode_finds_commands_only_in_the_rootfs(workspace: Path,
                                                      busybox_rootfs: Path) -> None:
    result = run(["python3", "-V"], workspace, rootfs=str(busybox_rootfs))
    assert result.failure_kind == "configuration"


def test_a_rootfs_without_mount_points_is_an_infrastructure_failure(
        workspace: Path, busybox_rootfs: Path) -> None:
    (busybox_rootfs / "workspace").rmdir()
    result = sh("echo ran", workspace, rootfs=str(busybox_rootfs))
    assert result.failure_kind == "infrastructure"
    assert "/workspace" in result.detail

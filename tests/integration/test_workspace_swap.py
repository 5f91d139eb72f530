"""The workspace swap race (issue 11 item 1): with a symlink `evil -> /` beside the workspace and
a process exchanging the two names as fast as it can, no run ever sees anything but the
workspace, nothing is written on the host, and no file check reads outside it."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import rfc8785

from governor.domain.profiles import profile_definition, validate_profile
from governor.domain.workspace import NOT_BOUND, Workspace, WorkspaceError, identity_at
from verification import sandbox
from verification.sandbox import run_sandboxed

pytestmark = pytest.mark.sandbox

RUNS = 300
READS = 3000
MARKER = "the agent's workspace\n"

# renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) in a loop, until killed, each name
# staying for a random moment (under a millisecond): a run's checks, each a few microseconds,
# then see either state, and so does its mount, tens of milliseconds later.
SWAPPER = """
import ctypes, random, sys, time
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE, SYS_RENAMEAT2 = -100, 2, 316
a, b = sys.argv[1].encode(), sys.argv[2].encode()
print("swapping", flush=True)
while True:
    libc.syscall(SYS_RENAMEAT2, AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
    time.sleep(random.random() / 1000)
"""


@pytest.fixture
def place() -> Iterator[Path]:
    """A directory the sandbox user can reach, holding `ws` (the bound workspace) and `evil`."""
    root = Path(tempfile.mkdtemp(prefix="governor-swap-test-"))
    root.chmod(0o755)
    workspace = root / "ws"
    workspace.mkdir()
    workspace.chmod(0o777)
    (workspace / "MARKER").write_text(MARKER)
    (root / "evil").symlink_to("/")
    try:
        yield root
    finally:
        shutil.rmtree(root)


@contextlib.contextmanager
def swapping(place: Path) -> Iterator[None]:
    """The swap loop runs in a process of its own while the block does."""
    swapper = subprocess.Popen(  # noqa: S603 - our own interpreter and script
        [sys.executable, "-c", SWAPPER, str(place / "ws"), str(place / "evil")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert swapper.stdout is not None and swapper.stdout.readline() == "swapping\n"
        yield
    finally:
        swapper.kill()  # only the process this test started
        swapper.wait()
        if (place / "ws").is_symlink():  # the names as they were, for the clean-up
            subprocess.run([sys.executable, "-c", SWAPPER.replace("while True:", "if True:"),  # noqa: S603
                            str(place / "ws"), str(place / "evil")], check=True,
                           capture_output=True)


def test_no_run_ever_sees_anything_but_the_workspace_while_it_is_swapped_with_root(
    place: Path,
) -> None:
    workspace = place / "ws"
    identity = identity_at(str(workspace))  # bound before the attack starts
    escape = f"governor-swap-escape-{uuid.uuid4().hex}"
    # Sees the host's / (its /etc): says so and tries to write the host's /tmp. Then it must
    # see the marker of the bound workspace.
    script = (f"if test -e /workspace/etc/passwd; then echo ESCAPED; "
              f"echo x > /workspace/tmp/{escape}; fi; "
              f"test \"$(cat /workspace/MARKER)\" = \"{MARKER.strip()}\"")
    definitions = [profile_definition(validate_profile({
        "id": "swap-race", "description": "Looks around.", "argv": ["/bin/sh", "-c", script],
        "sandbox_mode": mode})) for mode in ("read-only", "workspace-write")]
    outcomes: Counter[str] = Counter()
    escaped = []
    with swapping(place):
        # A run refused at its first check takes microseconds and the next one would meet the
        # same swap; count only runs that got past it, where the rest of the race is.
        while outcomes["started"] < RUNS and outcomes["not bound"] < 50 * RUNS:
            definition = definitions[outcomes["started"] % 2]
            result = run_sandboxed(definition, str(workspace), identity)
            if result.detail == NOT_BOUND:
                outcomes["not bound"] += 1
                continue
            outcomes["started"] += 1
            outcomes[result.failure_kind or "passed"] += 1
            saw_only_the_workspace = "ESCAPED" not in result.stdout.tail and (
                result.passed or result.failure_kind == "infrastructure")
            if not saw_only_the_workspace:
                escaped.append(result)
    assert not escaped, [(r.failure_kind, r.stdout.tail, r.detail) for r in escaped[:5]]
    assert not Path("/tmp", escape).exists()  # noqa: S108 - the host's /tmp, on purpose
    # The race was live: runs met the workspace swapped, before they started and while they
    # started (refused as infrastructure), and the others ran over the bound workspace.
    assert outcomes["started"] == RUNS, outcomes
    assert outcomes["infrastructure"] > 0 and outcomes["passed"] > 0, outcomes
    assert outcomes["infrastructure"] + outcomes["passed"] == RUNS, outcomes


def test_no_file_check_reads_outside_the_workspace_while_it_is_swapped_with_root(
    place: Path,
) -> None:
    workspace = place / "ws"
    checks = Workspace(str(workspace), identity_at(str(workspace)))
    outcomes: Counter[str] = Counter()
    with swapping(place):
        for _ in range(READS):
            for relative in ("MARKER", "etc/hostname", "etc/passwd"):
                try:
                    text = checks.read_text(relative, max_bytes=65536)
                except WorkspaceError as exc:
                    outcomes[f"{relative}: {exc}"] += 1
                else:
                    outcomes[f"{relative}: read {text == MARKER}"] += 1
            try:
                outcomes[f"etc present {checks.entry_present('etc')}"] += 1
            except WorkspaceError as exc:
                outcomes[f"etc: {exc}"] += 1
    refused = NOT_BOUND
    assert set(outcomes) <= {
        "MARKER: read True", f"MARKER: {refused}", "etc/hostname: not found",
        f"etc/hostname: {refused}", "etc/passwd: not found", f"etc/passwd: {refused}",
        "etc present False", f"etc: {refused}",
    }, outcomes
    assert outcomes[f"MARKER: {refused}"] > 0, outcomes
    assert outcomes["MARKER: read True"] > 0, outcomes


def _started_at_the_gate(workspace: Path) -> tuple[subprocess.Popen[bytes], int, int, dict]:
    """bubblewrap over `workspace`, stopped at the gate: (process, status pipe, gate, status)."""
    definition = profile_definition(validate_profile({
        "id": "gate", "description": "Writes a file.", "sandbox_mode": "workspace-write",
        "argv": ["/bin/sh", "-c", "echo ran > /workspace/ran"]}))
    status_read, status_write = os.pipe()
    gate_read, gate_write = os.pipe()
    process = subprocess.Popen(  # noqa: S603 - bubblewrap with a fixed argv
        sandbox.bwrap_argv(definition, str(workspace), status_fd=status_write,
                           gate_fd=gate_read),
        pass_fds=(status_write, gate_read), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.close(status_write)
    os.close(gate_read)
    status = sandbox._Status()
    while "pid-namespace" not in status.fields():
        status.feed(os.read(status_read, 4096))
    return process, status_read, gate_write, status.fields()


def test_the_gate_starts_the_command_only_over_the_recorded_directory(place: Path) -> None:
    """The last line of defence: whatever was mounted, the command starts only once the
    directory at /workspace is the bound one, and a gate closed without the go-ahead (a
    refusal, or a worker that died) never lets it start."""
    workspace, elsewhere = place / "ws", place / "elsewhere"
    elsewhere.mkdir(mode=0o777)
    deadline = time.monotonic() + 30

    process, status_pipe, gate, status = _started_at_the_gate(workspace)
    problem = sandbox._workspace_problem(status, identity_at(str(elsewhere)), deadline)
    assert problem is not None and "not the session's bound workspace" in problem
    os.close(gate)  # no program written: bubblewrap cannot go on
    _, stderr = process.communicate(timeout=30)
    os.close(status_pipe)
    assert process.returncode != 0 and b"seccomp" in stderr.lower(), stderr
    assert not (workspace / "ran").exists()

    process, status_pipe, gate, status = _started_at_the_gate(workspace)
    assert sandbox._workspace_problem(status, identity_at(str(workspace)), deadline) is None
    os.write(gate, sandbox.ALLOW_EVERYTHING)
    os.close(gate)
    process.communicate(timeout=30)
    os.close(status_pipe)
    assert process.returncode == 0
    assert (workspace / "ran").read_text() == "ran\n"


NON_ROOT_RACE = """
import collections, json, os, sys
from governor.domain.workspace import NOT_BOUND, identity_at
from verification.sandbox import run_sandboxed
workspace, runs = sys.argv[1], int(sys.argv[2])
definition = json.loads(sys.argv[3])
identity = identity_at(workspace)
outcomes = collections.Counter()
print("ready", flush=True)
sys.stdin.readline()  # the swapper runs from here on
while outcomes["started"] < runs and outcomes["not bound"] < 50 * runs:
    result = run_sandboxed(definition, workspace, identity)
    if result.detail == NOT_BOUND:
        outcomes["not bound"] += 1
        continue
    outcomes["started"] += 1
    escaped = "ESCAPED" in result.stdout.tail or result.failure_kind not in (None, "infrastructure")
    outcomes["escaped" if escaped else "gate" if "mounted at" in result.detail
             else result.failure_kind or "passed"] += 1
print(json.dumps(outcomes), flush=True)
"""


def _interpreter_for_nobody() -> str | None:
    """An interpreter of this Python version that uid 65534 may run (this one may live in a
    home directory it cannot reach)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (sys.executable, f"/usr/bin/python{version}"):
        try:
            subprocess.run([candidate, "-c", "pass"], preexec_fn=_as_nobody,  # noqa: S603
                           capture_output=True, check=True)
        except (OSError, subprocess.CalledProcessError):
            continue
        return candidate
    return None


def _as_nobody() -> None:
    os.setgroups([])
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)


@pytest.mark.skipif(os.geteuid() != 0, reason="starts a worker as uid 65534")
def test_a_worker_that_is_not_root_is_held_by_the_gate(place: Path) -> None:
    """bubblewrap 0.8 resolves a bind source (even /proc/self/fd/N) to a path again, so a
    worker that is not root and cannot stage the workspace itself does get the wrong
    directory mounted now and then; the gate refuses every such run before its command."""
    interpreter = _interpreter_for_nobody()
    if interpreter is None:
        pytest.skip("no interpreter of this version that uid 65534 can run")
    repo = Path(__file__).resolve().parents[2]
    packages = Path(rfc8785.__file__).resolve().parent.parent
    place.chmod(0o777)  # the worker, uid 65534, exchanges the names itself
    (place / "ws" / "MARKER").chmod(0o644)
    definition = profile_definition(validate_profile({
        "id": "swap-race", "description": "Looks around.", "sandbox_mode": "workspace-write",
        "argv": ["/bin/sh", "-c", "test -e /workspace/etc/passwd && echo ESCAPED; "
                                  f"test \"$(cat /workspace/MARKER)\" = \"{MARKER.strip()}\""]}))
    worker = subprocess.Popen(  # noqa: S603 - our own script
        [interpreter, "-c", NON_ROOT_RACE, str(place / "ws"), "150", json.dumps(definition)],
        env={"PYTHONPATH": f"{repo}:{packages}", "PATH": "/usr/bin:/bin"}, cwd="/",
        preexec_fn=_as_nobody, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert worker.stdin is not None and worker.stdout is not None
    try:
        assert worker.stdout.readline() == "ready\n"
        with swapping(place):
            worker.stdin.write("go\n")
            worker.stdin.flush()
            outcomes = json.loads(worker.stdout.readline())
    finally:
        worker.kill()  # only the process this test started
        worker.wait()
    assert outcomes.get("escaped", 0) == 0, outcomes
    assert outcomes["started"] == 150, outcomes
    assert outcomes.get("gate", 0) > 0 and outcomes.get("passed", 0) > 0, outcomes

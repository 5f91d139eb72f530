"""rules §8 "Run": one verifier command in a bubblewrap sandbox.

Who runs it. bubblewrap is started as an unprivileged host identity: 65534:65534 ("nobody") when
the worker is root, the worker's own ids otherwise; inside, the command is uid/gid 65534 of its own
user namespace either way. Not as root, because bubblewrap maps the sandbox user to the uid that
started it: as root the command would be host uid 0 (without capabilities), the kernel never
applies RLIMIT_NPROC to uid 0, so `pids` would not stop a fork bomb, and a process that escaped
the mount namespace would own every root-owned file. What that costs:

- the files the command uses must be readable by that identity (other-readable, as a normal
  checkout is), the workspace directory writable by it for `workspace-write`; this is checked
  for the workspace and rootfs directories (and an outcome probe's read-only data directory)
  before anything starts (mode bits: an ACL the check cannot see still fails safely, as
  `infrastructure`, before the command starts). Where they
  lie does not matter: a root worker binds them onto fixed mount points in a private mount
  namespace before it drops to 65534, as bubblewrap could not pass a directory private to root;
- RLIMIT_NPROC counts every process of the identity on the host, so sandboxes running at the
  same time share one `pids` budget (bubblewrap's monitor takes one process of it).

The command is pid 1 of its PID namespace (--as-pid-1), as in `docker run` without --init:
bubblewrap's own reaper would outlive bubblewrap and end as a zombie on the host, reaped
whenever the host's init gets to it and counted against `pids` until then. So bubblewrap reaps
the command itself, and the kernel lets a namespace's pid 1 finish exiting only once every other
process in it is gone: when bubblewrap exits, nothing of the run is left. The price is pid 1's
rules for the command: signals it has no handler for, sent from inside the sandbox, are ignored,
and orphans inside are reparented to it.

Which directory is the workspace. Only the one the session bound: its path is opened one
component at a time without following a link and must have the recorded device and inode
(governor.domain.workspace); a root worker opens it so again in the run's own mount namespace
and binds that descriptor. bubblewrap 0.8 has no --bind-fd and resolves every bind source to a
path again, so that alone would not hold for a worker that is not root: the gate does. bubblewrap
reads a seccomp program (--seccomp) after every mount and before the command; the worker writes
one that allows everything only once the directory at /workspace, seen through the sandbox's own
root, has the expected identity. An empty pipe (a refusal, or a worker that died) is a program
bubblewrap cannot load, and it exits without starting the command.

Totals. A cgroup per run caps its memory and processes as a whole (verification/cgroups.py); a
`workspace-write` run of a root worker writes an overlay with a size-capped upper layer, applied
to the workspace only when it passes (verification/overlay.py).

Output. Each stream is hashed over every byte the sandbox wrote to it, in order, from the start
until end of file or until the process tree was killed, whatever was kept; nothing is decoded or
normalised. When bubblewrap fails before the command starts, its own message is those bytes.
Only the last `outputBytes` bytes are kept (`truncated` when more came): they are the
operator's `tail`, never part of an event. What the run's result then is — passed or which
failure, the output receipts, the result document and its receipt — is decided by
governor/domain/verification.py from what is reported here.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import json
import logging
import os
import posixpath
import resource
import secrets
import selectors
import shutil
import signal
import stat
import struct
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

from governor.domain.heldout import MOUNT
from governor.domain.profiles import operator_environment
from governor.domain.report_stream import MAX_STREAM_BYTES, plugin_argv
from governor.domain.verification import Ended, outcome, stream_record
from governor.domain.workspace import WorkspaceError, open_bound_directory
from verification.cgroups import CgroupsUnavailable, RunCgroup, run_cgroup
from verification.overlay import DIRECTORY, apply_changes, checked, mount_overlay

log = logging.getLogger(__name__)

BWRAP = "/usr/bin/bwrap"
SANDBOX_UID = SANDBOX_GID = 65534
NOBODY = (65534, 65534)
WORKSPACE = "/workspace"
# The sandbox's own private tmpfs mounts, never the host's.
SANDBOX_TMP = "/tmp"  # noqa: S108
SANDBOX_SHM = "/dev/shm"  # noqa: S108
TMPFS_BYTES = 64 * 1024 * 1024
# Python reads no bytecode cache from the tree and writes none into it: its caches go to the
# sandbox's own /tmp (a planted `__pycache__` is excluded from trees, and never materialised).
FIXED_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": SANDBOX_TMP, "LANG": "C.UTF-8",
             "TMPDIR": SANDBOX_TMP, "PYTHONDONTWRITEBYTECODE": "1",
             "PYTHONPYCACHEPREFIX": SANDBOX_TMP + "/pycache"}
# The only parts of the host's /etc a command sees: the dynamic linker's cache and the
# Debian alternatives that /usr/bin links point through. No passwd, shadow, hosts or keys.
HOST_ETC = ("/etc/alternatives", "/etc/ld.so.cache")
HOST_SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib64")
# What a probe with `network: host` (an operator's choice) also needs to resolve and reach a
# metrics system: name resolution and the CA certificates. Verifier profiles never get these.
HOST_NETWORK_ETC = ("/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/ssl/certs")
REPORT = "/governor-report"  # a report profile's private, writable directory (§14.6)
# A streamed report profile's plugin (§17.4): read-only, outside the tree, named per run.
STREAM_PLUGIN = "/governor-stream"
STREAM_PLUGIN_SOURCE = Path(__file__).with_name("pytest_report_stream.py")
# A held-out profile's suite files (rules §18.2): read-only, outside the tree, the run's own copy.
HELDOUT = MOUNT
HELDOUT_VARIABLE = "GOVERNOR_HELDOUT_DIR"
STREAM_FD_VARIABLE = "GOVERNOR_STREAM_FD"
ROOTFS_MOUNT_POINTS = ("/proc", "/dev", SANDBOX_TMP, WORKSPACE)
READ_CHUNK = 65_536
KILL_GRACE_SECONDS = 2.0
MAX_SYMLINK_HOPS = 40

READ, WRITE, EXECUTE = 4, 2, 1
SEARCH = EXECUTE  # on a directory

# Where a root worker binds the workspace and rootfs, in a mount namespace of its own.
STAGING = "/run/governor-sandbox"
STAGED_WORKSPACE = STAGING + "/workspace"
STAGED_ROOTFS = STAGING + "/rootfs"
STAGED_REPORT = STAGING + "/report"
STAGED_ENVIRONMENT = STAGING + "/environment-"  # + the index of an operator directory
STAGED_STREAM = STAGING + "/stream"
STAGED_BINDS = STAGING + "/binds"  # the read-only binds' sources, one directory each
STAGED_HELDOUT = STAGING + "/heldout"
STAGED_CHANGES = STAGING + "/changes"  # a workspace-write run's upper layer (verification/overlay)
DEFAULT_WRITE_BYTES = 1024**3

_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1
CLONE_NEWNS = 0x0002_0000
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 0x4_0000
# The gate (see `_workspace_problem`): bubblewrap reads a seccomp program from a pipe after
# every mount and before the command. The worker writes this one, which allows every system
# call (BPF_RET|BPF_K, SECCOMP_RET_ALLOW), only once the bound workspace is checked; an empty
# pipe (refused, or the worker died) is a program bubblewrap cannot load, and it exits.
ALLOW_EVERYTHING = struct.pack("=HBBI", 0x06, 0, 0, 0x7FFF_0000)
GATE_POLL_SECONDS = 0.001


@dataclass(frozen=True)
class StreamResult:
    bytes: int
    truncated: bool
    receipt: str
    tail: str

    def record(self) -> dict[str, Any]:
        """The persisted part: never the output itself."""
        return {"bytes": self.bytes, "truncated": self.truncated, "receipt": self.receipt}


@dataclass(frozen=True)
class SandboxResult:
    passed: bool
    # None | "exit" | "timeout" | "configuration" | "infrastructure"
    failure_kind: str | None
    exit_code: int | None
    signal: int | None
    duration_ms: int
    stdout: StreamResult
    stderr: StreamResult
    sandbox_mode: str
    detail: str = ""  # why it failed, for operators
    # A streamed report profile's stream as the plugin sent it (at most MAX_STREAM_BYTES + 1
    # bytes are kept: more is refused when it is judged); None when the run streams nothing.
    stream: bytes | None = None
    # An oracle run's stdout (rules §18.3): its first `keep_stdout` bytes and one more if more
    # came (more is refused when it is judged); None when the run keeps none.
    output: bytes | None = None

    def record(self) -> dict[str, Any]:
        """The fields of a `reliability/code-verification` event this run decides (§8)."""
        return {
            "passed": self.passed,
            "failureKind": self.failure_kind,
            "exitCode": self.exit_code,
            "signal": self.signal,
            "durationMs": self.duration_ms,
            "sandboxMode": self.sandbox_mode,
            "stdout": self.stdout.record(),
            "stderr": self.stderr.record(),
        }


class _Capture:
    """Counts and hashes every byte of one stream, keeping only the last `cap` bytes."""

    def __init__(self, name: str, cap: int) -> None:
        self.name = name
        self.cap = cap
        self.count = 0
        self.digest = hashlib.sha256()
        self.kept = bytearray()

    def feed(self, chunk: bytes) -> None:
        self.count += len(chunk)
        self.digest.update(chunk)
        self.kept += chunk[-self.cap:] if self.cap else b""
        if len(self.kept) > self.cap:
            del self.kept[: len(self.kept) - self.cap]

    def result(self) -> StreamResult:
        record = stream_record(total=self.count, kept=len(self.kept),
                               sha256_hex=self.digest.hexdigest(), stream=self.name)
        return StreamResult(bytes=record["bytes"], truncated=record["truncated"],
                            receipt=record["receipt"],
                            tail=self.kept.decode("utf-8", errors="replace"))


class _Kept:
    """The first `cap` bytes of the report stream (§17.4), and one more if more came."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.data = bytearray()

    def feed(self, chunk: bytes) -> None:
        self.data += chunk[: self.cap + 1 - len(self.data)]


@dataclass(frozen=True)
class StreamPlugin:
    """A streamed run's plugin: the directory holding it as `<module>.py`, and the write end
    of the pipe (its number inside the sandbox too) the worker reads."""

    directory: str
    module: str
    fd: int


def streams(definition: Mapping[str, Any]) -> bool:
    """Whether a run of this profile loads the report stream plugin (rules §17.4): a report
    profile whose argv runs pytest itself."""
    return bool(definition.get("report")) and plugin_argv(definition["argv"], "_") is not None


def plugin_copy() -> tuple[str, str]:
    """(directory, module): a new directory holding a copy of the plugin as `<module>.py`,
    under a module name drawn now (so no module in the tree can stand in for it), readable by
    the sandbox user. The caller removes it."""
    module = f"governor_stream_{secrets.token_hex(8)}"
    directory = tempfile.mkdtemp(prefix="governor-stream-")
    try:
        os.chmod(directory, 0o755)  # noqa: S103 - the sandbox user reads the plugin
        copy = os.path.join(directory, f"{module}.py")
        shutil.copyfile(STREAM_PLUGIN_SOURCE, copy)
        os.chmod(copy, 0o644)
    except OSError:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return directory, module


@dataclass(frozen=True)
class _Identity:
    uid: int
    gid: int
    groups: tuple[int, ...]
    switch_from_root: bool  # the worker is root and becomes this identity to start bubblewrap


def _identity(run_as: tuple[int, int]) -> _Identity:
    if 0 in run_as:
        raise ValueError("the sandbox never runs as host root: RLIMIT_NPROC would not apply")
    if os.geteuid() == 0:
        return _Identity(run_as[0], run_as[1], (), switch_from_root=True)
    return _Identity(os.getuid(), os.getgid(), tuple(os.getgroups()), switch_from_root=False)


def _allows(info: os.stat_result, who: _Identity, wanted: int) -> bool:
    if info.st_uid == who.uid:
        granted = info.st_mode >> 6
    elif info.st_gid == who.gid or info.st_gid in who.groups:
        granted = info.st_mode >> 3
    else:
        granted = info.st_mode
    return granted & wanted == wanted


def _directory_problem(path: str, who: _Identity, wanted: int, what: str,
                       shown: str | None = None) -> str | None:
    """Why `who` cannot use directory `path` (already resolved, or an open directory's
    /proc/self/fd/N, then `shown` names it) as `wanted`, or None. Where it lies does not
    matter: a root worker stages it (see `_child_setup`), any other worker found it itself."""
    shown = shown or path
    try:
        info = os.stat(path)
    except OSError as exc:
        return f"{what} {shown} is not available ({exc.strerror})"
    if not stat.S_ISDIR(info.st_mode):
        return f"{what} {shown} is not a directory"
    if not _allows(info, who, wanted):
        needs = "readable and writable" if wanted & WRITE else "readable"
        return f"{what} {shown} is not {needs} by the sandbox user {who.uid}"
    return None


# --- the sandbox's file system ---------------------------------------------------------------


@dataclass(frozen=True)
class Mount:
    """One entry of the sandbox's file system, in bubblewrap's order: `kind` is a bubblewrap
    option (`ro-bind`, `bind`, `symlink`, `proc`, `dev`, `tmpfs`, `remount-ro`), `source` the
    host path (a symlink's target), `target` where the command sees it."""

    kind: str
    target: str
    source: str = ""
    size: int | None = None


def sandbox_mounts(definition: Mapping[str, Any], workspace: str,
                   report: str | None = None, plugin: str | None = None,
                   heldout: str | None = None) -> list[Mount]:
    """Everything the command's file system holds, and nothing else:

    - the system, read-only: the profile's rootfs as `/`; or the host's `/usr`, with `/bin`,
      `/sbin`, `/lib`, `/lib64` as the host has them (symlinks or directories) and of `/etc`
      only the dynamic linker's cache and the Debian alternatives (no passwd, hosts or keys);
    - a fresh `/proc` of the sandbox's PID namespace and a minimal `/dev`;
    - private tmpfs of TMPFS_BYTES at `/dev/shm` and `/tmp` (HOME, TMPDIR, Python's caches);
    - the workspace at `/workspace` — the run's private copy of its tree — read-only, or
      writable for `workspace-write`;
    - each operator environment directory of the profile (rules §17.8: an absolute path
      outside every workspace) read-only at its own path, so a venv's absolute paths hold;
    - for a report profile, `report` (an empty directory of the run's own) writable at
      `/governor-report`, outside the workspace; for a streamed one, `plugin` (the directory
      holding the stream plugin) read-only at `/governor-stream`;
    - for a held-out profile, `heldout` (the run's own copy of the suite's files) read-only at
      `/governor-heldout`, outside the workspace (rules §18.2);
    - then `/dev` and `/` remounted read-only, so the only writable places are the sized tmpfs
      and (for `workspace-write`) the workspace.

    `workspace` is the host path bubblewrap binds. A root worker first stages the workspace
    (and the rootfs and the read-only binds) at fixed points under STAGING in a mount namespace
    of its own — `_child_setup` — binding the workspace by descriptor, or for a
    `workspace-write` run an overlay of it whose upper layer is a tmpfs of the run's write cap
    (verification/overlay.py); the gate checks what ended up at `/workspace` before the command
    starts."""
    mounts: list[Mount] = []
    if rootfs := definition.get("rootfs"):
        mounts.append(Mount("ro-bind", "/", rootfs))
    else:
        mounts.append(Mount("ro-bind", "/usr", "/usr"))
        for path in HOST_SYSTEM_LINKS:
            if os.path.islink(path):
                mounts.append(Mount("symlink", path, os.readlink(path)))
            elif os.path.isdir(path):
                mounts.append(Mount("ro-bind", path, path))
        mounts += [Mount("ro-bind", path, path) for path in HOST_ETC if os.path.exists(path)]
        if definition.get("network") == "host":
            mounts += [Mount("ro-bind", path, path) for path in HOST_NETWORK_ETC
                       if os.path.exists(path)]
    writable = definition["sandboxMode"] == "workspace-write"
    return [*mounts, Mount("proc", "/proc"), Mount("dev", "/dev"),
            Mount("tmpfs", SANDBOX_SHM, size=TMPFS_BYTES),
            Mount("tmpfs", SANDBOX_TMP, size=TMPFS_BYTES),
            Mount("bind" if writable else "ro-bind", WORKSPACE, workspace),
            # An outcome probe's operator-set data directory (GOVERNOR_OUTCOME_DATA_DIR).
            *[Mount("ro-bind", target, source)
              for source, target in definition.get("readOnlyBinds", [])],
            *[Mount("ro-bind", path, source)
              for path, source in operator_sources(definition).items()],
            *([Mount("bind", REPORT, report)] if report else []),
            *([Mount("ro-bind", STREAM_PLUGIN, plugin)] if plugin else []),
            *([Mount("ro-bind", HELDOUT, heldout)] if heldout else []),
            Mount("remount-ro", "/dev"), Mount("remount-ro", "/")]


def operator_sources(definition: Mapping[str, Any]) -> dict[str, str]:
    """Each operator environment directory (the path the command sees) and the host directory
    bound there: itself resolved, or where a root worker staged it (`stagedEnvironment`)."""
    staged = definition.get("stagedEnvironment") or {}
    return {path: staged.get(path) or os.path.realpath(path)
            for path in operator_environment(definition.get("environment", []))}


def _mount_argv(mount: Mount) -> list[str]:
    if mount.kind in ("ro-bind", "bind", "symlink"):
        return [f"--{mount.kind}", mount.source, mount.target]
    sized = ["--size", str(mount.size)] if mount.size is not None else []
    return [*sized, f"--{mount.kind}", mount.target]


def sandbox_env(definition: Mapping[str, Any], stream_fd: int | None = None) -> dict[str, str]:
    """The command's whole environment: the fixed minimal set (with GOVERNOR_REPORT_DIR for a
    report profile, and unless the profile says `pluginAutoload`, no pytest plugin loaded
    because an installed package's metadata names it: rules §17.3), then the profile's own;
    for a streamed run (§17.4) the stream's descriptor, and the plugin's directory first on
    PYTHONPATH."""
    report = {"GOVERNOR_REPORT_DIR": REPORT} if definition.get("report") else {}
    if definition.get("report") and not definition.get("pluginAutoload"):
        report["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    if definition.get("heldout"):
        report[HELDOUT_VARIABLE] = HELDOUT
    env = {**FIXED_ENV, **report, **definition["env"]}
    if stream_fd is not None:
        env[STREAM_FD_VARIABLE] = str(stream_fd)
        env["PYTHONPATH"] = ":".join([STREAM_PLUGIN, *filter(None, [env.get("PYTHONPATH")])])
    return env


def bwrap_argv(definition: Mapping[str, Any], workspace: str, *, bwrap: str = BWRAP,
               status_fd: int | None = None, gate_fd: int | None = None,
               report: str | None = None, plugin: StreamPlugin | None = None,
               heldout: str | None = None) -> list[str]:
    argv = [bwrap, "--unshare-all", "--unshare-user",
            "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID), "--disable-userns",
            "--die-with-parent", "--as-pid-1", "--new-session", "--hostname", "sandbox",
            "--cap-drop", "ALL", "--clearenv"]
    if definition.get("network") == "host":  # an outcome probe the operator let out (§15.1)
        argv.insert(argv.index("--unshare-user") + 1, "--share-net")
    for name, value in sorted(sandbox_env(definition, plugin.fd if plugin else None).items()):
        argv += ["--setenv", name, value]
    for mount in sandbox_mounts(definition, workspace, report,
                                plugin.directory if plugin else None, heldout):
        argv += _mount_argv(mount)
    argv += ["--chdir", WORKSPACE]
    if status_fd is not None:
        argv += ["--json-status-fd", str(status_fd)]
    if gate_fd is not None:
        argv += ["--seccomp", str(gate_fd)]
    command = plugin_argv(definition["argv"], plugin.module) if plugin else None
    return [*argv, "--", *(command or definition["argv"])]


class _View:
    """The sandbox's file tree as the host sees it, to find the command before anything runs."""

    def __init__(self, definition: Mapping[str, Any], workspace: str) -> None:
        mounts = sandbox_mounts(definition, workspace)
        self.mounts = {m.target: m.source for m in mounts if m.kind in ("ro-bind", "bind")}
        self.links = {m.target: m.source for m in mounts if m.kind == "symlink"}
        # Fresh and empty (/tmp) or not files at all (/proc, /dev): nothing to run there.
        self.opaque = ("/proc", "/dev", SANDBOX_TMP)

    def host_path(self, path: str) -> str | None:
        # An opaque place hides the host below it, except where something is mounted on top
        # (an operator environment directory under /tmp, say).
        opaque = max((o for o in self.opaque if path == o or path.startswith(o + "/")),
                     key=len, default="")
        for point in sorted(self.mounts, key=len, reverse=True):
            if path == point or path.startswith(point.rstrip("/") + "/"):
                if len(point) <= len(opaque):
                    return None
                rest = path[len(point):].lstrip("/")
                return posixpath.join(self.mounts[point], rest) if rest else self.mounts[point]
        return None

    def _is_made_up_directory(self, path: str) -> bool:
        """/ and /etc exist inside only because something is mounted below them."""
        prefix = path.rstrip("/") + "/"
        return any(p.startswith(prefix) for p in [*self.mounts, *self.links])

    def resolve(self, path: str) -> str | None:
        """The host path of what the sandbox sees at absolute `path`, following symlinks the
        way the sandbox would (absolute targets stay inside it); None when nothing is there."""
        pending = [part for part in reversed(path.split("/")) if part]
        current, hops = "/", 0
        while pending:
            name = pending.pop()
            if name in (".", ".."):
                current = posixpath.dirname(current) if name == ".." else current
                continue
            candidate = posixpath.join(current, name)
            target = self.links.get(candidate)
            if target is None and candidate not in self.mounts:
                host = self.host_path(candidate)
                if host is None:
                    if not self._is_made_up_directory(candidate):
                        return None
                else:
                    try:
                        if stat.S_ISLNK(os.lstat(host).st_mode):
                            target = os.readlink(host)
                    except OSError:
                        return None
            if target is None:
                current = candidate
                continue
            hops += 1
            if hops > MAX_SYMLINK_HOPS:
                return None
            if target.startswith("/"):
                current = "/"
            pending += [part for part in reversed(target.split("/")) if part]
        return self.host_path(current)


def _command_problem(definition: Mapping[str, Any], workspace: str, who: _Identity) -> str | None:
    """Why the command could not be executed inside, as execvp would decide it, or None."""
    command = definition["argv"][0]
    view = _View(definition, workspace)
    search_path = sandbox_env(definition).get("PATH", "")
    if "/" in command:
        candidates = [command]
    else:
        candidates = [posixpath.join(WORKSPACE, directory, command)
                      for directory in search_path.split(":")]
    refused = None
    for candidate in candidates:
        host = view.resolve(candidate)
        if host is None:
            continue
        try:
            info = os.stat(host)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and _allows(info, who, EXECUTE):
            return None
        refused = refused or candidate
    if refused:
        return f"{refused} is not an executable file for the sandbox user"
    if "/" in command:
        return f"{command} does not exist in the sandbox"
    return f"{command!r} is not on the sandbox PATH ({search_path})"


_WORKING_BWRAPS: set[tuple[str, int, int]] = set()


def _bwrap_problem(bwrap: str, who: _Identity) -> str | None:
    try:
        info = os.stat(bwrap)
    except OSError as exc:
        return f"bubblewrap is not available at {bwrap} ({exc.strerror})"
    if not stat.S_ISREG(info.st_mode) or not _allows(info, who, EXECUTE):
        return f"{bwrap} is not an executable file for the sandbox user {who.uid}"
    key = (bwrap, info.st_ino, info.st_mtime_ns)
    if key in _WORKING_BWRAPS:
        return None
    try:
        answer = subprocess.run([bwrap, "--version"], capture_output=True, timeout=10,  # noqa: S603
                                env={}, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{bwrap} does not run ({exc})"
    if answer.returncode != 0 or not answer.stdout.startswith(b"bubblewrap"):
        return f"{bwrap} --version did not answer as bubblewrap does"
    _WORKING_BWRAPS.add(key)
    return None


def _setup_problem(definition: Mapping[str, Any], workspace: str, bound: str, bwrap: str,
                   who: _Identity) -> tuple[str, str] | None:
    """(failure kind, why) when the sandbox could not run the command, checked before anything
    starts; None when it can. `bound` is the workspace directory as opened (/proc/self/fd/N),
    `workspace` only names it."""
    if problem := _bwrap_problem(bwrap, who):
        return "infrastructure", problem
    if who.switch_from_root:
        try:
            binds = range(len(definition.get("readOnlyBinds", [])))
            for point in (STAGED_WORKSPACE, STAGED_ROOTFS, STAGED_CHANGES, STAGED_REPORT,
                          STAGED_STREAM, STAGED_HELDOUT, STAGED_BINDS,
                          *(f"{STAGED_BINDS}/{i}" for i in binds)):
                os.makedirs(point, exist_ok=True)
                os.chmod(point, 0o755)  # noqa: S103 - an empty mount point the sandbox user passes
        except OSError as exc:
            return "infrastructure", f"cannot prepare {STAGING}: {exc.strerror}"
    for source, _ in definition.get("readOnlyBinds", []):
        # A root worker binds it as root first (staged), so a directory private to root (an
        # `outcome-data/` of a checkout under /root) serves; any other worker's bubblewrap
        # binds it as the worker's user, who must read it.
        if not who.switch_from_root:
            if problem := _directory_problem(os.path.realpath(source), who, READ | SEARCH,
                                             "the read-only directory", source):
                return "infrastructure", problem
        elif not os.path.isdir(source):
            return "infrastructure", f"the read-only directory {source} is not available"
    wanted = READ | SEARCH | (WRITE if definition["sandboxMode"] == "workspace-write" else 0)
    if problem := _directory_problem(bound, who, wanted, "workspace", workspace):
        return "infrastructure", problem
    operator = operator_sources(definition)
    if who.switch_from_root:
        try:
            for index in range(len(operator)):
                os.makedirs(f"{STAGED_ENVIRONMENT}{index}", exist_ok=True)
                os.chmod(f"{STAGED_ENVIRONMENT}{index}", 0o755)  # noqa: S103 - a mount point
        except OSError as exc:
            return "infrastructure", f"cannot prepare {STAGING}: {exc.strerror}"
    for path, source in operator.items():
        if problem := _directory_problem(source, who, READ | SEARCH,
                                         "the operator environment directory", path):
            return "infrastructure", problem
    if rootfs := definition.get("rootfs"):
        rootfs = os.path.realpath(rootfs)
        if problem := _directory_problem(rootfs, who, READ | SEARCH, "rootfs"):
            return "infrastructure", problem
        for point in (*ROOTFS_MOUNT_POINTS, *([REPORT] if definition.get("report") else []),
                      *([STREAM_PLUGIN] if streams(definition) else []),
                      *([HELDOUT] if definition.get("heldout") else []), *operator):
            if not os.path.isdir(rootfs + point):
                return "infrastructure", f"rootfs {rootfs} has no {point} directory to mount on"
    if problem := _command_problem(definition, bound, who):
        return "configuration", problem
    return None


# --- running ---------------------------------------------------------------------------------


def _child_setup(limits: Mapping[str, int], who: _Identity, staged: list[tuple[str, str]],
                 workspace: tuple[str, str], write_bytes: int | None, parent_pid: int,
                 cgroup: RunCgroup | None) -> Callable[[], None]:
    """What the child does between fork and exec of bubblewrap (which sets no rlimits):
    join the run's cgroup, set the limits and, for a root worker, stage the workspace (path,
    identity; as an overlay of at most `write_bytes` of changes when given) and the `staged`
    (source, target) binds in a mount namespace of its own."""
    rlimits = [(resource.RLIMIT_NPROC, limits["pids"]),
               (resource.RLIMIT_FSIZE, limits["fileBytes"]),
               (resource.RLIMIT_CPU, limits["cpuSeconds"])]
    open_files = limits["openFiles"]
    address_space = limits["memoryBytes"]
    binds = [(source.encode(), target.encode()) for source, target in staged]
    kill = int(signal.SIGKILL)

    def setup() -> None:
        # The cgroup first, while still root: everything of the run is counted in it.
        if cgroup is not None:
            cgroup.join()
        # Limits next: only root may raise a hard limit.
        for which, value in rlimits:
            resource.setrlimit(which, (value, value))
        if who.switch_from_root:
            # bubblewrap, started as the sandbox user, could not pass a directory private to
            # root on the way to the workspace; so root binds it onto a fixed mount point first,
            # in a mount namespace of this child alone. The workspace is opened here, in that
            # namespace (a descriptor opened outside it cannot be bound), component by component
            # without following a link, checked, and bound by its descriptor.
            checked(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
            checked(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "private /")
            directory = open_bound_directory(*workspace)
            if write_bytes is None:
                source = f"/proc/self/fd/{directory}".encode()
                checked(_libc.mount(source, STAGED_WORKSPACE.encode(), None, MS_BIND | MS_REC,
                                    None), "bind")
            else:
                mount_overlay(directory, STAGED_CHANGES, STAGED_WORKSPACE, write_bytes)
            os.close(directory)
            for source, target in binds:
                checked(_libc.mount(source, target, None, MS_BIND | MS_REC, None), "bind")
        # Open files after staging, which opens descriptors while the child still holds every
        # descriptor of the worker (they are closed just before exec), and while still root,
        # which may raise the hard limit.
        resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))
        if who.switch_from_root:
            os.setgroups([])
            os.setresgid(who.gid, who.gid, who.gid)
            os.setresuid(who.uid, who.uid, who.uid)
        # If the worker dies, bubblewrap dies, and with it (--die-with-parent) the sandbox.
        # Set after the uid change, which clears it.
        _libc.prctl(PR_SET_PDEATHSIG, kill, 0, 0, 0)
        if os.getppid() != parent_pid:
            os._exit(1)
        # Last: a large worker's forked child may already use more address space than allowed.
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    return setup


class _Status:
    """What bubblewrap writes on --json-status-fd: "child-pid" and "pid-namespace" of the
    sandbox's pid 1 (the command) as soon as it exists, "exit-code" only once a command that
    was started has ended."""

    def __init__(self) -> None:
        self.text = bytearray()

    def feed(self, chunk: bytes) -> None:
        self.text += chunk

    def fields(self) -> dict[str, Any]:
        decoder, rest = json.JSONDecoder(), self.text.decode("utf-8", errors="replace").strip()
        fields: dict[str, Any] = {}
        while rest:
            try:
                document, end = decoder.raw_decode(rest)
            except ValueError:
                break
            if isinstance(document, dict):
                fields.update(document)
            rest = rest[end:].lstrip()
        return fields


def _collect(sinks: Sequence[tuple[IO[bytes], Callable[[bytes], None]]], bwrap_exit: int,
             deadline: float, feeder: _Feeder | None = None) -> bool:
    """Read every pipe to end of file and wait until bubblewrap has exited (its pidfd is
    readable; it stays unreaped); False if `deadline` came first. Reads never pause, so a
    flood neither blocks the command nor grows memory beyond what the sinks keep. `feeder`
    writes the command's stdin meanwhile, as it reads."""
    with selectors.DefaultSelector() as selector:
        for pipe, feed in sinks:
            if not pipe.closed:
                selector.register(pipe, selectors.EVENT_READ, (pipe, feed))
        selector.register(bwrap_exit, selectors.EVENT_READ, None)
        if feeder is not None and not feeder.pipe.closed:
            selector.register(feeder.pipe, selectors.EVENT_WRITE, feeder)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            for key, _events in selector.select(remaining):
                if key.data is None:
                    selector.unregister(bwrap_exit)
                    continue
                if isinstance(key.data, _Feeder):
                    if not key.data.feed():
                        selector.unregister(key.fileobj)
                    continue
                pipe, feed = key.data
                if chunk := os.read(key.fd, READ_CHUNK):
                    feed(chunk)
                else:
                    selector.unregister(pipe)
                    pipe.close()
    return True


def _kill_command(status: Mapping[str, Any]) -> bool:
    """SIGKILL the sandbox's pid 1, the command: that ends every process of its PID namespace,
    whatever session or group they moved to, and bubblewrap then reaps it and exits. False when
    there was nothing to kill or it could not be reached."""
    pid, namespace = status.get("child-pid"), status.get("pid-namespace")
    if type(pid) is not int or type(namespace) is not int:
        return False
    try:
        command = os.pidfd_open(pid)
    except OSError:
        return False
    try:
        # Opened first, checked second: if the pid still lives in the sandbox's namespace now,
        # the descriptor is the command and not a process that reused a reaped pid.
        if os.stat(f"/proc/{pid}/ns/pid").st_ino != namespace:
            return False
        signal.pidfd_send_signal(command, signal.SIGKILL)
        return True
    except OSError:
        return False
    finally:
        os.close(command)


def _kill_bwrap(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL bubblewrap's process group; --die-with-parent takes the sandbox with it. Only
    called while bubblewrap is unreaped, so the group id cannot belong to anything else."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def _await_child_pid(status_pipe: IO[bytes], status: _Status, bwrap_exit: int,
                     deadline: float) -> None:
    """Read bubblewrap's status until it names the sandbox's process (or ends, or `deadline`)."""
    with selectors.DefaultSelector() as selector:
        selector.register(status_pipe, selectors.EVENT_READ)
        selector.register(bwrap_exit, selectors.EVENT_READ)
        while "child-pid" not in status.fields():
            remaining = deadline - time.monotonic()
            events = selector.select(remaining) if remaining > 0 else []
            if not events or any(key.fd == bwrap_exit for key, _ in events):
                return
            chunk = os.read(status_pipe.fileno(), READ_CHUNK)
            if not chunk:
                status_pipe.close()
                return
            status.feed(chunk)


def _identity_of(info: os.stat_result) -> str:
    return f"{info.st_dev}:{info.st_ino}"


def _workspace_problem(status: Mapping[str, Any], recorded: str, deadline: float) -> str | None:
    """Why the directory the started sandbox has at /workspace is not the session's bound
    directory, or None when it is. This checks the outcome, whatever was resolved on the way:
    the sandbox's process waits at the gate with every mount made, and its /workspace is looked
    up through its own root, a mount tree nobody outside can change. Ready means its root is no
    longer the host's (bubblewrap pivoted) and /workspace exists there (the second pivot, after
    every bind, is done)."""
    pid, namespace = status.get("child-pid"), status.get("pid-namespace")
    if type(pid) is not int or type(namespace) is not int:
        return "bubblewrap did not report the sandbox's process"
    try:
        process = os.pidfd_open(pid)
    except OSError:
        return "the sandbox ended before its workspace could be checked"
    try:
        host_root = os.stat("/")
        with selectors.DefaultSelector() as selector:
            selector.register(process, selectors.EVENT_READ)
            while True:
                try:
                    # The pid still names the sandbox's process while `process` has not exited.
                    if os.stat(f"/proc/{pid}/ns/pid").st_ino != namespace:
                        return "the sandbox's process could not be found"
                    root = os.stat(f"/proc/{pid}/root")
                    bound = None
                    if (root.st_dev, root.st_ino) != (host_root.st_dev, host_root.st_ino):
                        bound = os.stat(f"/proc/{pid}/root{WORKSPACE}")
                except FileNotFoundError:
                    bound = None
                except OSError as exc:
                    return f"the sandbox's {WORKSPACE} could not be checked ({exc.strerror})"
                if selector.select(0):
                    return "the sandbox ended before its workspace could be checked"
                if bound is not None:
                    if _identity_of(bound) == recorded:
                        return None
                    return (f"the directory mounted at {WORKSPACE} is not the session's bound "
                            f"workspace: it was replaced while the run started; the command "
                            f"did not run")
                if time.monotonic() > deadline:
                    return "the sandbox was not ready before the timeout"
                time.sleep(GATE_POLL_SECONDS)
    finally:
        os.close(process)


def _not_started(definition: Mapping[str, Any], kind: str, detail: str) -> SandboxResult:
    cap = definition["limits"]["outputBytes"]
    return SandboxResult(passed=False, failure_kind=kind, exit_code=None, signal=None,
                         duration_ms=0, stdout=_Capture("stdout", cap).result(),
                         stderr=_Capture("stderr", cap).result(),
                         sandbox_mode=definition["sandboxMode"], detail=detail)


_CGROUPS_MISSING: set[str] = set()  # why, once said


def _cgroup_for(limits: Mapping[str, int]) -> RunCgroup | None:
    """The run's cgroup, or None (said once per reason) where none can be made."""
    try:
        return run_cgroup(memory_bytes=limits["memoryBytes"], pids=limits["pids"])
    except CgroupsUnavailable as exc:
        if str(exc) not in _CGROUPS_MISSING:
            _CGROUPS_MISSING.add(str(exc))
            log.warning("runs get no cgroup, so their memory and processes are limited per "
                        "process only (rlimits), not in total: %s", exc)
        return None


def worker_shortfalls(euid: int | None = None) -> list[str]:
    """What runs on this worker will lack, said once when the worker starts
    (`verification/apps.py`; docs/deployment.md, "Root or not")."""
    missing = []
    if (os.geteuid() if euid is None else euid) != 0:
        missing.append("this worker is not root: its runs start as the worker's own user (not "
                       "nobody), and workspace-write runs write the workspace directly, with no "
                       "total write cap and even when they fail (no overlay)")
    try:
        run_cgroup(memory_bytes=1 << 30, pids=64).remove()
    except CgroupsUnavailable as exc:
        missing.append(f"runs get no cgroup, so their memory and processes are limited per "
                       f"process only (rlimits), not in total: {exc}")
    return missing


def run_sandboxed(definition: Mapping[str, Any], workspace: str, identity: str, *,
                  on_start: Callable[[int], None] | None = None, bwrap: str = BWRAP,
                  run_as: tuple[int, int] = NOBODY,
                  write_bytes: int = DEFAULT_WRITE_BYTES,
                  directory: int | None = None, report: str | None = None,
                  heldout: str | None = None, stdin: bytes | None = None,
                  keep_stdout: int | None = None) -> SandboxResult:
    """Run a profile definition's command in the sandbox over the session's workspace (its
    canonical path and recorded identity, see governor.domain.workspace) and report how it
    ended. Nothing starts unless bubblewrap, the workspace, the rootfs and the command are all
    usable; otherwise the result is an `infrastructure` or `configuration` failure. The command
    starts only once the directory mounted at /workspace is checked to be the bound one.
    Returns only when no process of the sandbox is left.
    `on_start(pid)` is called once bubblewrap runs (keep it quick: the timeout is running).
    `run_as` is the host identity used when the worker is root. `write_bytes` bounds what a
    `workspace-write` run may write, and its changes reach the workspace only when it passes
    (verification/overlay.py; a root worker only). `directory`, when given, is the workspace
    already opened by `open_bound_directory` (the one the caller hashes the tree through).
    `report`: a report profile's empty directory, writable by the sandbox user, bound at
    /governor-report; when the profile runs pytest itself, the run also streams its results
    (rules §17.4) and the result carries the stream. `heldout`: a held-out suite's files (a
    directory readable by the sandbox user), bound read-only at /governor-heldout (rules §18.2).
    `stdin`: what the command reads on its standard input (an oracle run's cases, rules §18.3;
    otherwise it reads nothing), fed as it reads; `keep_stdout`: keep that many bytes of stdout
    from its start (and one more if more came) as the result's `output`."""
    who = _identity(run_as)
    extra = _Extra(heldout, stdin, keep_stdout)
    try:
        bound = (os.dup(directory) if directory is not None
                 else open_bound_directory(workspace, identity))
    except WorkspaceError as exc:
        return _not_started(definition, "infrastructure", str(exc))
    try:
        if not (report and streams(definition)):
            return _run_bound(definition, workspace, identity, bound, on_start, bwrap, who,
                              write_bytes, report, None, extra)
        try:
            plugin = plugin_copy()
        except OSError as exc:
            return _not_started(definition, "infrastructure",
                                f"the report stream's plugin could not be copied: {exc}")
        try:
            return _run_bound(definition, workspace, identity, bound, on_start, bwrap, who,
                              write_bytes, report, plugin, extra)
        finally:
            shutil.rmtree(plugin[0], ignore_errors=True)
    finally:
        os.close(bound)


def _write_cap(definition: Mapping[str, Any], who: _Identity, write_bytes: int) -> int | None:
    """The cap on what this run may write, or None when it writes no workspace or cannot be
    capped (said once)."""
    if definition["sandboxMode"] != "workspace-write":
        return None
    if who.switch_from_root:
        return write_bytes
    if "overlay" not in _CGROUPS_MISSING:
        _CGROUPS_MISSING.add("overlay")
        log.warning("the worker is not root: workspace-write runs write the workspace "
                    "directly, with no total write cap and even when they fail")
    return None


@dataclass(frozen=True)
class _Extra:
    """What a held-out or oracle run adds (rules §18): the suite's files to mount, what the
    command reads on stdin, how much of stdout to keep whole."""

    heldout: str | None = None
    stdin: bytes | None = None
    keep_stdout: int | None = None


class _Feeder:
    """Writes `data` to the command's stdin as fast as it reads, never blocking the worker;
    closes it when all is written, or when the command stopped reading."""

    def __init__(self, pipe: IO[bytes], data: bytes) -> None:
        self.pipe = pipe
        self.data = memoryview(data)
        os.set_blocking(pipe.fileno(), False)
        if not data:
            pipe.close()

    def feed(self) -> bool:
        """Write what the pipe takes now; False once done (the pipe is then closed)."""
        try:
            written = os.write(self.pipe.fileno(), self.data[:READ_CHUNK])
        except BlockingIOError:
            return True
        except OSError:  # the command closed its stdin (EPIPE): it reads no more
            written = len(self.data)
        self.data = self.data[written:]
        if not self.data:
            self.pipe.close()
            return False
        return True


def _run_bound(definition: Mapping[str, Any], workspace: str, identity: str, bound: int,
               on_start: Callable[[int], None] | None, bwrap: str, who: _Identity,
               write_bytes: int, report: str | None,
               plugin: tuple[str, str] | None, extra: _Extra) -> SandboxResult:
    bound_path = f"/proc/self/fd/{bound}"
    if problem := _setup_problem(definition, workspace, bound_path, bwrap, who):
        return _not_started(definition, *problem)

    staged: list[tuple[str, str]] = []
    sandbox_definition = definition
    # bubblewrap 0.8 resolves a bind source to a path again, so the descriptor is only a
    # first line; the gate checks what was really mounted.
    sandbox_workspace = bound_path
    if who.switch_from_root:
        sandbox_workspace = STAGED_WORKSPACE  # staged from the descriptor by `_child_setup`
        if rootfs := definition.get("rootfs"):
            staged.append((os.path.realpath(rootfs), STAGED_ROOTFS))
            sandbox_definition = {**definition, "rootfs": STAGED_ROOTFS}
        if operator := operator_sources(definition):
            moved = {path: f"{STAGED_ENVIRONMENT}{index}"
                     for index, path in enumerate(operator)}
            staged += [(operator[path], target) for path, target in moved.items()]
            sandbox_definition = {**sandbox_definition, "stagedEnvironment": moved}
        if report:
            staged.append((report, STAGED_REPORT))
        if plugin:
            staged.append((plugin[0], STAGED_STREAM))
        if binds := definition.get("readOnlyBinds", []):
            # Like the rootfs: bubblewrap, as the sandbox user, could not pass a directory
            # private to root on the way to an operator's data directory.
            staged += [(os.path.realpath(source), f"{STAGED_BINDS}/{index}")
                       for index, (source, _) in enumerate(binds)]
            sandbox_definition = {**sandbox_definition, "readOnlyBinds": [
                [f"{STAGED_BINDS}/{index}", target] for index, (_, target) in enumerate(binds)]}
        if extra.heldout:
            staged.append((extra.heldout, STAGED_HELDOUT))
    sandbox_heldout = ((STAGED_HELDOUT if who.switch_from_root else extra.heldout)
                       if extra.heldout else None)
    sandbox_report = (STAGED_REPORT if who.switch_from_root else report) if report else None
    limits = definition["limits"]
    stdout_capture = _Capture("stdout", limits["outputBytes"])
    stderr_capture = _Capture("stderr", limits["outputBytes"])
    status = _Status()
    status_read, status_write = os.pipe()
    gate_read, gate_write = os.pipe()
    stream_read, stream_write = os.pipe() if plugin else (-1, -1)
    stream_kept = _Kept(MAX_STREAM_BYTES)
    output_kept = _Kept(extra.keep_stdout) if extra.keep_stdout is not None else None
    sandbox_plugin = (StreamPlugin(STAGED_STREAM if who.switch_from_root else plugin[0],
                                   plugin[1], stream_write) if plugin else None)
    cgroup = _cgroup_for(limits)
    cap = _write_cap(definition, who, write_bytes)
    started = time.monotonic()
    deadline = started + definition["timeoutMs"] / 1000
    try:
        process = subprocess.Popen(  # noqa: S603 - a fixed argv, never a shell
            bwrap_argv(sandbox_definition, sandbox_workspace, bwrap=bwrap,
                       status_fd=status_write, gate_fd=gate_read, report=sandbox_report,
                       plugin=sandbox_plugin, heldout=sandbox_heldout),
            stdin=subprocess.DEVNULL if extra.stdin is None else subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={}, cwd="/", close_fds=True,
            pass_fds=(status_write, gate_read, bound, *([stream_write] if plugin else [])),
            start_new_session=True,
            preexec_fn=_child_setup(limits, who, staged, (workspace, identity), cap,
                                    os.getpid(), cgroup),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        os.close(status_read)
        os.close(gate_write)
        if plugin:
            os.close(stream_read)
        if cgroup is not None:
            cgroup.remove()
        if isinstance(exc, OSError) and exc.errno == errno.EAGAIN:
            why = (f"the sandbox user {who.uid} already runs as many processes as the pids "
                   f"limit ({limits['pids']}) allows")
        else:
            why = (f"bubblewrap could not be started as uid {who.uid}: {exc} (joining the "
                   f"run's cgroup, setting rlimits, staging the bound workspace or switching "
                   f"user failed)")
        return _not_started(definition, "infrastructure", why)
    finally:
        os.close(status_write)
        os.close(gate_read)
        if plugin:
            os.close(stream_write)  # the sandbox holds the only write end: its end is EOF

    assert process.stdout is not None and process.stderr is not None
    status_pipe = os.fdopen(status_read, "rb", buffering=0)
    stdout_feed = stdout_capture.feed
    if output_kept is not None:
        def stdout_feed(chunk: bytes) -> None:
            stdout_capture.feed(chunk)
            output_kept.feed(chunk)
    sinks = [(process.stdout, stdout_feed), (process.stderr, stderr_capture.feed),
             (status_pipe, status.feed)]
    if plugin:
        sinks.append((os.fdopen(stream_read, "rb", buffering=0), stream_kept.feed))
    feeder = (_Feeder(process.stdin, extra.stdin)
              if process.stdin is not None and extra.stdin is not None else None)
    bwrap_exit = upper = -1
    refused = None
    try:
        bwrap_exit = os.pidfd_open(process.pid)
        expected: str | None = identity
        if cap is not None:
            # The overlay lives in bubblewrap's mount namespace (staged by `_child_setup`): the
            # sandbox must see it at /workspace, and its upper layer is kept open to apply.
            staged_root = f"/proc/{process.pid}/root"
            try:
                upper = os.open(f"{staged_root}{STAGED_CHANGES}/upper", DIRECTORY)
                expected = _identity_of(os.stat(f"{staged_root}{STAGED_WORKSPACE}"))
            except OSError:
                expected = None  # bubblewrap has already ended; nothing may start anyway
        if on_start is not None:
            on_start(process.pid)
        _await_child_pid(status_pipe, status, bwrap_exit, deadline)
        if "child-pid" in status.fields():
            refused = ("the run's private overlay could not be reached" if expected is None
                       else _workspace_problem(status.fields(), expected, deadline))
            if refused is None:
                os.write(gate_write, ALLOW_EVERYTHING)
            else:
                _kill_command(status.fields())
        os.close(gate_write)  # unless the program was written, bubblewrap stops at the gate
        gate_write = -1
        finished = _collect(sinks, bwrap_exit, deadline, feeder)
        if not finished:
            if not _kill_command(status.fields()):
                _kill_bwrap(process)
            _collect(sinks, bwrap_exit, time.monotonic() + KILL_GRACE_SECONDS)
        duration_ms = round((time.monotonic() - started) * 1000)
    except BaseException:
        if upper >= 0:
            os.close(upper)
        raise
    finally:
        if gate_write >= 0:
            os.close(gate_write)
        if process.poll() is None:
            _kill_command(status.fields())
            _kill_bwrap(process)
        process.wait()
        if bwrap_exit >= 0:
            os.close(bwrap_exit)
        for pipe, _feed in sinks:
            pipe.close()
        if process.stdin is not None:
            process.stdin.close()
        if cgroup is not None:
            cgroup.remove()

    result = _ended(definition, status.fields(), refused, finished, duration_ms,
                      stdout_capture.result(), stderr_capture.result(), process.returncode)
    if plugin:
        result = replace(result, stream=bytes(stream_kept.data))
    if output_kept is not None:
        result = replace(result, output=bytes(output_kept.data))
    if upper < 0:
        return result
    try:
        return _applied(result, upper, workspace, identity) if result.passed else result
    finally:
        os.close(upper)


def _applied(result: SandboxResult, upper: int, workspace: str, identity: str) -> SandboxResult:
    """A passed workspace-write run, once its changes are applied to the bound workspace."""
    try:
        target = open_bound_directory(workspace, identity)
        try:
            apply_changes(upper, target)
        finally:
            os.close(target)
    except (OSError, WorkspaceError) as exc:
        return replace(
            result, passed=False, failure_kind="infrastructure",
            detail=f"the command passed but its changes could not all be applied to the "
                   f"workspace: {exc}")
    return result


def _ended(definition: Mapping[str, Any], status: Mapping[str, Any], refused: str | None,
           finished: bool, duration_ms: int, stdout: StreamResult, stderr: StreamResult,
           returncode: int) -> SandboxResult:
    """How the run ended, from what bubblewrap reported, as governor.domain.verification
    decides it."""
    exit_status = status.get("exit-code")
    decided = outcome(Ended(refused=refused, finished=finished,
                            exit_status=exit_status if type(exit_status) is int else None,
                            bwrap_message=stderr.tail, bwrap_status=returncode,
                            timeout_ms=definition["timeoutMs"]))
    return SandboxResult(passed=decided.passed, failure_kind=decided.failure_kind,
                         exit_code=decided.exit_code, signal=decided.signal,
                         duration_ms=duration_ms, stdout=stdout, stderr=stderr,
                         sandbox_mode=definition["sandboxMode"], detail=decided.detail)

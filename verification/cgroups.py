"""A cgroup per verification run: the run's total memory and its total number of processes.

rlimits hold per process (`memoryBytes` is each process's address space), so twelve processes
of 256 MiB made 3 GiB. The run's cgroup caps the sum: `memoryBytes` is also the memory of the
whole run (no swap), `pids` the processes and threads of the whole run; the kernel OOM-kills
inside the run when its memory is exhausted and fork fails at its process limit.

Where: below the worker's own cgroup, in each hierarchy. cgroup v2 (a unified hierarchy at
/sys/fs/cgroup with cgroup.controllers) needs the memory and pids controllers enabled for the
worker's subtree, which the kernel refuses while the worker's own cgroup holds processes unless
it is the root: run the worker in a delegated cgroup of its own (systemd `Delegate=yes`) below
which it may create run cgroups. cgroup v1 needs the memory and pids hierarchies. The worker
creates the cgroup, the child that starts bubblewrap joins it before anything of the run
exists, and the worker removes it once no process of the run is left.

Without a writable hierarchy (a worker that is not root and has no delegated cgroup),
`run_cgroup` raises `CgroupsUnavailable` saying why; runs then have per-process rlimits only.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from dataclasses import dataclass

CGROUP_ROOT = "/sys/fs/cgroup"
V1_CONTROLLERS = ("memory", "pids")
REMOVE_TRIES = 50
REMOVE_PAUSE_SECONDS = 0.02


class CgroupsUnavailable(Exception):
    """No per-run cgroup can be made here; the message says why."""


@dataclass(frozen=True)
class RunCgroup:
    directories: tuple[str, ...]  # one per hierarchy

    def join(self) -> None:
        """Move the calling process into the run's cgroup (in the child, before bubblewrap)."""
        for directory in self.directories:
            fd = os.open(os.path.join(directory, "cgroup.procs"), os.O_WRONLY)
            try:
                os.write(fd, b"0")  # "0": the writing process
            finally:
                os.close(fd)

    def remove(self) -> None:
        """Remove the cgroup once its processes are gone (an exiting process may hold it a
        moment longer)."""
        for directory in self.directories:
            for _ in range(REMOVE_TRIES):
                try:
                    os.rmdir(directory)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(REMOVE_PAUSE_SECONDS)


def _own_cgroups() -> dict[str, str]:
    """The worker's cgroup path by controller name ("" for the v2 unified hierarchy)."""
    own: dict[str, str] = {}
    with open("/proc/self/cgroup", encoding="utf-8") as lines:
        for line in lines:
            _number, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                own[controller] = path
    return own


def _write(directory: str, name: str, value: str) -> None:
    with open(os.path.join(directory, name), "w", encoding="ascii") as handle:
        handle.write(value)


def _directories(name: str) -> list[tuple[str, str]]:
    """The run's cgroup directories, as (controller, directory); controller "" is v2's unified
    hierarchy."""
    own = _own_cgroups()
    if os.path.exists(os.path.join(CGROUP_ROOT, "cgroup.controllers")):
        parent = CGROUP_ROOT + own.get("", "/").rstrip("/")
        with open(os.path.join(parent, "cgroup.subtree_control"), encoding="ascii") as handle:
            enabled = handle.read().split()
        missing = [c for c in V1_CONTROLLERS if c not in enabled]
        if missing:
            try:
                _write(parent, "cgroup.subtree_control", " ".join(f"+{c}" for c in missing))
            except OSError as exc:
                raise CgroupsUnavailable(
                    f"cannot enable {', '.join(missing)} for the cgroups below {parent} "
                    f"({exc.strerror}; run the worker in a delegated cgroup of its own)") from None
        return [("", os.path.join(parent, name))]
    directories = []
    for controller in V1_CONTROLLERS:
        mount = os.path.join(CGROUP_ROOT, controller)
        if controller not in own or not os.path.isdir(mount):
            raise CgroupsUnavailable(f"no cgroup v1 {controller} hierarchy at {mount}")
        directories.append((controller, mount + own[controller].rstrip("/") + "/" + name))
    return directories


def run_cgroup(*, memory_bytes: int, pids: int) -> RunCgroup:
    """A new cgroup for one run, its limits set, nothing in it yet."""
    name = f"governor-run-{uuid.uuid4().hex}"
    try:
        directories = _directories(name)
    except OSError as exc:
        raise CgroupsUnavailable(f"cannot read the worker's cgroups ({exc})") from None
    made: list[str] = []
    try:
        for controller, directory in directories:
            os.mkdir(directory, 0o755)
            made.append(directory)
            if controller in ("", "memory"):
                v1 = controller == "memory"
                _write(directory, "memory.limit_in_bytes" if v1 else "memory.max",
                       str(memory_bytes))
                # Memory plus swap, or no swap at all; the file is absent without swap accounting.
                with contextlib.suppress(FileNotFoundError):
                    if v1:
                        _write(directory, "memory.memsw.limit_in_bytes", str(memory_bytes))
                    else:
                        _write(directory, "memory.swap.max", "0")
            if controller in ("", "pids"):
                _write(directory, "pids.max", str(pids))
    except OSError as exc:
        RunCgroup(tuple(made)).remove()
        where = os.path.dirname(str(exc.filename)) if exc.filename else "the worker's cgroups"
        raise CgroupsUnavailable(f"cannot make a cgroup below {where} ({exc.strerror})") from None
    return RunCgroup(tuple(directory for _controller, directory in directories))

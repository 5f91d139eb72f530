"""Where the machine's CPU time went while a benchmark ran (Linux /proc): the whole machine's busy
time, and the time of given process trees (a process and every descendant, with what its reaped
children used, so short-lived sandboxes count toward the worker that ran them)."""

from __future__ import annotations

import os
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def machine_busy() -> float:
    """CPU seconds all CPUs spent not idle since boot."""
    fields = [int(n) for n in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / TICK


def machine_cpus() -> int:
    return os.cpu_count() or 1


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None  # ended meanwhile


def process_table() -> dict[int, list[int]]:
    """Every living process's children, by parent pid, from one reading of /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            children.setdefault(int(stat[1]), []).append(int(entry.name))
    return children


def tree_seconds(root: int, children: dict[int, list[int]]) -> float:
    """CPU seconds of `root` and its living descendants (`children`: a `process_table()`), each
    with its reaped children's (utime, stime, cutime, cstime)."""
    total, pending = 0, [root]
    while pending:
        pid = pending.pop()
        if (stat := _stat(pid)) is not None:
            total += sum(int(n) for n in stat[11:15])
            pending += children.get(pid, [])
    return total / TICK


def trees_seconds(roots: dict[str, list[int]], children: dict[int, list[int]]) -> dict[str, float]:
    """`tree_seconds` summed per name."""
    return {name: sum(tree_seconds(root, children) for root in pids)
            for name, pids in roots.items()}


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""

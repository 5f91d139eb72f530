"""B14. The test suite's own time (docs/benchmarks.md).

`make test` in a fresh clone of the checkout's HEAD (committed work only), with the system
packages present: the clone sets up its own `.venv` as a newcomer's would, then runs ruff, mypy
and every pytest leg. Timed by the wall clock. pytest's per-test durations (`--durations=0`:
setup, call and teardown of every test) are summed per test module, over every leg that ran it,
for the ten slowest modules and the share of their time spent in fixtures (setup + teardown).
The whole output is kept in bench/results/b14-make-test.log. Takes as long as the suite.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.common import markdown_table, progress

NAME = "B14"
ROOT = Path(__file__).resolve().parent.parent
LOG = ROOT / "bench" / "results" / "b14-make-test.log"
GOAL_S = 15 * 60
DURATION = re.compile(r"^([\d.]+)s (setup|call|teardown) +([^:\s]+)::", re.MULTILINE)
LEG = re.compile(r"^=*\s*(\d+ (?:passed|failed|errors?|skipped|deselected)\b[^\n]*?) "
                 r"in ([\d.]+)s", re.MULTILINE)


def module_times(output: str) -> dict[str, dict[str, float]]:
    """Seconds in fixtures (setup and teardown) and in the tests themselves, per module, from
    pytest's `--durations=0` lines."""
    times: dict[str, dict[str, float]] = defaultdict(lambda: {"fixtures": 0.0, "calls": 0.0})
    for seconds, phase, module in DURATION.findall(output):
        times[module]["calls" if phase == "call" else "fixtures"] += float(seconds)
    return dict(times)


def legs(output: str) -> list[dict[str, Any]]:
    """Each pytest run's closing line: what it counted and its seconds."""
    return [{"summary": summary.strip(" ="), "seconds": float(seconds)}
            for summary, seconds in LEG.findall(output)]


def measure(source: Path, workdir: Path) -> dict[str, Any]:
    clone = workdir / "clone"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(source), str(clone)],
                   check=True)
    env = {**os.environ, "PYTEST_ADDOPTS": "--durations=0 --durations-min=0"}
    progress(f"B14: make test in {clone} (output in {LOG.relative_to(ROOT)})")
    LOG.parent.mkdir(parents=True, exist_ok=True)
    with LOG.open("w") as log:
        started = time.monotonic()
        done = subprocess.run(["make", "test"], cwd=clone, env=env, stdout=log,
                              stderr=subprocess.STDOUT, check=False)
        wall = time.monotonic() - started
    output = LOG.read_text(errors="replace")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone,
                            capture_output=True, text=True, check=True).stdout.strip()
    modules = module_times(output)
    slowest_ten = sorted(modules, key=lambda name: -sum(modules[name].values()))[:10]
    return {"wall_s": round(wall, 1), "exit_status": done.returncode, "commit": commit,
            "legs": legs(output), "modules": {name: modules[name] for name in slowest_ten}}


def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="governor-b14-"))
    workdir.chmod(0o755)  # a test runs a worker as uid 65534 from the clone, as from any checkout
    try:
        return measure(ROOT, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def slowest(result: dict[str, Any], count: int = 10) -> list[tuple[str, float, float]]:
    """(module, total seconds, fixture share) of the `count` slowest modules."""
    rows = [(module, t["fixtures"] + t["calls"], t["fixtures"])
            for module, t in result["modules"].items()]
    rows.sort(key=lambda row: -row[1])
    return [(module, total, fixtures / total if total else 0.0)
            for module, total, fixtures in rows[:count]]


def table(result: dict[str, Any]) -> str:
    minutes, seconds = divmod(int(result["wall_s"]), 60)
    head = (f"`make test` from a fresh clone of {result['commit']}: **{minutes} min {seconds} s** "
            f"wall (goal ≤ {GOAL_S // 60} min), exit status {result['exit_status']}.\n\n")
    runs = markdown_table(["pytest run", "seconds"],
                          [[leg["summary"], f"{leg['seconds']:.0f}"] for leg in result["legs"]])
    modules = markdown_table(
        ["slowest test modules (all runs)", "seconds", "in fixtures"],
        [[f"`{module}`", f"{total:.0f}", f"{share:.0%}"]
         for module, total, share in slowest(result)])
    return head + runs + "\n\n" + modules


def gates(result: dict[str, Any]) -> list[str]:
    failed = []
    if result["exit_status"] != 0:
        failed.append(f"make test exited {result['exit_status']} (see {LOG.relative_to(ROOT)})")
    if result["wall_s"] > GOAL_S:
        failed.append(f"make test took {result['wall_s']:.0f} s (goal ≤ {GOAL_S} s)")
    return failed

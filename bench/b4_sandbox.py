"""B4. Sandbox start overhead (shared/BENCHMARKS.md).

`/bin/true` run bare (`subprocess.run`) and through `run_sandboxed` — the whole path a verifier
run takes: the checks before anything starts, bubblewrap with every namespace, rlimits, output
capture and hashing, teardown — the same number of runs each, in one process. The two arms take
turns run by run, so drift and other load hit both alike. Overhead = median(sandboxed) −
median(bare). Goal: ≤ 10 ms (a published `docker run --rm` start is about 350 ms).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from typing import Any

from bench.common import markdown_table, median, progress

NAME = "B4"
RUNS = 50
WARMUP = 5
GOAL_OVERHEAD_MS = 10.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--b4-runs", type=int, default=RUNS,
                        help=f"B4: runs of each arm (default {RUNS})")


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def run(args: argparse.Namespace) -> dict[str, Any]:
    from governor.domain.profiles import profile_definition, validate_profile
    from governor.domain.workspace import identity_at
    from verification.sandbox import run_sandboxed

    runs = getattr(args, "b4_runs", RUNS)
    definition = profile_definition(validate_profile(
        {"id": "bench-true", "description": "B4: /bin/true", "argv": ["/bin/true"]}))
    # The sandbox user must reach the workspace; mkdtemp makes it private to us.
    workspace = tempfile.mkdtemp(prefix="governor-b4-")
    os.chmod(workspace, 0o755)  # noqa: S103 - read-only for the sandbox user, by design

    def bare() -> float:
        start = time.perf_counter()
        subprocess.run(["/bin/true"], check=True)
        return (time.perf_counter() - start) * 1000

    def sandboxed() -> float:
        start = time.perf_counter()
        result = run_sandboxed(definition, workspace, identity_at(workspace))
        elapsed = (time.perf_counter() - start) * 1000
        if not result.passed:
            raise RuntimeError(f"/bin/true failed in the sandbox: {result.failure_kind} "
                               f"{result.detail}")
        return elapsed

    try:
        for _ in range(WARMUP):
            bare()
            sandboxed()
        times: dict[str, list[float]] = {"bare": [], "sandboxed": []}
        for index in range(runs):
            arms = (("bare", bare), ("sandboxed", sandboxed))
            for name, arm in arms if index % 2 == 0 else arms[::-1]:
                times[name].append(round(arm(), 3))
        progress(f"[B4] {runs} runs each: bare {median(times['bare']):.2f} ms, "
                 f"sandboxed {median(times['sandboxed']):.2f} ms (medians)")
    finally:
        shutil.rmtree(workspace)

    summary = {name: {"median_ms": round(median(values), 3),
                      "p95_ms": round(_percentile(values, 0.95), 3),
                      "min_ms": round(min(values), 3)}
               for name, values in times.items()}
    return {
        "params": {"runs": runs, "warmup": WARMUP, "command": "/bin/true",
                   "as_root": os.geteuid() == 0},
        "bare": summary["bare"],
        "sandboxed": summary["sandboxed"],
        "overhead_ms": round(summary["sandboxed"]["median_ms"] - summary["bare"]["median_ms"],
                             3),
        "times_ms": times,
    }


def table(result: dict[str, Any]) -> str:
    rows = [[arm, f"{result[arm]['median_ms']:.2f}", f"{result[arm]['p95_ms']:.2f}",
             f"{result[arm]['min_ms']:.2f}"] for arm in ("bare", "sandboxed")]
    rows.append(["overhead (median difference)", f"{result['overhead_ms']:.2f}", "", ""])
    p = result["params"]
    note = (f"`{p['command']}`, {p['runs']} runs per arm after {p['warmup']} warm-up runs, "
            f"arms alternating. Sandboxed = `run_sandboxed`: pre-checks, bubblewrap (all "
            f"namespaces, uid 65534, rlimits), output capture, teardown. Goal: overhead ≤ "
            f"{GOAL_OVERHEAD_MS:g} ms; a `docker run --rm` start is about 350 ms.")
    return markdown_table(["arm", "median ms", "p95 ms", "min ms"], rows) + "\n\n" + note


def gates(result: dict[str, Any]) -> list[str]:
    if result["overhead_ms"] > GOAL_OVERHEAD_MS:
        return [f"sandbox overhead {result['overhead_ms']:.2f} ms > {GOAL_OVERHEAD_MS:g} ms"]
    return []

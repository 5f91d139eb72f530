"""B4. Sandbox start overhead (docs/benchmarks.md).

`/bin/true` run bare (`subprocess.run`) and through `run_sandboxed` — the whole path a verifier
run takes: the checks before anything starts, bubblewrap with every namespace, rlimits, output
capture and hashing, teardown — the same number of runs each, in one process. The two arms take
turns run by run, so drift and other load hit both alike. Overhead = median(sandboxed) −
median(bare). Goal: ≤ 10 ms (a published `docker run --rm` start is about 350 ms).

Then what a run's private copy costs (rules §10.2: a run executes on a copy of exactly the
hashed tree, never on the agent's directory). For trees of 1k and 10k files (B7's realistic mix)
whose blobs the store keeps: `tree_materialised` — hard links from this machine's blob cache,
the copy hashed again and checked against the tree id, then removed — against stock git
writing the same tree from its index, `git checkout-index -a --prefix=…` into an empty
directory, then removed; the arms alternate, medians of `--repeats`. The first copy, with an
empty blob cache (every blob fetched from the store), is reported too. Goal: ≤ 2× git.

Both goals are gates. The copy's is a ratio to git measured in the same run. The start
overhead's is absolute: the design (docs/benchmarks.md) names 10 ms and no reference to
divide by, and what it bounds is the time the sandbox adds to every verifier run, which counts
in milliseconds, not as a multiple of starting `/bin/true` bare. So it stays a gate, and a
slower machine of this kind can miss it with nothing on the path changed. Both arms' medians
are reported beside the overhead.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.b7_tree_hash import Git, build_tree, default_dir
from bench.common import django_setup, isolated, markdown_table, median, progress

NAME = "B4"
RUNS = 50
WARMUP = 5
GOAL_OVERHEAD_MS = 10.0
COPY_SIZES = (1_000, 10_000)
GOAL_COPY_RATIO = 2.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--b4-runs", type=int, default=RUNS,
                        help=f"B4: runs of each arm (default {RUNS})")
    parser.add_argument("--b4-sizes", default=",".join(map(str, COPY_SIZES)),
                        help="B4: tree sizes (files) of the private-copy comparison")
    parser.add_argument("--b4-dir", default=default_dir(),
                        help="B4: where the trees of the private-copy comparison are made "
                             "(default /dev/shm when writable, as for B7)")


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = [int(size) for size in getattr(args, "b4_sizes", "").split(",") if size]
    return measure(getattr(args, "b4_runs", RUNS), sizes, max(1, getattr(args, "repeats", 5)),
                   getattr(args, "b4_dir", default_dir()))


def measure(runs: int, sizes: list[int], repeats: int, directory: str) -> dict[str, Any]:
    """The start overhead over `runs` runs an arm, then the private copy of trees of `sizes`
    files made under `directory`, `repeats` times an arm, in a fresh interpreter."""
    result = _start_overhead(runs)
    scratch = tempfile.mkdtemp(prefix="governor-b4-copy-", dir=directory)
    try:
        result["copies"] = isolated(_copies, sizes, repeats, scratch, env={
            "GOVERNOR_VAR_DIR": f"{scratch}/var",
            "DATABASE_URL": f"sqlite:///{scratch}/governor.sqlite3"})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return result


def _copies(sizes: list[int], repeats: int, scratch: str) -> dict[str, Any]:
    """In a fresh interpreter with its own var directory: the private-copy comparison."""
    django_setup()
    return {"repeats": repeats,
            "sizes": {str(files): _copy_size(files, repeats, Path(scratch) / f"tree-{files}")
                      for files in sizes}}


def _copy_size(files: int, repeats: int, base: Path) -> dict[str, Any]:
    from governor.domain.workspace import Workspace, identity_at
    from governor.models import Project, Session
    from governor.services.trees import session_tree, tree_materialised

    tree_root = base / "tree"
    tree_root.mkdir(parents=True)
    build_tree(tree_root, files)
    project = Project.objects.create(slug=f"b4-{files}", name="B4", workspace_roots=[str(base)])
    session = Session.objects.create(project=project, workspace_path=str(tree_root),
                                     workspace_identity=identity_at(str(tree_root)))
    with Workspace(str(tree_root), session.workspace_identity) as live:
        tree = session_tree(session, live)  # hashed, its blobs kept in the store
    record = project.trees.get(tree_id=tree.id)
    git = Git(tree_root, base / "git")
    git.cold()
    target = base / "checkout"

    def ours() -> float:
        start = time.perf_counter()
        with tree_materialised(session, record):
            pass
        return (time.perf_counter() - start) * 1000

    def stock_git() -> float:
        start = time.perf_counter()
        git.run("checkout-index", "-a", f"--prefix={target}/")
        shutil.rmtree(target)
        return (time.perf_counter() - start) * 1000

    try:
        first = ours()  # the blob cache is empty: every blob comes from the store
        times: dict[str, list[float]] = {"ours": [], "git": []}
        for index in range(repeats):
            arms = (("ours", ours), ("git", stock_git))
            for name, arm in arms if index % 2 == 0 else arms[::-1]:
                times[name].append(round(arm(), 2))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    row = {"files": tree.files, "bytes": tree.size, "first_ms": round(first, 2),
           "ours_ms": round(median(times["ours"]), 2), "git_ms": round(median(times["git"]), 2),
           "times_ms": times}
    row["ratio"] = round(row["ours_ms"] / row["git_ms"], 3)
    progress(f"[B4] private copy of {files:,} files: {row['ours_ms']:.0f} ms, git "
             f"checkout-index {row['git_ms']:.0f} ms ({row['ratio']:.2f}x); first, cold cache, "
             f"{row['first_ms']:.0f} ms")
    return row


def _start_overhead(runs: int) -> dict[str, Any]:
    from governor.domain.profiles import profile_definition, validate_profile
    from governor.domain.workspace import identity_at
    from verification.sandbox import run_sandboxed

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
    text = markdown_table(["arm", "median ms", "p95 ms", "min ms"], rows) + "\n\n" + note
    copies = result.get("copies")
    if copies:
        rows = [[f"{int(files):,}", f"{row['bytes'] / 1e6:.0f} MB", f"{row['ours_ms']:.0f}",
                 f"{row['git_ms']:.0f}", f"**{row['ratio']:.2f}×**", f"{row['first_ms']:.0f}"]
                for files, row in copies["sizes"].items()]
        text += "\n\n" + markdown_table(
            ["files", "size", "private copy ms", "git checkout-index ms", "ratio",
             "first copy (cold cache) ms"], rows) + "\n\n" + (
            f"A run's private copy of the tree (`tree_materialised`: hard links from the blob "
            f"cache, hashed again and checked, removed) against `git checkout-index -a` of the "
            f"same tree into an empty directory (then removed), medians of "
            f"{copies['repeats']}, arms alternating. Goal: ≤ {GOAL_COPY_RATIO:g}× git.")
    return text


def gates(result: dict[str, Any]) -> list[str]:
    failed = []
    if result["overhead_ms"] > GOAL_OVERHEAD_MS:
        failed.append(f"sandbox overhead {result['overhead_ms']:.2f} ms > "
                      f"{GOAL_OVERHEAD_MS:g} ms")
    for files, row in result.get("copies", {}).get("sizes", {}).items():
        if row["ratio"] > GOAL_COPY_RATIO:
            failed.append(f"a private copy of {files} files takes {row['ratio']:.2f}x git "
                          f"checkout-index (> {GOAL_COPY_RATIO:g}x)")
    return failed

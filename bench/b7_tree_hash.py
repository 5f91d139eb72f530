"""B7. Workspace tree hash (docs/benchmarks.md, rules §10).

Trees of 1k, 10k and 50k files (about 4 kB a file on average, so ≈ 200 MB at 50k), built in a
temporary directory with a fixed seed: source-like text files of 0–6 kB in directories of ten
files, up to four deep, a few empty and executable files, a few symlinks, and one file in a
thousand a binary of 0.5–2 MB (a third of the bytes). Each size is measured on the same
tree, arms taking turns:

- cold: `hash_tree` with an empty stat cache, against stock git with a fresh repository and
  index (`git init --object-format=sha256`, the attributes line of rules §10.1,
  `git add -A -f`, `git write-tree`; the git directory lives outside the tree so both arms read
  the same files from the same page cache);
- warm: one source file rewritten, then `hash_tree` with the cache of the previous hash against
  `git add -A -f` + `git write-tree` on the index of the previous add.

Every id is compared with git's. Nothing is left on disk.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import markdown_table, median, progress

NAME = "B7"
SIZES = (1_000, 10_000, 50_000)
COLD_GOAL = 2.0  # governor cold / git cold
WARM_GOAL = 1.5  # governor warm / git warm
LIMIT = 10**12  # the bench's trees are far below any project's limits
RESULTS = Path(__file__).resolve().parent / "results" / "latest.json"
ATTRIBUTES = "* -text -filter -ident -working-tree-encoding\n"
GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C"}
WORDS = ("def", "return", "self", "import", "class", "value", "for", "in", "if", "else",
         "None", "result", "data", "items", "config", "path", "test", "assert", "=", "+", "(",
         ")", ":", "0", "1", "name", "error", "with", "open", "raise")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--b7-sizes", default=",".join(map(str, SIZES)),
                        help=f"B7: tree sizes in files (default {','.join(map(str, SIZES))})")
    parser.add_argument("--b7-dir", default=default_dir(),
                        help="B7: where the trees and git's repository are made (default "
                             "/dev/shm when writable, so no arm waits on a slow disk)")


def default_dir() -> str:
    return "/dev/shm" if os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()


def build_tree(root: Path, files: int, seed: int = 7) -> list[str]:
    """A realistic tree of `files` files under `root`; the relative paths of its text files."""
    rng = random.Random(seed)
    corpus = "".join(
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 12))) + "\n"
        for _ in range(40_000)).encode()
    directories = [root]
    texts: list[str] = []
    for index in range(files):
        if index % 10 == 0 and index:  # a new directory under a random existing one
            parent = rng.choice(directories[-50:] if len(directories) > 50 else directories)
            if len(parent.relative_to(root).parts) >= 4:
                parent = root
            directories.append(parent / f"pkg_{index // 10}")
            directories[-1].mkdir()
        directory = directories[-1]
        if index % 1000 == 999:
            path = directory / f"asset_{index}.bin"
            path.write_bytes(rng.randbytes(rng.randint(500_000, 2_000_000)))
        elif index % 250 == 17:
            path = directory / f"link_{index}"
            path.symlink_to(rng.choice(("../README.md", "module_1.py", "/usr/bin/env")))
        elif index % 200 == 3:
            path = directory / f"__init__{index}.py"
            path.write_bytes(b"")
        else:
            path = directory / f"module_{index}.py"
            start = rng.randrange(len(corpus) - 16_000)
            path.write_bytes(b"# %d\n" % index + corpus[start:start + rng.randint(0, 6_000)])
            texts.append(str(path.relative_to(root)))
            if index % 50 == 5:
                path.chmod(0o755)
    return texts


class Git:
    """Stock git with its repository outside the tree."""

    def __init__(self, tree: Path, git_dir: Path) -> None:
        self.tree, self.git_dir = tree, git_dir
        self.env = {**os.environ, **GIT_ENV, "GIT_DIR": str(git_dir),
                    "GIT_WORK_TREE": str(tree)}

    def run(self, *args: str) -> str:
        return subprocess.run(["git", *args], cwd=self.tree, env=self.env, check=True,
                              capture_output=True, text=True).stdout.strip()

    def cold(self) -> str:
        shutil.rmtree(self.git_dir, ignore_errors=True)
        self.run("init", "-q", "--object-format=sha256")
        (self.git_dir / "info" / "attributes").write_text(ATTRIBUTES)
        return self.warm()

    def warm(self) -> str:
        self.run("-c", "core.autocrlf=false", "add", "-A", "-f", "--", ".", ":!/.governor")
        return "gittree:sha256:" + self.run("write-tree")


def _timed(fn: Any) -> tuple[float, float, Any]:
    """Wall and CPU milliseconds of `fn()` (CPU of this process and of the children it waited
    for: the hasher runs here, git in children), and its value."""
    before, start = _cpu_seconds(), time.perf_counter()
    value = fn()
    wall = time.perf_counter() - start
    return wall * 1000, (_cpu_seconds() - before) * 1000, value


def _cpu_seconds() -> float:
    return sum(usage.ru_utime + usage.ru_stime for usage in (
        resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)))


def measure_size(files: int, repeats: int, directory: str) -> dict[str, Any]:
    from governor.domain.tree import StatCache, hash_tree

    scratch = Path(tempfile.mkdtemp(prefix="governor-b7-", dir=directory))
    try:
        tree, stamps = scratch / "tree", scratch / "stamps"
        tree.mkdir()
        stamps.mkdir()
        started = time.perf_counter()
        texts = build_tree(tree, files)
        build_s = time.perf_counter() - started
        git = Git(tree, scratch / "git")
        cache = StatCache(stamp_dir=str(stamps))

        def ours_cold() -> Any:
            cache.directories = {}
            return hash_tree(str(tree), cache=cache, max_files=LIMIT, max_bytes=LIMIT)

        def ours_warm() -> Any:
            return hash_tree(str(tree), cache=cache, max_files=LIMIT, max_bytes=LIMIT)

        times: dict[str, list[float]] = {"cold": [], "git_cold": [], "warm": [], "git_warm": []}
        cpu: dict[str, list[float]] = {arm: [] for arm in times}
        mismatches: list[str] = []
        first: Any = None
        time.sleep(0.05)  # the files' timestamps are older than the first scan's
        for index in range(repeats):
            arms = (("cold", ours_cold), ("git_cold", git.cold))
            ids = {}
            for arm, fn in arms if index % 2 == 0 else arms[::-1]:
                elapsed, used, value = _timed(fn)
                times[arm].append(round(elapsed, 2))
                cpu[arm].append(round(used, 2))
                ids[arm] = value if isinstance(value, str) else value.id
                if arm == "cold":
                    first = value
            if ids["cold"] != ids["git_cold"]:
                mismatches.append(f"cold #{index}: {ids['cold']} != git {ids['git_cold']}")
        read_cold = first.files_read
        read_warm: list[int] = []
        rng = random.Random(files)
        changed = rng.choice(texts)
        for index in range(repeats):
            (tree / changed).write_bytes(b"# changed %d\n" % index + rng.randbytes(2000).hex()
                                         .encode())
            arms = (("warm", ours_warm), ("git_warm", git.warm))
            ids = {}
            for arm, fn in arms if index % 2 == 0 else arms[::-1]:
                elapsed, used, value = _timed(fn)
                times[arm].append(round(elapsed, 2))
                cpu[arm].append(round(used, 2))
                ids[arm] = value if isinstance(value, str) else value.id
                if arm == "warm":
                    read_warm.append(value.files_read)
            if ids["warm"] != ids["git_warm"]:
                mismatches.append(f"warm #{index}: {ids['warm']} != git {ids['git_warm']}")
        medians = {arm: median(values) for arm, values in times.items()}
        cpu_medians = {arm: median(values) for arm, values in cpu.items()}
        progress(f"[B7] {files:,} files: cold {medians['cold']:.0f} ms (git "
                 f"{medians['git_cold']:.0f}), warm {medians['warm']:.1f} ms (git "
                 f"{medians['git_warm']:.1f}), files read warm {read_warm}")
        return {
            "files": first.files,
            "bytes": first.size,
            "build_s": round(build_s, 1),
            "median_ms": {arm: round(value, 2) for arm, value in medians.items()},
            "cpu_median_ms": {arm: round(value, 2) for arm, value in cpu_medians.items()},
            "cold_ratio": round(medians["cold"] / medians["git_cold"], 3),
            "warm_ratio": round(medians["warm"] / medians["git_warm"], 3),
            "files_read_cold": read_cold,
            "files_read_warm": read_warm,
            "ids_equal": not mismatches,
            "mismatches": mismatches,
            "times_ms": times,
            "cpu_ms": cpu,
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def measure(sizes: tuple[int, ...], repeats: int, directory: str) -> dict[str, Any]:
    git_version = subprocess.run(["git", "--version"], capture_output=True, text=True,
                                 check=True).stdout.strip()
    filesystem = subprocess.run(["stat", "-f", "-c", "%T", directory], capture_output=True,
                                text=True, check=True).stdout.strip()
    return {
        "params": {"sizes": list(sizes), "repeats": repeats, "git": git_version,
                   "filesystem": filesystem},
        "sizes": {str(files): measure_size(files, repeats, directory) for files in sizes},
    }


def _turn_stop_reference() -> float | None:
    """B3's median turn-stop at 10k events on SQLite, when latest.json has it."""
    try:
        b3 = json.loads(RESULTS.read_text())["B3"]["databases"]["sqlite"]
        return float(b3["sizes"]["10000"]["median_ms"])
    except (OSError, KeyError, ValueError):
        return None


def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = tuple(int(size) for size in getattr(args, "b7_sizes", "").split(",") if size) or SIZES
    result = measure(sizes, max(1, args.repeats), getattr(args, "b7_dir", default_dir()))
    result["turn_stop_10k_ms"] = _turn_stop_reference()
    return result


def table(result: dict[str, Any]) -> str:
    rows = []
    for files, size in result["sizes"].items():
        ms = size["median_ms"]
        rows.append([f"{int(files):,}", f"{size['bytes'] / 1e6:,.1f}",
                     f"{ms['cold']:,.0f}", f"{ms['git_cold']:,.0f}", f"{size['cold_ratio']:.2f}",
                     f"{ms['warm']:,.1f}", f"{ms['git_warm']:,.1f}", f"{size['warm_ratio']:.2f}",
                     "yes" if size["ids_equal"] else "**no**"])
    p = result["params"]
    note = (f"Medians of {p['repeats']} repetitions per arm, arms alternating, on "
            f"{p['filesystem']}, {p['git']}; ratios are of the medians. Cold: "
            f"empty stat cache / fresh git repository and index; warm: one source file "
            f"rewritten, stat cache / index of the previous hash. Goals: cold ≤ {COLD_GOAL:g}× "
            f"git, warm ≤ {WARM_GOAL:g}× git at every size; every id equal to git's.")
    at_10k = result["sizes"].get("10000")
    if at_10k is not None:
        note += (f" A warm hash at 10k files adds **{at_10k['median_ms']['warm']:.1f} ms** to a "
                 f"turn-stop")
        reference = result.get("turn_stop_10k_ms")
        note += (f" (B3's whole turn-stop at 10k events on SQLite: {reference:.1f} ms)."
                 if reference else ".")
    header = ["files", "MB", "cold ms", "git cold ms", "cold ratio", "warm ms", "git warm ms",
              "warm ratio", "ids = git"]
    return markdown_table(header, rows) + "\n\n" + note


def gates(result: dict[str, Any]) -> list[str]:
    failures = []
    for files, size in result["sizes"].items():
        if not size["ids_equal"]:
            failures.append(f"{files} files: tree ids differ from git's: {size['mismatches']}")
        if size["cold_ratio"] > COLD_GOAL:
            failures.append(f"{files} files: cold {size['cold_ratio']:.2f}× git > {COLD_GOAL:g}×")
        if size["warm_ratio"] > WARM_GOAL:
            failures.append(f"{files} files: warm {size['warm_ratio']:.2f}× git > {WARM_GOAL:g}×")
    return failures

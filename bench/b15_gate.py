"""B15. Gating a change (rules §19): what `governor-agent gate` costs a pull request.

Trees of 1k, 10k and 50k files (B7's realistic mix) with a small Python package and its pytest
tests, committed as the base; the head changes 10 files of it (the fix among them). One report
profile (pytest with a JUnit report) that the base's `.governor-gate.toml` requires. Measured in
the same run, arms alternating, medians:

- **gate**: `governor-agent gate --base main --head head` end to end against a served governor
  with its Celery worker — both trees read from git's objects, every blob uploaded (each attempt
  gates into a project of its own, so nothing is on the server yet), the base and head runs in
  the worker's bubblewrap sandbox, the judgement, the signed attestation checked and the note
  added;
- **incremental gate**: a second head (10 more files changed) gated into the same project right
  after: the base already uploaded and run, only the head's new blobs sent and its run made;
- **direct**: the same profile run twice directly in bubblewrap (`run_sandboxed`, the path a
  worker takes, with a report directory) on a checkout of the base and a checkout of the head
  (`git worktree add`, not timed).

Goal: gate ≤ 1.5× direct at 10k files; incremental gate ≤ 1.2×. Nothing is left on disk.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.b7_tree_hash import build_tree
from bench.common import django_setup, isolated, markdown_table, median, progress
from bench.live import broker_for, governor

NAME = "B15"
SIZES = (1_000, 10_000, 50_000)
REPEATS = 3
REDIS_DB = 7  # B15's own Redis database number (flushed), when Redis answers
GOAL_RATIO = 1.5  # gate / direct at 10k files
GOAL_INCREMENTAL = 1.2  # incremental gate / direct
PROFILE = "b15-tests"
PYTEST = ["/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider",
          "--junitxml=/governor-report/junit.xml", "tests"]
CALC_WRONG = "def mul(a, b):\n    return a + b\n"
CALC_RIGHT = "def mul(a, b):\n    return a * b\n"
TESTS = ("from calc import mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n\n\n"
         "def test_twos():\n    assert mul(2, 2) == 4\n")
GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C",
           "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}
ROOT = Path(__file__).resolve().parent.parent
CLIENT_SRC = ROOT / "clients" / "python" / "src"
SETUP = """
from django.contrib.auth import get_user_model
from governor.domain.profiles import validate_profile
from governor.models import Project
from governor.services.profiles import profile_store
from governor.services.tokens import token_create
from verification.models import VerifierProfile
project = Project.objects.create(slug={slug!r}, name={slug!r}, review_mode="off")
profile_store(model=VerifierProfile, project=project, validated=validate_profile({{
    "id": {profile!r}, "description": "B15 pytest", "argv": {argv!r}, "report": "junit",
    "timeout_ms": 120000, "required": False}}))
owner = get_user_model().objects.get(username="admin")
print(token_create(project=project, name="ci", owner=owner, kind="gate")[1])
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--b15-sizes", default=",".join(map(str, SIZES)),
                        help=f"B15: tree sizes in files (default {','.join(map(str, SIZES))})")
    parser.add_argument("--b15-repeats", type=int, default=REPEATS,
                        help=f"B15: attempts per arm and size (default {REPEATS})")


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], env={**os.environ, **GIT_ENV},  # noqa: S603,S607
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr}")
    return done.stdout


def _repository(root: Path, files: int) -> tuple[Path, list[str]]:
    """A repository whose main branch is the base (`files` files in all); its text files."""
    repo = root / "repo"
    repo.mkdir(parents=True)
    texts = build_tree(repo, files - 5)
    (repo / "tests").mkdir()
    (repo / "calc.py").write_text(CALC_WRONG)
    (repo / "tests" / "test_calc.py").write_text(TESTS)
    (repo / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (repo / ".governor-gate.toml").write_text(f'required_profiles = ["{PROFILE}"]\n')
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    return repo, texts


def _head(repo: Path, branch: str, start: str, texts: list[str], offset: int) -> None:
    """`branch` from `start` with 10 files changed: the fix, 5 of the tree's files rewritten and
    4 Python modules added. (B7's `.py` files hold words, not Python, which the tamper scan
    refuses as unreadable: a rewritten one holds Python.)"""
    _git(repo, "checkout", "-q", "-B", branch, start)
    (repo / "calc.py").write_text(CALC_RIGHT)
    for path in texts[offset:offset + 5]:
        (repo / path).write_text(f"# rewritten on {branch}\nVALUE = {len(path)}\n")
    for index in range(4):
        (repo / f"{branch}_{index}.py").write_text(f"VALUE_{index} = {index}\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", branch)
    _git(repo, "checkout", "-q", "main")


def _gate(live: Any, repo: Path, token_file: Path, head: str) -> float:
    env = {key: value for key, value in os.environ.items() if not key.startswith("GOVERNOR_")}
    env.update(GIT_ENV, PYTHONPATH=str(CLIENT_SRC))
    start = time.perf_counter()
    done = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "governor_client", "gate", "--base", "main", "--head", head,
         "--repo", str(repo), "--server", live.url, "--token-file", str(token_file)],
        env=env, capture_output=True, text=True, timeout=1800, check=False, cwd="/")
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"B15 gate of {head} failed: {done.stdout}{done.stderr}")
    return elapsed


def _direct(checkouts: list[str]) -> float:
    """In a child: the profile run directly in the sandbox on each checkout, in turn."""
    django_setup()
    from governor.domain.profiles import profile_definition, validate_profile
    from governor.domain.workspace import identity_at
    from governor.lib.reports import report_directory
    from verification.sandbox import run_sandboxed

    definition = profile_definition(validate_profile({
        "id": PROFILE, "description": "B15 pytest", "argv": PYTEST, "report": "junit",
        "timeout_ms": 120_000}))
    start = time.perf_counter()
    for checkout in checkouts:
        with report_directory(definition) as report:
            result = run_sandboxed(definition, checkout, identity_at(checkout), report=report)
        if result.failure_kind not in (None, "exit"):
            raise RuntimeError(f"B15 direct run on {checkout}: {result.failure_kind} "
                               f"{result.detail}")
    return time.perf_counter() - start


def run(args: argparse.Namespace) -> dict[str, Any]:
    return measure([int(size) for size in str(args.b15_sizes).split(",") if size],
                   int(args.b15_repeats), broker_for(None, REDIS_DB))


def measure(sizes: list[int], repeats: int, broker: str) -> dict[str, Any]:
    result: dict[str, Any] = {"repeats": repeats, "sizes": {}}
    with governor(worker=True, broker=broker, prefix="governor-b15-") as (live, tmp):
        for files in sizes:
            result["sizes"][str(files)] = _size(live, tmp, files, repeats)
    return result


def _size(live: Any, tmp: Path, files: int, repeats: int) -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(prefix=f"governor-b15-{files}-", dir=tmp))
    os.chmod(scratch, 0o755)  # noqa: S103 - the sandbox user reads the checkouts
    progress(f"[B15] building a repository of {files:,} files")
    repo, texts = _repository(scratch, files)
    times: dict[str, list[float]] = {"gate": [], "incremental": [], "direct": []}
    for attempt in range(repeats):
        # A new base every attempt (one file differs), so no run of it is on the server yet.
        _git(repo, "checkout", "-q", "main")
        (repo / "ATTEMPT").write_text(f"{files} {attempt}\n")
        _git(repo, "add", "ATTEMPT")
        _git(repo, "commit", "-q", "-m", f"attempt {attempt}")
        _head(repo, f"head-{attempt}", "main", texts, 0)
        _head(repo, f"next-{attempt}", f"head-{attempt}", texts, 5)
        slug = f"b15-{files}-{attempt}"
        token = live.manage("shell", "-c", SETUP.format(slug=slug, profile=PROFILE,
                                                        argv=PYTEST)).strip().splitlines()[-1]
        token_file = scratch / f"token-{attempt}"
        token_file.write_text(token + "\n")
        checkouts = []
        for name, ref in (("base", "main"), ("head", f"head-{attempt}")):
            target = scratch / f"{name}-{attempt}"
            _git(repo, "worktree", "add", "-q", "--detach", str(target), ref)
            checkouts.append(str(target))
        arms = ["gate", "direct"] if attempt % 2 == 0 else ["direct", "gate"]
        for arm in arms:
            if arm == "gate":
                times["gate"].append(_gate(live, repo, token_file, f"head-{attempt}"))
                times["incremental"].append(_gate(live, repo, token_file, f"next-{attempt}"))
            else:
                times["direct"].append(isolated(_direct, checkouts,
                                                env={"GOVERNOR_VAR_DIR": str(tmp / "direct")}))
        for checkout in checkouts:
            _git(repo, "worktree", "remove", "--force", checkout)
        progress(f"[B15] {files:,} files, attempt {attempt + 1}: gate {times['gate'][-1]:.1f} s, "
                 f"incremental {times['incremental'][-1]:.1f} s, direct "
                 f"{times['direct'][-1]:.1f} s")
    row: dict[str, Any] = {name: round(median(values), 2) for name, values in times.items()}
    row["times_s"] = {name: [round(v, 2) for v in values] for name, values in times.items()}
    row["ratio"] = round(row["gate"] / row["direct"], 2)
    row["incremental_ratio"] = round(row["incremental"] / row["direct"], 2)
    return row


def table(result: dict[str, Any]) -> str:
    rows = [[f"{int(files):,}", f"{row['gate']:.1f}", f"{row['incremental']:.1f}",
             f"{row['direct']:.1f}", f"**{row['ratio']:.2f}×**",
             f"**{row['incremental_ratio']:.2f}×**"] for files, row in result["sizes"].items()]
    return markdown_table(["files", "gate s", "incremental gate s", "direct (two runs) s",
                           "gate / direct", "incremental / direct"], rows) + "\n\n" + (
        f"Medians of {result['repeats']} attempts per arm and size, arms alternating; a change "
        f"of 10 files; one pytest report profile. Gate: `governor-agent gate` end to end into a "
        f"project of its own (every blob uploaded, base and head runs in the worker's "
        f"sandbox, judgement, note). Incremental: the next head gated right after (the base "
        f"already uploaded and run). Direct: `run_sandboxed` on checkouts of the base and the "
        f"head. Goals: ≤ {GOAL_RATIO:g}× at 10k files, incremental ≤ {GOAL_INCREMENTAL:g}×.")


def gates(result: dict[str, Any]) -> list[str]:
    failed = []
    for files, row in result["sizes"].items():
        if int(files) == 10_000 and row["ratio"] > GOAL_RATIO:
            failed.append(f"gate at {files} files: {row['ratio']:.2f}x > {GOAL_RATIO:g}x")
        if row["incremental_ratio"] > GOAL_INCREMENTAL:
            failed.append(f"incremental gate at {files} files: {row['incremental_ratio']:.2f}x "
                          f"> {GOAL_INCREMENTAL:g}x")
    return failed

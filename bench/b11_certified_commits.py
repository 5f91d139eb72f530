"""B11. Certified commits (issue 30): what checking a commit costs, at the merge.

Trees of 1k, 10k and 50k files (B7's realistic mix), each committed once in a SHA-1 and once in a
SHA-256 repository (the git directory outside the tree). Two measurements, arms alternating,
medians, in the same run:

- **verify --commit.** A fresh interpreter computing the commit's certified-format tree id from
  the repository's objects and judging it against its certification (`read_commit`,
  `judge_commit`: what `python -m governor.verify --commit` and the hook do once the keys and
  note are read), against `git ls-tree -r` of the same commit in a fresh process. "Cold" here is
  a new process with no cache of ours (the page cache is the machine's). Goal: ≤ 3×.
- **The hook's added time on a push.** The commit, with its note (signed by a key of the run),
  pushed as a new protected branch to a bare repository with `governor-agent git-hook
  pre-receive` installed (offline mode), against the same push to a bare repository without
  the hook; both already hold the objects, so the difference is the hook.

Nothing is left on disk.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from bench.b7_tree_hash import build_tree, default_dir
from bench.common import markdown_table, median, progress
from governor.domain.attestation import build_statement, encode_public_key, key_id, sign
from governor.domain.commits import NOTES_REF, commit_tree_id, note_text, read_commit
from governor.domain.tree import TREE_ID_PREFIX

NAME = "B11"
SIZES = (1_000, 10_000, 50_000)
FORMATS = ("sha1", "sha256")
REPEATS = 5
GOAL_RATIO = 3.0  # verify --commit / git ls-tree -r
ROOT = Path(__file__).resolve().parent.parent
GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C"}
VERIFY = ("import sys, time\n"
          "started = time.perf_counter()\n"
          "from governor.domain.commits import Certification, judge_commit, read_commit\n"
          "imported = time.perf_counter()\n"
          "repo, tree = sys.argv[1], sys.argv[2]\n"
          "commit = read_commit(repo, 'HEAD')\n"
          "read = time.perf_counter()\n"
          "verdict = judge_commit(commit, [Certification('s', 1, tree, 'r')])\n"
          "done = time.perf_counter()\n"
          "print((imported - started) * 1000, (read - imported) * 1000, (done - read) * 1000)\n"
          "sys.exit(0 if verdict.ok else 1)\n")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--b11-sizes", default=",".join(map(str, SIZES)),
                        help=f"B11: tree sizes in files (default {','.join(map(str, SIZES))})")


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, **GIT_ENV, **extra}


def _git(*args: str, cwd: Path | None = None, stdin: bytes | None = None, **env: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=_env(**env), input=stdin,
                          capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.decode(errors='replace')}")
    return done.stdout.decode()


def _wall_ms(argv: list[str], **env: str) -> float:
    return _timed(argv, **env)[0]


def _timed(argv: list[str], **env: str) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(argv, env=_env(**env), capture_output=True, check=False)
    wall = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        raise RuntimeError(f"{argv[:4]}: {done.stderr.decode(errors='replace')[-2000:]}")
    return wall, done.stdout.decode()


def _certify(repo: Path, work: Path) -> tuple[str, Path]:
    """Sign the commit's tree with a key of this run, note it; (tree id, the keys file)."""
    commit = read_commit(str(repo), "HEAD")
    tree, entries = commit_tree_id(commit.entries)
    key = Ed25519PrivateKey.generate()
    keyid = key_id(key.public_key())
    statement = build_statement(
        session_id="00000000-0000-0000-0000-00000000b011", contract_id="b11",
        chain_head="0" * 64, kind="terminal", event_seq=1,
        contract_receipt="sha256:" + "0" * 64, status="certified", reason={"code": "bench"},
        terminal_receipt="sha256:" + "1" * 64, workspace_tree=tree.removeprefix(TREE_ID_PREFIX))
    envelope = sign(statement, private_key=key, keyid=keyid)
    _git("notes", f"--ref={NOTES_REF}", "add", "-f", "-F", "-", "HEAD", cwd=repo,
         stdin=note_text(envelope, entries))
    keys = work / f"keys-{repo.name}.json"
    keys.write_text(json.dumps({"keys": [{"keyid": keyid, "algorithm": "ed25519", "publicKey":
                                          encode_public_key(key.public_key()), "active": True}]}))
    return tree, keys


def _bare(path: Path, object_format: str, keys: Path | None) -> Path:
    _git("init", "-q", "--bare", f"--object-format={object_format}", str(path))
    if keys is not None:
        subprocess.run([sys.executable, "-m", "governor_client", "git-hook", "install",
                        "--repo", str(path), "--protect", "refs/heads/**", "--keys-file",
                        str(keys)], env=_env(), capture_output=True, check=True)
    return path


def measure_one(files: int, object_format: str, repeats: int, directory: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(dir=directory, prefix="b11-") as scratch:
        work = Path(scratch)
        repo = work / f"repo-{object_format}"
        repo.mkdir()
        build_tree(repo, files)
        _git("init", "-q", f"--object-format={object_format}", cwd=repo)
        _git("config", "user.name", "Bench", cwd=repo)
        _git("config", "user.email", "bench@example.com", cwd=repo)
        _git("add", "-A", "-f", cwd=repo)
        _git("commit", "-q", "-m", "bench", cwd=repo)
        tree, keys = _certify(repo, work)
        gated = _bare(work / "gated.git", object_format, keys)
        plain = _bare(work / "plain.git", object_format, None)
        for remote in (gated, plain):
            _git("push", "-q", str(remote), f"{NOTES_REF}:{NOTES_REF}", "HEAD:refs/heads/main",
                 cwd=repo)
        python = [sys.executable, "-c", VERIFY, str(repo), tree]
        ls_tree = ["git", "-C", str(repo), "ls-tree", "-r", "HEAD"]
        times: dict[str, list[float]] = {"verify": [], "ls_tree": [], "push_hook": [],
                                         "push_plain": [], "import": [], "read": [],
                                         "judge": []}
        pythonpath = os.pathsep.join([str(ROOT), str(ROOT / "clients" / "python" / "src")])
        for index in range(repeats):
            wall, parts = _timed(python, PYTHONPATH=pythonpath)
            times["verify"].append(wall)
            for arm, value in zip(("import", "read", "judge"), parts.split(), strict=True):
                times[arm].append(float(value))
            times["ls_tree"].append(_wall_ms(ls_tree))
            for arm, remote in (("push_hook", gated), ("push_plain", plain)):
                times[arm].append(_wall_ms(
                    ["git", "-C", str(repo), "push", "-q", str(remote),
                     f"HEAD:refs/heads/run-{index}"], PYTHONPATH=pythonpath))
        accepted = _git("rev-parse", f"refs/heads/run-{repeats - 1}", cwd=gated).strip()
        medians = {arm: median(values) for arm, values in times.items()}
        return {"files": files, "format": object_format, "times_ms": times,
                "median_ms": medians, "ratio": medians["verify"] / medians["ls_tree"],
                "hook_added_ms": medians["push_hook"] - medians["push_plain"],
                "accepted": bool(accepted)}


def measure(sizes: tuple[int, ...], repeats: int, directory: str) -> dict[str, Any]:
    rows: dict[str, dict[str, Any]] = {}
    for files in sizes:
        for object_format in FORMATS:
            progress(f"B11: {files:,} files, {object_format}")
            rows[f"{files}-{object_format}"] = measure_one(files, object_format, repeats,
                                                           directory)
    git_version = _git("--version").strip()
    return {"rows": rows, "params": {"repeats": repeats, "git": git_version}}


def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = tuple(int(s) for s in str(getattr(args, "b11_sizes", "")).split(",") if s) or SIZES
    return measure(sizes, max(1, getattr(args, "repeats", REPEATS)), default_dir())


def table(result: dict[str, Any]) -> str:
    rows = [[f"{row['files']:,}", row["format"], f"{row['median_ms']['verify']:,.0f}",
             f"{row['median_ms']['import']:,.0f} / {row['median_ms']['read']:,.0f} / "
             f"{row['median_ms']['judge']:,.0f}",
             f"{row['median_ms']['ls_tree']:,.0f}", f"**{row['ratio']:.2f}×**",
             f"{row['median_ms']['push_plain']:,.0f}", f"{row['hook_added_ms']:,.0f}"]
            for row in result["rows"].values()]
    p = result["params"]
    note = (f"Medians of {p['repeats']} runs per arm, arms alternating, {p['git']}. verify: a "
            f"fresh interpreter reading the commit's objects, computing its certified-format "
            f"tree id and judging it (inside it: importing the modules / reading the objects / "
            f"the id and verdict); git: `git ls-tree -r` of the same commit, a fresh process. "
            f"Hook added: a push of a new protected branch (objects already there) to a bare "
            f"repository with the offline pre-receive hook, minus the same push without it. "
            f"Goal: verify ≤ {GOAL_RATIO:g}× git.")
    return markdown_table(["files", "repository", "verify ms", "import / read / judge ms",
                           "git ls-tree -r ms", "ratio",
                           "push ms (no hook)", "hook adds ms"], rows) + "\n\n" + note


def gates(result: dict[str, Any]) -> list[str]:
    failed = []
    for key, row in result["rows"].items():
        if not row["accepted"]:
            failed.append(f"{key}: the hook refused the certified commit")
        if row["ratio"] > GOAL_RATIO:
            failed.append(f"verify --commit at {key}: {row['ratio']:.2f}x git ls-tree -r > "
                          f"{GOAL_RATIO:g}x")
    return failed

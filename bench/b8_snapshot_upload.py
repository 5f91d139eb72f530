"""B8. Snapshot upload (docs/benchmarks.md, rules §11).

A 10k-file workspace of about 100 MB (B7's source-like tree with a fixed seed, plus a few
incompressible binaries) uploaded by the Python client (`governor_client.snapshot.upload`, as
`governor-agent snapshot` runs it) to a running governor — on the filesystem store, then on an
S3-compatible store (moto's server on loopback) — first whole, then after one source file
changed (a `base` snapshot plus the changed entry). Reference in the same run, on the same tree:
`git add -A` + `git commit` + `git push` of the first commit and of the one-file change to a
bare repository on this machine. Bytes sent: the client's request bodies (blobs, the manifest,
the `missing` query); git's "Writing objects" total (the pack it sends). Nothing is left on disk.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.b7_tree_hash import GIT_ENV, build_tree
from bench.common import markdown_table, median, progress
from bench.live import governor
from tests.s3_server import moto_server

NAME = "B8"
FILES = 10_000
BINARY_MB = 60  # on top of B7's ≈ 40 MB of source at 10k files
REPEATS = 3  # incremental uploads per arm and store
FIRST_GOAL = 2.0  # first upload / first git push
INCREMENTAL_GOAL = 2.0  # incremental upload / incremental git push
BYTES_SLACK = 0.05  # incremental bytes ≤ changed bytes + 5 % + the changed entries' JSON
CLIENT_SRC = Path(__file__).resolve().parents[1] / "clients" / "python" / "src"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--b8-files", type=int, default=FILES,
                        help=f"B8: files in the workspace (default {FILES})")
    parser.add_argument("--b8-binary-mb", type=int, default=BINARY_MB,
                        help=f"B8: MB of binaries added (default {BINARY_MB})")


def build_workspace(root: Path, files: int, binary_mb: int) -> list[str]:
    """B7's tree and `binary_mb` MB of incompressible binaries; the source files' paths."""
    texts = build_tree(root, files)
    rng = random.Random(8)  # noqa: S311 - a fixed seed, not security
    (root / "assets").mkdir(exist_ok=True)
    for index in range(max(0, binary_mb) // 10):
        (root / "assets" / f"blob{index}.bin").write_bytes(rng.randbytes(10 * 1024 * 1024))
    return texts


class Counting:
    """Counts the bytes of every request body the client sends (an httpx event hook)."""

    def __init__(self) -> None:
        self.bytes = 0

    def __call__(self, request: Any) -> None:
        self.bytes += len(request.content)


def _client(url: str, token: str, counter: Counting) -> Any:
    if str(CLIENT_SRC) not in sys.path:
        sys.path.insert(0, str(CLIENT_SRC))
    from governor_client.client import GovernorClient
    from governor_client.config import Config

    client = GovernorClient(Config(url=url, token=token), timeout=120)
    client._http.event_hooks["request"].append(counter)
    return client


def upload_arm(url: str, token: str, root: Path, changes: list[Path]) -> dict[str, Any]:
    """The client's first upload of `root` into a new snapshot session, then one upload after
    each file of `changes` was rewritten (one at a time)."""
    from governor_client.snapshot import cache_dir, upload

    counter = Counting()
    shutil.rmtree(cache_dir(root.resolve()), ignore_errors=True)
    with _client(url, token, counter) as client:
        session = client.create_session(None, external_id=f"b8-{uuid.uuid4()}")["id"]
        counter.bytes = 0
        started = time.perf_counter()
        first = upload(client, session, root)
        first_ms, first_bytes = (time.perf_counter() - started) * 1000, counter.bytes
        incremental = []
        for index, path in enumerate(changes):
            path.write_text(path.read_text() + f"# changed {index}\n")
            changed = path.stat().st_size
            counter.bytes = 0
            started = time.perf_counter()
            answer = upload(client, session, root)
            incremental.append({"ms": (time.perf_counter() - started) * 1000,
                                "bytes": counter.bytes, "changed_bytes": changed,
                                "sent_blobs": answer["sent_blobs"]})
    shutil.rmtree(cache_dir(root.resolve()), ignore_errors=True)
    return {"first_ms": first_ms, "first_bytes": first_bytes, "files": first["files"],
            "first_blobs": first["sent_blobs"], "incremental": incremental}


def _git(git_dir: Path, root: Path, *args: str) -> str:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, **GIT_ENV,
           "GIT_DIR": str(git_dir), "GIT_WORK_TREE": str(root),
           "GIT_AUTHOR_NAME": "b8", "GIT_AUTHOR_EMAIL": "b8@example.com",
           "GIT_COMMITTER_NAME": "b8", "GIT_COMMITTER_EMAIL": "b8@example.com"}
    result = subprocess.run(["git", *args], cwd=root, env=env, capture_output=True,  # noqa: S607
                            text=True, check=True)
    return result.stdout + result.stderr


def _pushed_bytes(output: str) -> int:
    """The pack size git reports: "Writing objects: 100% (n/n), 1.23 MiB | …"."""
    match = re.search(r"Writing objects: 100% \(\d+/\d+\), ([\d.]+) (bytes|KiB|MiB|GiB)", output)
    if match is None:
        raise RuntimeError(f"git push did not report what it wrote: {output[-500:]}")
    unit = {"bytes": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}[match.group(2)]
    return int(float(match.group(1)) * unit)


def git_arm(root: Path, scratch: Path, changes: list[Path]) -> dict[str, Any]:
    """`git add -A && git commit && git push` of the tree to a fresh bare repository, then of
    each one-file change."""
    git_dir, bare = scratch / "work.git", scratch / "bare.git"
    for path in (git_dir, bare):
        shutil.rmtree(path, ignore_errors=True)
    subprocess.run(["git", "init", "-q", "--bare", "--object-format=sha256", str(bare)],  # noqa: S607
                   check=True, env={**os.environ, **GIT_ENV})
    _git(git_dir, root, "init", "-q", "--object-format=sha256")

    def push(message: str) -> tuple[float, int]:
        started = time.perf_counter()
        _git(git_dir, root, "add", "-A", "-f", "--", ".", ":!/.governor")
        _git(git_dir, root, "commit", "-q", "-m", message)
        output = _git(git_dir, root, "push", "--progress", str(bare), "HEAD:refs/heads/main")
        return (time.perf_counter() - started) * 1000, _pushed_bytes(output)

    first_ms, first_bytes = push("first")
    incremental = []
    for index, path in enumerate(changes):
        path.write_text(path.read_text() + f"# git change {index}\n")
        ms, sent = push(f"change {index}")
        incremental.append({"ms": ms, "bytes": sent, "changed_bytes": path.stat().st_size})
    shutil.rmtree(git_dir, ignore_errors=True)
    shutil.rmtree(bare, ignore_errors=True)
    return {"first_ms": first_ms, "first_bytes": first_bytes, "incremental": incremental}


@contextmanager
def store_env(store: str) -> Iterator[dict[str, str]]:
    if store == "s3":  # moto's S3-compatible server on loopback, a fresh bucket
        with moto_server() as server:
            yield server.environment(server.bucket())
    else:
        yield {"GOVERNOR_BLOB_STORE": "filesystem"}


def _summary(arm: dict[str, Any]) -> dict[str, Any]:
    runs = arm["incremental"]
    return {"first_ms": arm["first_ms"], "first_bytes": arm["first_bytes"],
            "incremental_ms": median([run["ms"] for run in runs]),
            "incremental_bytes": median([run["bytes"] for run in runs]),
            "changed_bytes": median([run["changed_bytes"] for run in runs])}


def measure(files: int, binary_mb: int, repeats: int, directory: str | None = None,
            stores: tuple[str, ...] = ("filesystem", "s3")) -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(prefix="b8-", dir=directory))
    try:
        root = scratch / "workspace"
        root.mkdir()
        texts = build_workspace(root, files, binary_mb)
        size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
        rng = random.Random(88)  # noqa: S311
        result: dict[str, Any] = {"files": files, "bytes": size, "repeats": repeats,
                                  "stores": {}}
        git = git_arm(root, scratch, [root / p for p in rng.sample(texts, repeats)])
        result["git"] = {**_summary(git), "runs": git}
        for store in stores:
            with store_env(store) as env, governor(worker=False, broker="filesystem://",
                                                   prefix="governor-b8-",
                                                   extra_env=env) as (live, _tmp):
                progress(f"B8 {store}: uploading {files} files")
                client = upload_arm(live.url, live.token, root,
                                    [root / p for p in rng.sample(texts, repeats)])
            result["stores"][store] = {**_summary(client), "runs": client}
        return result
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run(args: argparse.Namespace) -> dict[str, Any]:
    return measure(getattr(args, "b8_files", FILES), getattr(args, "b8_binary_mb", BINARY_MB),
                   REPEATS)


def table(result: dict[str, Any]) -> str:
    git = result["git"]
    header = ["arm", "first s", "first MB sent", "first ratio", "incremental ms",
              "incremental bytes sent", "incremental ratio", "changed bytes"]
    rows = [["git push (reference)", f"{git['first_ms'] / 1000:.1f}",
             f"{git['first_bytes'] / 1e6:.1f}", "1.00", f"{git['incremental_ms']:,.0f}",
             f"{git['incremental_bytes']:,.0f}", "1.00", f"{git['changed_bytes']:,.0f}"]]
    for store, arm in result["stores"].items():
        rows.append([f"client, {store} store", f"{arm['first_ms'] / 1000:.1f}",
                     f"{arm['first_bytes'] / 1e6:.1f}",
                     f"{arm['first_ms'] / git['first_ms']:.2f}",
                     f"{arm['incremental_ms']:,.0f}", f"{arm['incremental_bytes']:,.0f}",
                     f"{arm['incremental_ms'] / git['incremental_ms']:.2f}",
                     f"{arm['changed_bytes']:,.0f}"])
    note = (f"{result['files']:,} files, {result['bytes'] / 1e6:.0f} MB; incremental: medians "
            f"of {result['repeats']} one-file changes. Ratios are of wall times against git in "
            "the same run. Goals: incremental bytes ≤ changed bytes + 5 % + the changed "
            f"entries, incremental ≤ {INCREMENTAL_GOAL:g}× git, first ≤ {FIRST_GOAL:g}× git.")
    return markdown_table(header, rows) + "\n\n" + note


def gates(result: dict[str, Any]) -> list[str]:
    git, failures = result["git"], []
    for store, arm in result["stores"].items():
        for run in arm["runs"]["incremental"]:
            # the changed blob, plus the JSON of the query and the changed entry (≤ 1 kB)
            allowed = run["changed_bytes"] * (1 + BYTES_SLACK) + 1024
            if run["bytes"] > allowed:
                failures.append(f"B8 {store}: an incremental upload sent {run['bytes']} bytes "
                                f"for a {run['changed_bytes']}-byte change")
        if arm["incremental_ms"] > INCREMENTAL_GOAL * git["incremental_ms"]:
            failures.append(f"B8 {store}: incremental {arm['incremental_ms']:.0f} ms > "
                            f"{INCREMENTAL_GOAL:g}× git's {git['incremental_ms']:.0f} ms")
        if arm["first_ms"] > FIRST_GOAL * git["first_ms"]:
            failures.append(f"B8 {store}: first upload {arm['first_ms']:.0f} ms > "
                            f"{FIRST_GOAL:g}× git's {git['first_ms']:.0f} ms")
    return failures

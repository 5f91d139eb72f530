"""rules §10.1 in the Harness plugin's snapshot mode: the tree the plugin computes in
JavaScript (clients/harness/lib/snapshot.js, run by the pinned Node) has the id, files, bytes and
manifest the server's own `hash_tree` computes for the same directory, and what the server
refuses to hash the plugin refuses, naming the same path."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from governor.domain.tree import TreeError, hash_tree
from tests.harness_e2e.rig import PLUGIN, Harness

SCRIPT = """
import { hashTree } from MODULE
const { root, exclusions, maxFiles, maxBytes } = JSON.parse(process.argv[1])
try {
  const tree = await hashTree(root, { exclusions, maxFiles, maxBytes })
  console.log(JSON.stringify({ id: tree.id, files: tree.files, bytes: tree.bytes,
    manifest: [...tree.entries].map(([path, e]) => [path, e.mode, e.blob]) }))
} catch (error) {
  if (error.name !== 'TreeError') throw error
  console.log(JSON.stringify({ error: { path: error.path, reason: error.reason } }))
}
""".replace("MODULE", json.dumps(str(PLUGIN / "lib" / "snapshot.js")))
EXCLUSIONS = ["build/**", "node_modules", "docs/*.md", "notes/dra[a-f]t?.txt", "**/cache/**"]


def plugin_tree(harness: Harness, root: Path, exclusions: list[str] | None = None,
                max_files: int = 1000, max_bytes: int = 10**7) -> dict[str, Any]:
    result = subprocess.run(  # noqa: S603
        ["node", "--input-type=module", "-e", SCRIPT, json.dumps(
            {"root": str(root), "exclusions": exclusions or [], "maxFiles": max_files,
             "maxBytes": max_bytes})],
        env=harness.env(), capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(json.loads(result.stdout))


def server_tree(root: Path, exclusions: list[str] | None = None, max_files: int = 1000,
                max_bytes: int = 10**7) -> dict[str, Any]:
    try:
        tree = hash_tree(str(root), exclusions=exclusions or [], max_files=max_files,
                         max_bytes=max_bytes)
    except TreeError as error:
        return {"error": {"path": error.path, "reason": error.reason}}
    return {"id": tree.id, "files": tree.files, "bytes": tree.size,
            "manifest": [list(entry) for entry in tree.manifest]}


@pytest.fixture
def node(harness_cache: Path, tmp_path: Path) -> Harness:
    return Harness(harness_cache, tmp_path)


@pytest.fixture
def fixture(tmp_path: Path) -> Path:
    """Executable bits, symlinks (one pointing outside, one to a directory, one dangling), nested
    directories, an empty file and an empty directory, excluded paths, non-ASCII names, names
    that sort differently as directories ("a-b/" vs "a.b" vs "a/"), the skipped top-level .git
    and .governor."""
    root = tmp_path / "fixture"
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "a" / "b" / "c" / "deep.txt").write_text("deep\n")
    (root / "a" / "x.txt").write_text("x\n")
    (root / "a-b").mkdir()
    (root / "a-b" / "z").write_bytes(b"\x00\x01binary\xff")
    (root / "a.b").write_text("dot\n")
    (root / "empty.txt").write_bytes(b"")
    (root / "empty-dir").mkdir()
    (root / "run.sh").write_text("#!/bin/sh\necho run\n")
    os.chmod(root / "run.sh", 0o755)
    (root / "group-exec").write_text("g\n")
    os.chmod(root / "group-exec", 0o654)  # only the owner's exec bit makes 100755
    os.symlink("../../../etc/passwd", root / "outside")
    os.symlink("a/b", root / "to-dir")
    os.symlink("nowhere", root / "dangling")
    (root / "é ü – 日本.txt").write_text("ünïcödé\n")
    (root / "ñ").mkdir()
    (root / "ñ" / "ß.md").write_text("ß\n")
    for excluded in ("build/out/app.bin", "node_modules/pkg/index.js", "docs/guide.md",
                     "notes/draft1.txt", "src/cache/x", "cache/y"):
        (root / excluded).parent.mkdir(parents=True, exist_ok=True)
        (root / excluded).write_text(excluded)
    (root / "docs" / "sub").mkdir()
    (root / "docs" / "sub" / "kept.md").write_text("kept: * does not cross /\n")
    (root / "notes" / "draft12.txt").write_text("kept: ? is one character\n")
    (root / "notes" / "drzft1.txt").write_text("kept: z is not in [a-f]\n")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".governor").mkdir()
    (root / ".governor" / "session.json").write_text("{}")
    return root


def test_the_plugin_computes_the_servers_tree_id_and_manifest(node: Harness,
                                                              fixture: Path) -> None:
    for exclusions in (EXCLUSIONS, []):
        mine, servers = plugin_tree(node, fixture, exclusions), server_tree(fixture, exclusions)
        assert "error" not in mine, mine
        assert mine == servers
    manifest = {path: mode for path, mode, _ in mine["manifest"]}
    assert manifest["run.sh"] == "100755" and manifest["group-exec"] == "100644"
    assert manifest["outside"] == manifest["to-dir"] == manifest["dangling"] == "120000"
    assert "a/b/c/deep.txt" in manifest and "empty.txt" in manifest
    excluded = {path for path, _, _ in plugin_tree(node, fixture, EXCLUSIONS)["manifest"]}
    assert "docs/sub/kept.md" in excluded and "notes/draft12.txt" in excluded
    assert not {"build/out/app.bin", "docs/guide.md", "src/cache/x", "cache/y"} & excluded
    assert not any(path.startswith((".git/", ".governor/")) for path in manifest)


def test_an_empty_directory_has_gits_empty_tree(node: Harness, tmp_path: Path) -> None:
    (tmp_path / "bare").mkdir()
    assert plugin_tree(node, tmp_path / "bare") == server_tree(tmp_path / "bare")


def _fifo(root: Path) -> None:
    os.mkfifo(root / "sub" / "pipe")


def _nested_git(root: Path) -> None:
    (root / "sub" / ".git").mkdir()


def _ntfs_git(root: Path) -> None:
    (root / "sub" / "GIT~1").write_text("x")


def _gitmodules_symlink(root: Path) -> None:
    os.symlink("elsewhere", root / "sub" / ".gitmodules")


def _not_utf8(root: Path) -> None:
    (Path(os.fsdecode(bytes(root / "sub") + b"/bad\xff"))).write_text("x")


def _too_many(root: Path) -> None:
    for index in range(5):
        (root / "sub" / f"f{index}").write_text("x")


@pytest.mark.parametrize("make", [_fifo, _nested_git, _ntfs_git, _gitmodules_symlink,
                                  _not_utf8, _too_many])
def test_what_the_server_refuses_to_hash_the_plugin_refuses_naming_the_same_path(
    node: Harness, tmp_path: Path, make: Any
) -> None:
    root = tmp_path / "refused"
    (root / "sub").mkdir(parents=True)
    (root / "ok.txt").write_text("ok\n")
    make(root)
    mine, servers = plugin_tree(node, root, max_files=4), server_tree(root, max_files=4)
    assert "error" in servers
    assert "error" in mine, mine
    assert mine["error"]["reason"] == servers["error"]["reason"]
    if make is not _not_utf8:  # the server shows the bad byte escaped, the plugin raw
        assert mine["error"]["path"] == servers["error"]["path"]


def test_an_exclusion_through_a_symlink_is_refused_as_git_refuses_it(
    node: Harness, tmp_path: Path
) -> None:
    root = tmp_path / "through"
    (root / "real").mkdir(parents=True)
    os.symlink("real", root / "link")
    mine, servers = plugin_tree(node, root, ["link/*.o"]), server_tree(root, ["link/*.o"])
    assert "error" in mine and "error" in servers
    assert mine["error"]["path"] == servers["error"]["path"] == "link"

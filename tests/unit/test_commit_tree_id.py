"""A commit's tree id in the certified format, read from git objects alone (no checkout), is the id
the same content gets when checked out and hashed the documented way — in SHA-1 and SHA-256
repositories, with exclusions; stock git is the oracle."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from governor.domain.attestation import build_statement, key_id, sign
from governor.domain.canonical import canonical_bytes, loads_strict
from governor.domain.commits import (
    CertificationError,
    certification_of_note,
    commit_tree_id,
    judge_commit,
    note_text,
    read_commit,
)
from governor.domain.tree import (
    TREE_ID_PREFIX,
    ManifestEntry,
    TreeError,
    hash_tree,
    manifest_tree_id,
)

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
EXCLUSIONS = ["node_modules/**", "*.log"]
GIT_ENV = {"PATH": os.environ["PATH"], "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C", "HOME": os.devnull}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], env=GIT_ENV,  # noqa: S603, S607
                          capture_output=True, text=True, check=True, timeout=60)
    return done.stdout


def new_repository(path: Path, object_format: str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", f"--object-format={object_format}")
    git(path, "config", "user.name", "Test Author")
    git(path, "config", "user.email", "author@example.com")
    return path


def fill(root: Path) -> None:
    (root / "src" / "deep" / "er").mkdir(parents=True)
    (root / "src" / "deep" / "er" / "x.py").write_text("print('x')\n")
    (root / "src" / "a-b.txt").write_text("sorted before src/a/\n")
    (root / "src" / "a").mkdir()
    (root / "src" / "a" / "f").write_text("")
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)
    os.symlink("src/deep/er/x.py", root / "link")
    os.symlink("../nowhere", root / "src" / "dangling")
    (root / "crlf.txt").write_bytes(b"a\r\nb\r\n")
    (root / "caf\u00e9.md").write_text("unicode name\n")
    (root / "node_modules" / "dep").mkdir(parents=True)
    (root / "node_modules" / "dep" / "index.js").write_text("excluded\n")
    (root / "debug.log").write_text("excluded\n")


def documented_id(directory: Path, scratch: Path) -> str:
    copy = scratch / "documented"
    shutil.copytree(directory, copy, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    git(copy, "init", "-q", "--object-format=sha256")
    (copy / ".git" / "info" / "attributes").write_text(
        "* -text -filter -ident -working-tree-encoding\n")
    git(copy, "-c", "core.autocrlf=false", "add", "-A", "-f", "--", ".", ":!/.governor",
        *(f":(exclude,glob){pattern}" for pattern in EXCLUSIONS))
    return "gittree:sha256:" + git(copy, "write-tree").strip()


@pytest.mark.parametrize("object_format", ["sha1", "sha256"])
def test_a_commits_id_from_objects_is_the_id_of_its_checkout_hashed_the_documented_way(
        tmp_path: Path, object_format: str) -> None:
    repo = new_repository(tmp_path / "repo", object_format)
    fill(repo)
    git(repo, "add", "-A", "-f")
    git(repo, "commit", "-q", "-m", "content")
    commit = read_commit(str(repo), "HEAD")
    assert commit.object_format == object_format
    tree_id, manifest = commit_tree_id(commit.entries, EXCLUSIONS)
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", str(repo), str(checkout))
    assert tree_id == documented_id(checkout, tmp_path)
    hashed = hash_tree(str(checkout), exclusions=EXCLUSIONS, max_files=10_000,
                       max_bytes=10_000_000)
    assert tree_id == hashed.id
    assert manifest == hashed.manifest
    # Without exclusions the excluded files count, as they do in a tree hashed without them.
    assert commit_tree_id(commit.entries)[0] == hash_tree(
        str(checkout), max_files=10_000, max_bytes=10_000_000).id


def test_sha1_and_sha256_repositories_of_the_same_content_have_the_same_id(
        tmp_path: Path) -> None:
    ids = []
    for object_format in ("sha1", "sha256"):
        repo = new_repository(tmp_path / object_format, object_format)
        fill(repo)
        git(repo, "add", "-A", "-f")
        git(repo, "commit", "-q", "-m", "content")
        ids.append(commit_tree_id(read_commit(str(repo), "HEAD").entries, EXCLUSIONS)[0])
    assert ids[0] == ids[1]


def test_a_submodule_or_a_committed_governor_directory_cannot_be_certified(
        tmp_path: Path) -> None:
    repo = new_repository(tmp_path / "repo", "sha1")
    (repo / "a.txt").write_text("a\n")
    blob = git(repo, "hash-object", "-w", "a.txt").strip()
    git(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},.governor/state")
    git(repo, "commit", "-q", "-m", "state committed")
    with pytest.raises(TreeError) as raised:
        commit_tree_id(read_commit(str(repo), "HEAD").entries)
    assert raised.value.path == ".governor/state"
    git(repo, "rm", "-q", "--cached", ".governor/state")
    head = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{head},vendor/lib")
    git(repo, "commit", "-q", "-m", "a gitlink")
    with pytest.raises(TreeError) as raised:
        assert read_commit(str(repo), "HEAD").entries
    assert raised.value.path == "vendor/lib"


def signed_note(entries: tuple[ManifestEntry, ...], key: Ed25519PrivateKey,
                session: str = "11111111-1111-1111-1111-111111111111") -> bytes:
    statement = build_statement(
        session_id=session, contract_id="c1", chain_head="a" * 64, kind="terminal",
        event_seq=7, contract_receipt="sha256:" + "b" * 64, status="certified",
        reason={"code": "all-checks-passed"}, terminal_receipt="sha256:" + "c" * 64,
        workspace_tree=manifest_tree_id(entries).removeprefix(TREE_ID_PREFIX))
    envelope = sign(statement, private_key=key, keyid=key_id(key.public_key()))
    return note_text(envelope, entries)


def test_a_note_cannot_hide_an_added_file_behind_exclusions_it_claims(tmp_path: Path) -> None:
    """Exclusions are not signed: a note certifies only a commit holding exactly its files, and a
    note that carries exclusions of its own is refused."""
    repo = new_repository(tmp_path / "repo", "sha256")
    (repo / "app.py").write_text("certified\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "certified")
    key = Ed25519PrivateKey.generate()
    keys = {key_id(key.public_key()): key.public_key()}
    note = signed_note(read_commit(str(repo), "HEAD").entries, key)
    certification = certification_of_note(note, keys)
    assert judge_commit(read_commit(str(repo), "HEAD"), [certification]).ok
    (repo / "debug.log").write_text("anything at all\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "hidden")
    verdict = judge_commit(read_commit(str(repo), "HEAD"), [certification])
    assert not verdict.ok and verdict.differences == ("added: debug.log",)
    claimed = loads_strict(note)
    claimed["exclusions"] = ["*.log"]
    with pytest.raises(CertificationError):
        certification_of_note(canonical_bytes(claimed), keys)


def test_a_manifest_that_does_not_hash_to_the_signed_tree_is_refused(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    entries = (ManifestEntry("a.txt", "100644", "1" * 64),)
    note = loads_strict(signed_note(entries, key))
    note["entries"] = [["a.txt", "100755", "1" * 64]]
    with pytest.raises(CertificationError, match="does not hash to the signed tree"):
        certification_of_note(canonical_bytes(note), {key_id(key.public_key()): key.public_key()})

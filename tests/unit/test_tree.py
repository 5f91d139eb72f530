"""rules §10.1 and §10.4: tree ids equal stock git's, refusals name the path, the stat cache
reads no unchanged file and never trusts a racy one. Git itself is the oracle throughout."""

from __future__ import annotations

import ctypes
import json
import os
import select
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governor.domain.fields import FieldsInvalid
from governor.domain.tree import (
    MAX_DEPTH,
    StatCache,
    TreeError,
    _Exclusions,
    _refusal,
    blob_id,
    exclusions_digest,
    hash_tree,
    refused_name,
    validate_exclusions,
)

LIMIT = 10**9
GIT_ENV = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
           "LC_ALL": "C"}
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def git_in_copy(tree: Path,
                exclusions: Sequence[str] = ()) -> tuple[str, dict[str, tuple[str, str]]]:
    """The command of rules §10.1, run in a copy of `tree` without its top-level .git:
    (tree id, {path: (mode, blob id)}). Raises CalledProcessError when git refuses."""
    with tempfile.TemporaryDirectory(prefix="tree-git-") as scratch:
        copy = Path(scratch) / "copy"
        shutil.copytree(tree, copy, symlinks=True,
                        ignore=lambda d, names: [".git"] if Path(d) == tree else [])

        def git(*args: str) -> bytes:
            return subprocess.run(["git", *args], cwd=copy, env=GIT_ENV, check=True,
                                  capture_output=True).stdout

        git("init", "-q", "--object-format=sha256")
        (copy / ".git" / "info" / "attributes").write_text(
            "* -text -filter -ident -working-tree-encoding\n")
        git("-c", "core.autocrlf=false", "add", "-A", "-f", "--", ".", ":!/.governor",
            *(f":(exclude,glob){pattern}" for pattern in exclusions))
        tree_id = "gittree:sha256:" + git("write-tree").decode().strip()
        listing = {}
        for row in git("ls-files", "-s", "-z").split(b"\0"):
            if row:
                meta, path = row.split(b"\t", 1)
                mode, blob, _ = meta.split(b" ")
                listing[path.decode()] = (mode.decode(), blob.decode())
        return tree_id, listing


def ours(tree: Path | int, **kwargs: Any) -> Any:
    return hash_tree(tree if isinstance(tree, int) else str(tree),
                     max_files=kwargs.pop("max_files", LIMIT),
                     max_bytes=kwargs.pop("max_bytes", LIMIT), **kwargs)


def assert_equals_git(tree: Path, exclusions: Sequence[str] = ()) -> Any:
    hashed = ours(tree, exclusions=list(exclusions))
    tree_id, listing = git_in_copy(tree, list(exclusions))
    assert hashed.id == tree_id
    assert {e.path: (e.mode, e.blob) for e in hashed.manifest} == listing
    return hashed


def refusal(tree: Path, **kwargs: Any) -> TreeError:
    with pytest.raises(TreeError) as caught:
        ours(tree, **kwargs)
    return caught.value


# --- random trees against git -----------------------------------------------------------------

NAMES = ["a", "b", "A", "a.txt", "b.py", "a-b", "a.b", "ab", "a b", "é", "漢字", "😀", "[ab]",
         "x*y", "-", "_", "~x", ".hidden", ".governor", "gitx", ".gitignore", "q?", "CRLF",
         "new\nline", "tab\t", "back\\slash", "quote\"'", "ü.md", "z" * 40]
name_strategy = st.one_of(
    st.sampled_from(NAMES),
    st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="/\x00"),
            min_size=1, max_size=12).filter(
        lambda n: n not in (".", "..") and len(n.encode()) < 200 and "git" not in n.lower()
        and not n.startswith(("~", "g", "G"))),
)
content_strategy = st.one_of(st.binary(max_size=64),
                             st.sampled_from([b"", b"a\r\nb\r\n", b"\r", b"line\n", b"\0\xff"]))
mode_strategy = st.sampled_from([0o644, 0o755, 0o744, 0o654, 0o645, 0o600, 0o700, 0o444])
target_strategy = st.one_of(
    st.sampled_from(["a", "../a", "../../etc", "/etc/passwd", "/nonexistent/x", "dir/", ".",
                     "é/ü", "a b"]),
    st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"),
            min_size=1, max_size=20))
leaf = st.one_of(st.tuples(st.just("file"), content_strategy, mode_strategy),
                 st.tuples(st.just("link"), target_strategy))
tree_strategy = st.recursive(
    st.dictionaries(name_strategy, leaf, max_size=4),
    lambda children: st.dictionaries(name_strategy, st.one_of(leaf, children), max_size=4),
    max_leaves=14)
component = st.sampled_from(["a", "b", "*", "?", "a*", "*.txt", "*.py", "[ab]", "[!a]*",
                             "[a-c]", "é", ".hidden", "[]x]", "x*y", "**"])
pattern_strategy = st.lists(component, min_size=1, max_size=3).map("/".join).filter(
    lambda p: "**/**" not in p)


def materialise(root: Path, spec: dict[str, Any]) -> None:
    for name, value in spec.items():
        path = root / name
        if isinstance(value, dict):
            path.mkdir()
            materialise(path, value)
        elif value[0] == "file":
            path.write_bytes(value[1])
            path.chmod(value[2])
        else:
            os.symlink(value[1], path)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=tree_strategy, exclusions=st.lists(pattern_strategy, max_size=3))
def test_random_trees_hash_to_the_id_and_manifest_stock_git_gives(
        spec: dict[str, Any], exclusions: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="tree-") as scratch:
        root = Path(scratch) / "ws"
        root.mkdir()
        materialise(root, spec)
        try:
            git_in_copy(root, exclusions)
        except subprocess.CalledProcessError as exc:
            assert b"is beyond a symbolic link" in exc.stderr
            assert "exclusion" in str(refusal(root, exclusions=exclusions))
            return
        assert_equals_git(root, exclusions)


def test_a_tree_of_every_kind_of_entry_equals_git(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "src" / "deep" / "er").mkdir(parents=True)
    (root / "src" / "deep" / "er" / "x.py").write_bytes(b"print(1)\r\n")
    (root / "src" / "empty").mkdir()
    (root / "src" / "only-excluded").mkdir()
    (root / "src" / "only-excluded" / "x.log").write_text("log")
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    (root / "others-exec").write_text("x")
    (root / "others-exec").chmod(0o655)
    (root / "empty").write_bytes(b"")
    (root / "a-b").write_text("1")
    (root / "a.b").write_text("2")
    (root / "a").mkdir()
    (root / "a" / "z").write_text("3")  # "a/" sorts after "a-b" and "a.b", before "a0"
    (root / "a0").write_text("4")
    os.symlink("../nowhere", root / "dangling")
    os.symlink("/etc/hostname", root / "absolute")
    os.symlink("src/deep", root / "to-dir")
    (root / ".governor").mkdir()
    (root / ".governor" / "state").write_text("ignored")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ignored")
    hashed = assert_equals_git(root, ["**/*.log"])
    assert hashed.files == 11 and hashed.id.startswith("gittree:sha256:")
    assert [e.path for e in hashed.manifest][:5] == ["a-b", "a.b", "a/z", "a0", "absolute"]


def test_an_empty_workspace_is_git_s_empty_tree(tmp_path: Path) -> None:
    (tmp_path / "ws" / "only" / "empty").mkdir(parents=True)
    assert_equals_git(tmp_path / "ws")


def test_the_root_may_be_given_as_a_descriptor(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    fd = os.open(tmp_path, os.O_PATH | os.O_DIRECTORY)
    try:
        assert ours(fd).id == ours(tmp_path).id
    finally:
        os.close(fd)


def test_blob_ids_are_git_s(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"a\r\nb\0")
    subprocess.run(["git", "init", "-q", "--object-format=sha256"], cwd=tmp_path, env=GIT_ENV,
                   check=True)
    out = subprocess.run(["git", "hash-object", "--no-filters", "f"], capture_output=True,
                         text=True, check=True, env=GIT_ENV, cwd=tmp_path)
    assert blob_id(b"a\r\nb\0") == out.stdout.strip()


# --- exclusions -------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", [
    "*.txt", "**/*.txt", "a/**", "a/*", "a", "**/b", "a/**/c", "[ab]*", "[!a]", "?", "[]]x",
    "**", "[ab]", "b/c", "*/c", "[a-b]/*", "x*y", "é*",
])
def test_each_supported_pattern_excludes_what_git_excludes(tmp_path: Path, pattern: str) -> None:
    root = tmp_path / "ws"
    for path in ["a/b/c", "a/c", "a/x.txt", "b/c", "b/a/c", "c", "x.txt", "[ab]", "a.txt",
                 "]x", "xzy", "é.md", "e", "b/d/c/e", "a/b/c.txt"]:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(path)
    assert_equals_git(root, [pattern])


@pytest.mark.parametrize(("pattern", "reason"), [
    ("", "non-empty"),
    ("/a", "must not start or end with '/'"),
    ("a/", "must not start or end with '/'"),
    ("a//b", "empty, '.' or '..'"),
    ("a/../b", "empty, '.' or '..'"),
    ("./a", "empty, '.' or '..'"),
    ("a**", "whole path component"),
    ("***", "whole path component"),
    ("a\\*", "backslash"),
    ("[abc", "never closed"),
    ("[[:alpha:]]", "POSIX"),
    ("[é]", "ASCII"),
    ("[a/b]", "never closed"),  # "/" ends a component first, as in git's pathspecs
])
def test_unsupported_patterns_are_refused_naming_the_pattern(pattern: str, reason: str) -> None:
    with pytest.raises(FieldsInvalid) as caught:
        validate_exclusions(["ok/**", pattern])
    assert caught.value.errors[0]["path"] == "exclusions/1"
    assert reason in caught.value.errors[0]["message"]


def test_exclusions_must_be_a_list_of_strings() -> None:
    with pytest.raises(FieldsInvalid, match="exclusions: must be a list"):
        validate_exclusions("node_modules/**")
    with pytest.raises(FieldsInvalid, match="exclusions/0: must be a string"):
        validate_exclusions([3])


def test_the_exclusion_digest_is_a_receipt_of_the_sorted_distinct_list(tmp_path: Path) -> None:
    digest = exclusions_digest(["b/**", "a/**", "b/**"])
    assert digest == exclusions_digest(["a/**", "b/**"]) != exclusions_digest(["a/**"])
    assert digest.startswith("sha256:") and len(digest) == 71
    assert ours(tmp_path, exclusions=["b/**", "a/**"]).exclusions_digest == digest
    assert ours(tmp_path).exclusions_digest == exclusions_digest([])


def test_an_exclusion_through_a_symlink_is_refused_as_git_refuses_it(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "real" / "sub").mkdir(parents=True)
    (root / "real" / "sub" / "f").write_text("x")
    os.symlink("real", root / "link")
    error = refusal(root, exclusions=["link/sub/**"])
    assert error.path == "link" and "'link/sub/**' passes through" in str(error)
    with pytest.raises(subprocess.CalledProcessError) as caught:
        git_in_copy(root, ["link/sub/**"])
    assert b"beyond a symbolic link" in caught.value.stderr
    assert_equals_git(root, ["real/sub/**", "link", "nowhere/x/**", "real/sub/f/x"])


# --- refusals ---------------------------------------------------------------------------------


def test_a_fifo_is_refused_naming_its_path_without_being_opened(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    os.mkfifo(tmp_path / "d" / "pipe")  # opening it would block: the refusal proves it was not
    error = refusal(tmp_path)
    assert error.path == "d/pipe" and "is a FIFO" in str(error)


def test_a_socket_is_refused_naming_its_path(tmp_path: Path) -> None:
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(tmp_path / "sock"))
        error = refusal(tmp_path)
    finally:
        server.close()
    assert error.path == "sock" and "is a socket" in str(error)


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a device needs root")
def test_a_device_is_refused_naming_its_path(tmp_path: Path) -> None:
    os.mknod(tmp_path / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    error = refusal(tmp_path)
    assert error.path == "null" and "is a device" in str(error)


@pytest.mark.parametrize("kind", ["directory", "file", "symlink"])
def test_a_nested_git_anywhere_below_the_root_is_refused(tmp_path: Path, kind: str) -> None:
    (tmp_path / "vendor" / "lib").mkdir(parents=True)
    nested = tmp_path / "vendor" / "lib" / ".git"
    if kind == "directory":
        nested.mkdir()
        (nested / "HEAD").write_text("ref: refs/heads/main\n")
    elif kind == "file":
        nested.write_text("gitdir: /elsewhere\n")
    else:
        os.symlink("/elsewhere", nested)
    error = refusal(tmp_path)
    assert error.path == "vendor/lib/.git" and "nested .git" in str(error)


def test_a_name_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    with open(os.path.join(os.fsencode(tmp_path), b"bad\xff"), "wb") as handle:
        handle.write(b"x")
    error = refusal(tmp_path)
    assert error.path == "bad\\xff" and "not valid UTF-8" in str(error)


# (relative path, kind) -> git refuses it with "invalid path" (core.protectNTFS on Linux).
REFUSED = [
    (".GIT/x", "file"), ("sub/.Git/x", "file"), ("git~1/x", "file"), ("GIT~1", "file"),
    (".git./x", "file"), (".git /x", "file"), (".git::$INDEX_ALLOCATION/x", "file"),
    ("a\\.git/x", "file"), ("x\\git~1", "file"), (".gitmodules", "link"),
    (".GitModules", "link"), ("gitmod~1", "link"), ("GITMOD~4 .", "link"), ("gi7eba~9", "link"),
    ("~1234567", "link"), (".gitmodules/l", "link"), ("d/.gitmodules:x/l", "link"),
    (".gitmodules::$DATA", "link"),
]
ACCEPTED = [
    (".gitignore", "file"), (".gitmodules", "file"), (".git2", "file"), ("git~2", "file"),
    ("gitmod~5", "link"), ("gitmod~1/l", "link"), ("d/.gitmodules/f", "file"),
    (".gitx/y", "file"), ("a\\b", "file"), ("~123456", "link"), ("git~1x", "file"),
]


def make(root: Path, relative: str, kind: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "file":
        path.write_text("x")
    else:
        os.symlink("target", path)


@pytest.mark.parametrize(("relative", "kind"), REFUSED)
def test_names_git_refuses_are_refused_naming_the_path(tmp_path: Path, relative: str,
                                                       kind: str) -> None:
    root = tmp_path / "ws"
    make(root, relative, kind)
    error = refusal(root)
    assert relative.startswith(error.path) and "git refuses" in str(error)
    with pytest.raises(subprocess.CalledProcessError) as caught:
        git_in_copy(root)
    assert b"invalid path" in caught.value.stderr


@pytest.mark.parametrize(("relative", "kind"), ACCEPTED)
def test_names_near_the_refused_ones_hash_as_git_hashes_them(tmp_path: Path, relative: str,
                                                             kind: str) -> None:
    root = tmp_path / "ws"
    make(root, relative, kind)
    assert_equals_git(root)


@settings(max_examples=60, deadline=None)
@given(name=st.text(st.sampled_from(".gGiItT~1479 :\\mMoOdDuUlLeEsS7bBaA"), min_size=1,
                    max_size=14).filter(lambda n: n not in (".", "..", ".git")),
       kind=st.sampled_from(["file", "link", "dir-file", "dir-link"]))
def test_we_refuse_exactly_the_names_git_refuses(name: str, kind: str) -> None:
    with tempfile.TemporaryDirectory(prefix="tree-") as scratch:
        root = Path(scratch) / "ws"
        make(root, f"{name}/x" if kind.startswith("dir") else name,
             "link" if kind.endswith("link") else "file")
        try:
            expected = git_in_copy(root)[0]
        except subprocess.CalledProcessError as exc:
            assert b"invalid path" in exc.stderr
            expected = None
        try:
            got = ours(root).id
        except TreeError as exc:
            assert "git refuses" in exc.reason
            got = None
        assert got == expected


NAMES = st.text(st.sampled_from(".gGiItT~1479 :\\mMoOdDuUlLeEsS7bBaAx"), min_size=1,
                max_size=14).filter(lambda n: n not in (".", ".."))


@settings(max_examples=250, deadline=None)
@given(names=st.lists(NAMES, min_size=1, max_size=4), symlink=st.booleans())
def test_the_one_pass_search_finds_every_name_refused_name_by_name(names: list[str],
                                                                   symlink: bool) -> None:
    """`refused_name` searches a whole path at once and lets `_refusal` decide only where the
    search found something: it refuses exactly what `_refusal` on every name refuses."""
    parts = [name.encode() for name in names]
    expected = None
    for index, part in enumerate(parts):
        refused, refused_for_symlink = _refusal(part, leaf=index == len(parts) - 1)
        if refused or (symlink and refused_for_symlink):
            expected = part
            break
    assert refused_name(b"/".join(parts), symlink=symlink) == expected


PATTERNS = st.lists(st.sampled_from(["a", "a/b", "b/**", "**/a", "a/*/c", "*", "[ab]/c", "**",
                                     "b/a/**", "c?", "a/**/b", "**/b/**"]), max_size=3)


@settings(max_examples=300, deadline=None)
@given(patterns=PATTERNS, names=st.lists(st.sampled_from(["a", "b", "c", "cd", "ab"]),
                                         min_size=1, max_size=6))
def test_excluding_a_directory_in_one_pass_agrees_with_testing_each_directory(
        patterns: list[str], names: list[str]) -> None:
    exclusions = _Exclusions(patterns)
    path = "/".join(names).encode()
    each = any(exclusions.excludes(path[:index], True)
               for index in range(len(path)) if path[index:index + 1] == b"/")
    assert exclusions.excludes_a_directory_of(path) == each


# --- limits -----------------------------------------------------------------------------------


def test_the_file_limit_is_refused_naming_it(tmp_path: Path) -> None:
    for name in "abc":
        (tmp_path / name).write_text("x")
    assert ours(tmp_path, max_files=3).files == 3
    assert "more than max_files=2 files" in str(refusal(tmp_path, max_files=2))


def test_the_byte_limit_is_refused_naming_it_before_the_file_is_read(tmp_path: Path) -> None:
    (tmp_path / "small").write_bytes(b"x" * 10)
    (tmp_path / "big").write_bytes(b"x" * 1000)
    assert ours(tmp_path, max_bytes=1010).size == 1010
    error = refusal(tmp_path, max_bytes=1009)
    assert "exceed max_bytes=1009 bytes" in str(error) and error.path == "small"


def test_nesting_deeper_than_the_limit_is_refused(tmp_path: Path) -> None:
    deep = tmp_path.joinpath(*["d"] * (MAX_DEPTH + 1))
    deep.mkdir(parents=True)
    (deep / "f").write_text("x")
    assert f"nested deeper than {MAX_DEPTH}" in str(refusal(tmp_path))


# --- the stat cache ---------------------------------------------------------------------------

IN_OPEN, IN_ISDIR = 0x20, 0x40000000


class Opens:
    """Files opened under the watched directories, as the kernel reports them (inotify)."""

    def __init__(self, root: Path) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self.fd >= 0
        self.watches = {}
        for directory in [root, *(p for p in root.rglob("*") if p.is_dir() and
                                  not p.is_symlink())]:
            wd = self.libc.inotify_add_watch(self.fd, os.fsencode(directory), IN_OPEN)
            assert wd >= 0, ctypes.get_errno()
            self.watches[wd] = directory

    def files(self, timeout: float = 0.0) -> list[str]:
        opened = []
        while select.select([self.fd], [], [], timeout)[0]:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            offset = 0
            while offset < len(data):
                wd, mask, _, length = (int.from_bytes(data[offset + i:offset + i + 4], "little")
                                       for i in (0, 4, 8, 12))
                name = data[offset + 16:offset + 16 + length].rstrip(b"\0").decode()
                if not mask & IN_ISDIR:
                    opened.append(str(self.watches[wd] / name))
                offset += 16 + length
        return opened

    def close(self) -> None:
        os.close(self.fd)


@pytest.fixture
def cache(tmp_path: Path) -> StatCache:
    (tmp_path / "stamps").mkdir()
    return StatCache(stamp_dir=str(tmp_path / "stamps"))


def old_tree(root: Path) -> None:
    """A tree whose timestamps are older than any scan that follows (the racy-clean rule)."""
    (root / "src" / "pkg").mkdir(parents=True)
    for index in range(20):
        (root / "src" / "pkg" / f"m{index}.py").write_text(f"x = {index}\n")
    (root / "README").write_text("readme\n")
    os.symlink("README", root / "link")
    time.sleep(0.02)


def test_a_warm_hash_reads_no_unchanged_file_and_rereads_a_changed_one(
        tmp_path: Path, cache: StatCache) -> None:
    root = tmp_path / "ws"
    old_tree(root)
    cold = ours(root, cache=cache)
    assert cold.files_read == 22
    opens = Opens(root)
    try:
        warm = ours(root, cache=cache)
        assert opens.files() == [] and warm.files_read == 0 and warm.id == cold.id
        (root / "src" / "pkg" / "m3.py").write_text("x = 33\n")
        opens.files()
        changed = ours(root, cache=cache)
        assert opens.files() == [str(root / "src" / "pkg" / "m3.py")]
        assert changed.files_read == 1
        assert changed.id == git_in_copy(root)[0] != cold.id
    finally:
        opens.close()


def test_a_file_not_older_than_the_scan_is_hashed_again_next_time(
        tmp_path: Path, cache: StatCache) -> None:
    root = tmp_path / "ws"
    old_tree(root)
    racy = root / "src" / "pkg" / "m5.py"
    # A write in the scan's own clock tick has an mtime equal to the scan's timestamp; on a
    # kernel with fine-grained timestamps it cannot be produced on demand, a later one can.
    future = time.time_ns() + 3_600_000_000_000
    os.utime(racy, ns=(future, future))
    ours(root, cache=cache)
    opens = Opens(root)
    try:
        again = ours(root, cache=cache)
        assert opens.files() == [str(racy)] and again.files_read == 1
    finally:
        opens.close()


def test_a_file_changed_while_it_is_read_is_read_again(tmp_path: Path) -> None:
    """`a` is lstat-ed when its directory is listed, then `b/` is hashed (opening b/big), then
    `a` is read: a change to `a` while b/big is read makes the first read of `a` stale."""
    root = tmp_path / "ws"
    (root / "b").mkdir(parents=True)
    (root / "a").write_text("before")
    (root / "b" / "big").write_bytes(os.urandom(64 << 20))
    watcher = Opens(root / "b")
    done = threading.Event()

    def change_a_when_big_is_opened() -> None:
        while not done.is_set():
            if watcher.files(timeout=0.01):
                (root / "a").write_text("after!")
                return

    thread = threading.Thread(target=change_a_when_big_is_opened)
    thread.start()
    try:
        hashed = ours(root)
    finally:
        done.set()
        thread.join()
        watcher.close()
    assert hashed.files_read == 3  # big, then a twice
    assert hashed.id == git_in_copy(root)[0]


def test_a_file_that_keeps_changing_while_it_is_read_fails_closed(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    target = root / "big"
    target.write_bytes(os.urandom(64 << 20))
    watcher = Opens(root)
    done = threading.Event()

    def append_whenever_it_is_opened() -> None:
        while not done.is_set():
            for _ in watcher.files(timeout=0.01):
                with open(target, "ab") as handle:
                    handle.write(b"more")

    thread = threading.Thread(target=append_whenever_it_is_opened)
    thread.start()
    try:
        error = refusal(root)
    finally:
        done.set()
        thread.join()
        watcher.close()
    assert error.path == "big" and error.reason == "changed while it was being hashed (twice)"


def test_the_cache_survives_a_json_round_trip(tmp_path: Path, cache: StatCache) -> None:
    root = tmp_path / "ws"
    old_tree(root)
    first = ours(root, cache=cache)
    restored = StatCache.from_dict(json.loads(json.dumps(cache.as_dict())),
                                   stamp_dir=cache.stamp_dir)
    again = ours(root, cache=restored)
    assert again.files_read == 0 and again.id == first.id and again.manifest == first.manifest
    with pytest.raises(ValueError, match="stat cache directory 'src/'"):
        StatCache.from_dict({**cache.as_dict(), "src/": {"names": []}}, stamp_dir="/tmp")


def test_a_failed_hash_leaves_the_cache_as_it_was(tmp_path: Path, cache: StatCache) -> None:
    root = tmp_path / "ws"
    old_tree(root)
    ours(root, cache=cache)
    before = cache.as_dict()
    os.mkfifo(root / "src" / "pipe")
    refusal(root, cache=cache)
    assert cache.as_dict() == before


def test_the_cache_never_outlives_a_replaced_file(tmp_path: Path, cache: StatCache) -> None:
    """Same path, same size, same mtime, new content: the inode and ctime differ."""
    root = tmp_path / "ws"
    old_tree(root)
    target = root / "README"
    info = target.stat()
    ours(root, cache=cache)
    replacement = root / "tmp"
    replacement.write_text("README\n")
    os.utime(replacement, ns=(info.st_atime_ns, info.st_mtime_ns))
    os.replace(replacement, target)
    assert ours(root, cache=cache).id == git_in_copy(root)[0]


def test_the_stamp_is_never_written_into_the_workspace(tmp_path: Path, cache: StatCache) -> None:
    root = tmp_path / "ws"
    old_tree(root)
    before = sorted(p.name for p in root.rglob("*"))
    ours(root, cache=cache)
    assert sorted(p.name for p in root.rglob("*")) == before
    assert os.listdir(cache.stamp_dir) == []


def test_a_stamp_from_another_filesystem_trusts_nothing_from_the_last_two_seconds(
        tmp_path: Path) -> None:
    """Timestamps there may come from another clock or be coarser: a margin covers them."""
    if not os.path.isdir("/dev/shm") or os.stat("/dev/shm").st_dev == tmp_path.stat().st_dev:
        pytest.skip("needs /dev/shm on another filesystem than the workspace")
    root = tmp_path / "ws"
    old_tree(root)
    with tempfile.TemporaryDirectory(dir="/dev/shm") as stamps:
        cache = StatCache(stamp_dir=stamps)
        ours(root, cache=cache)
        assert ours(root, cache=cache).files_read == 22


# --- issue 25, finding 10: hard links to files the workspace's owner does not own ------------


def test_issue_25_a_hard_link_to_another_owners_file_fails_the_hash_naming_its_path(
    tmp_path: Path
) -> None:
    """The server hashes path workspaces with its own rights (root) and keeps every file it
    reads in the blob store: a hard link to /etc/shadow would come back through the files
    route. A file of uid 12345 stands in for it (root may link it whatever
    fs.protected_hardlinks says)."""
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$not-for-the-agent:19000:0:99999:7:::\n")
    os.chown(secret, 12345, 12345)
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    os.link(secret, tree / "sub" / "copy")
    error = refusal(tree)
    assert error.path == "sub/copy"
    assert error.reason.startswith("is a hard link (2 links) to a file owned by uid 12345, not "
                                   f"by the workspace's owner (uid {tree.stat().st_uid})")


def test_issue_25_a_hard_link_between_files_of_the_workspace_owner_hashes_as_git_does(
    tmp_path: Path
) -> None:
    (tmp_path / "a").write_text("shared\n")
    os.link(tmp_path / "a", tmp_path / "b")
    assert_equals_git(tmp_path)

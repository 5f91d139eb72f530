"""rules §10.1 and §10.4: the id of a workspace tree, as stock git computes it.

A tree id is the git tree id in SHA-256 object format over the raw bytes of every regular file
and symbolic link under the root, written `gittree:sha256:<64 hex>`. It equals what

    git init -q --object-format=sha256
    printf '* -text -filter -ident -working-tree-encoding\\n' > .git/info/attributes
    git -c core.autocrlf=false add -A -f -- . ':!/.governor' [':(exclude,glob)PATTERN' ...]
    git write-tree

prints in a copy of the tree without `.git`. Blobs are `sha256("blob " + len + "\\0" + bytes)`;
a file's mode is 100755 when its owner exec bit is set, else 100644; a symlink is 120000 and its
blob is the link text (never followed); entries sort as git sorts them (a directory as if its name
ended with "/"); empty directories are absent; the top-level `.git` and `.governor` are left out.

The walk never resolves a path twice: directories are opened relative to their parent's
descriptor with O_NOFOLLOW, files likewise (after an lstat, so a FIFO is never opened), and a file
whose stat changes while it is read is read once more, then refused. Anything that cannot be
hashed faithfully, or must not be read, fails the whole hash with a `TreeError` naming the path:
FIFOs, sockets, devices, a hard link to a file the workspace's owner (the root directory's) does
not own (`governor.domain.workspace.foreign_hard_link`), a nested `.git`, names git refuses
(`is_ntfs_dotgit`, `verify_dotfile` in git's read-cache.c and path.c, with git's Linux defaults
core.protectNTFS=true, core.protectHFS=false), names that are not UTF-8 (they could not be named
in a manifest), unreadable entries, and trees over the caller's limits.

Exclusions are git pathspec globs, `:(exclude,glob)PATTERN`, anchored at the root, in a subset
this module checks (`validate_exclusions`): `*` and `?` (never matching "/"), `[...]` classes
(`!` or `^` negates, ranges, ASCII only), and `**` as a whole path component (`**/x`, `a/**/b`,
`a/**`). Backslashes, POSIX classes, a leading or trailing "/", empty, "." and ".." components
are refused. A pattern excludes a path it matches by glob (bytes, case-sensitive), the path it
names literally, and everything below either; a directory is pruned, as git prunes it, when the
pattern matches its path followed by "/" (so `a/*` excludes all of `a/`). A pattern whose leading
components reach a symlink in the tree is refused, as git refuses that pathspec.

The stat cache (§10.4) lets a re-hash skip reading unchanged files. Kept by the server only, it
holds per directory each file's (device, inode, size, mtime_ns, ctime_ns, mode) with its blob id,
and the directory's tree id, taken whole when the directory's names and keys are unchanged (every
entry is still lstat-ed: B7 measures the cost). Git's racy-clean rule holds: before a scan a file
is created in the cache's own directory and its mtime taken as the scan's timestamp; a key is
trusted only when its mtime and ctime are older than that timestamp, so a file written in the
same clock tick as it was read is read again next time. What the cache trusts is that the kernel
changes ctime (or the inode) whenever content or mode changes.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from stat import S_ISBLK, S_ISCHR, S_ISDIR, S_ISFIFO, S_ISLNK, S_ISREG, S_ISSOCK, S_IXUSR
from typing import Any, NamedTuple

from governor.domain.canonical import receipt
from governor.domain.fields import FieldErrors, FieldsInvalid, join_path, string_field
from governor.domain.workspace import foreign_hard_link, open_directory

TREE_ID_PREFIX = "gittree:sha256:"
MODE_FILE, MODE_EXECUTABLE, MODE_SYMLINK, MODE_TREE = b"100644", b"100755", b"120000", b"40000"
SKIPPED_AT_TOP = frozenset({b".git", b".governor"})
# Only names starting so, or holding a backslash, can be names git refuses (see `_refusal`).
SUSPECT_FIRST_BYTES = frozenset(b".gG~")
MAX_DEPTH = 256  # directories below the root; each level holds one descriptor open
READ_CHUNK = 1 << 20
# The threshold is moved this far back when the cache's directory is on another filesystem than
# the workspace: timestamps there may be coarser (FAT: 2 s) or come from another clock.
FOREIGN_FILESYSTEM_MARGIN_NS = 2_000_000_000
OPEN_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
CHANGED = "changed while it was being hashed"

StatKey = tuple[int, int, int, int, int, int]  # device, inode, size, mtime_ns, ctime_ns, mode


class TreeError(Exception):
    """The tree cannot be hashed. `path` is the entry to blame (relative, "" for the root)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path!r}: {reason}" if path else reason)
        self.path = path
        self.reason = reason


class ManifestEntry(NamedTuple):
    path: str
    mode: str
    blob: str  # 64 hex digits


def blob_id(data: bytes) -> str:
    """The git blob id (SHA-256 object format) of `data`, as 64 hex digits."""
    digest = hashlib.sha256(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest()


# --- exclusions ---------------------------------------------------------------------------------


def _class_regex(pattern: str, start: int) -> tuple[bytes, int] | str:
    """The regex for the class starting at `pattern[start] == "["` and the index after it, or the
    reason it is refused. Git's wildmatch rules: "!" or "^" first negates, the next character is a
    member even when it is "]", "a-z" is a range unless "-" is first or last."""
    i = start + 1
    negated = i < len(pattern) and pattern[i] in "!^"
    i += negated
    members: set[int] = set()
    previous: int | None = None
    first = True
    while i < len(pattern) and (first or pattern[i] != "]"):
        char = pattern[i]
        if ord(char) > 127:
            return "a character class may hold only ASCII characters"
        if char == "[" and pattern[i + 1:i + 2] == ":":
            return "POSIX character classes ([:alpha:]) are not supported"
        if (char == "-" and previous is not None and i + 1 < len(pattern)
                and pattern[i + 1] != "]"):
            high = pattern[i + 1]
            if ord(high) > 127:
                return "a character class may hold only ASCII characters"
            members.update(range(previous, ord(high) + 1))
            previous, i = None, i + 2
        else:
            members.add(ord(char))
            previous, i = ord(char), i + 1
        first = False
    if i >= len(pattern):
        return "a '[' opens a character class that is never closed"
    matched = (set(range(256)) - members if negated else members) - {ord("/")}  # WM_PATHNAME
    if not matched:
        return b"(?!)", i + 1
    return b"[" + b"".join(b"\\x%02x" % byte for byte in sorted(matched)) + b"]", i + 1


def _pattern_regex(pattern: str) -> bytes | str:
    """The regex (over path bytes) of a supported glob, or the reason it is refused."""
    if "\\" in pattern:
        return "backslash escapes are not supported"
    if pattern.startswith("/") or pattern.endswith("/"):
        return "must not start or end with '/' (patterns are anchored at the workspace root)"
    components = pattern.split("/")
    if any(part in ("", ".", "..") for part in components):
        return "must not contain empty, '.' or '..' components"
    out: list[bytes] = []
    last = len(components) - 1
    for index, part in enumerate(components):
        if part == "**":
            # git's wildmatch: "**/" may match no directory at all; a trailing "**" matches
            # everything below.
            out.append(b".*" if index == last else b"(?:.*/)?")
            continue
        if "**" in part:
            return "'**' must be a whole path component ('**/x', 'a/**/b' or 'a/**')"
        i = 0
        while i < len(part):
            char = part[i]
            if char == "*":
                out.append(b"[^/]*")
                i += 1
            elif char == "?":
                out.append(b"[^/]")
                i += 1
            elif char == "[":
                parsed = _class_regex(part, i)
                if isinstance(parsed, str):
                    return parsed
                out.append(parsed[0])
                i = parsed[1]
            else:
                out.append(re.escape(char.encode()))
                i += 1
        if index != last:
            out.append(b"/")
    return b"".join(out)


def validate_exclusions(value: Any, path: str = "exclusions") -> tuple[str, ...]:
    """The exclusion patterns in canonical form (sorted, without duplicates); FieldsInvalid
    naming every refused pattern otherwise."""
    errors = FieldErrors()
    if type(value) not in (list, tuple):
        errors.add(path, "must be a list of glob patterns")
        raise FieldsInvalid(errors.items)
    for index, pattern in enumerate(value):
        where = join_path(path, index)
        if string_field(errors, where, pattern) is None:
            continue
        if not pattern or "\x00" in pattern:
            errors.add(where, "must be a non-empty pattern without NUL")
            continue
        reason = _pattern_regex(pattern)
        if isinstance(reason, str):
            errors.add(where, reason)
    if errors.items:
        raise FieldsInvalid(errors.items)
    return tuple(sorted(set(value)))


def exclusions_digest(patterns: Iterable[str]) -> str:
    """The digest recorded beside every tree id: receipt("tree-exclusions", canonical list)."""
    return receipt("tree-exclusions", list(validate_exclusions(list(patterns))))


def directory_excluded(patterns: Sequence[str], path: str) -> bool:
    """Is the directory at relative `path` left out of the tree, whole, by `patterns` (itself
    or one of the directories above it excluded, as the walk never enters those)?"""
    exclusions = _Exclusions(validate_exclusions(list(patterns)))
    parts = path.encode().split(b"/")
    return any(exclusions.excludes(b"/".join(parts[:depth]), True)
               for depth in range(1, len(parts) + 1))


class PathMatcher:
    """Patterns in the exclusions' syntax, matched as the tree walk matches them: a file path
    matches when a pattern matches it or one of the directories above it."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self._exclusions = _Exclusions(validate_exclusions(list(patterns)))

    def matches(self, path: str) -> bool:
        raw = path.encode()
        return (self._exclusions.excludes(raw, False)
                or self._exclusions.excludes_a_directory_of(raw))


def environment_digest(trees: Mapping[str, str]) -> str:
    """The digest a run records for a profile's environment (governor/domain/profiles.py): the
    tree id of each declared directory, by its path."""
    return receipt("code-verification-environment", dict(sorted(trees.items())))


def environment_reference(ids: Mapping[str, str]) -> dict[str, Any] | None:
    """How a run names its environment: the digest and each directory's tree id, by path (None
    when the profile declares none)."""
    if not ids:
        return None
    return {"digest": environment_digest(ids), "trees": dict(sorted(ids.items()))}


class _Exclusions:
    def __init__(self, patterns: Sequence[str]) -> None:
        self.literal = frozenset(p.encode() for p in patterns)
        regexes = [_pattern_regex(p) for p in patterns]
        joined = b"|".join(b"(?:" + r + b")" for r in regexes if isinstance(r, bytes))
        self.glob = re.compile(joined, re.DOTALL) if joined else None
        # The glob matching up to a "/" of the path, wherever it ends: a directory of it.
        self.glob_directory = (re.compile(b"(?:" + joined + b")(?<=/)", re.DOTALL) if joined
                               else None)
        # The literal patterns as trees of names, walked along a path's directories.
        self.literal_tree: dict[bytes, Any] = {}
        for pattern in self.literal:
            node = self.literal_tree
            for name in pattern.split(b"/"):
                node = node.setdefault(name, {})
            node[b"/"] = True  # a pattern ends here ("/" is never a name)

    def excludes(self, path: bytes, is_directory: bool) -> bool:
        """Is `path` excluded? A directory is tested as git tests it, with a trailing "/"."""
        if path in self.literal:
            return True
        return self.glob is not None and self.glob.fullmatch(
            path + b"/" if is_directory else path) is not None

    def excludes_a_directory_of(self, path: bytes) -> bool:
        """Is any directory above `path` (a normalised relative path) excluded? The same answer
        as `excludes(directory, True)` for each of them, in one pass over the path: a test of
        every directory's own string would cost the path's depth times its length."""
        node, start = self.literal_tree, 0
        while node and (end := path.find(b"/", start)) >= 0:
            node = node.get(path[start:end], {})
            if b"/" in node:
                return True
            start = end + 1
        return self.glob_directory is not None and self.glob_directory.match(path) is not None


# --- names git refuses --------------------------------------------------------------------------


def _ntfs_dotgit(name: bytes) -> bool:
    """path.c is_ntfs_dotgit: ".git" or "git~1", then only spaces and periods, up to the end of
    the component, a backslash or a colon."""
    lower = name[:5].lower()
    if lower[:4] == b".git":
        rest = name[4:]
    elif lower == b"git~1":
        rest = name[5:]
    else:
        return False
    for byte in rest:
        if byte in b"/\\:":
            return True
        if byte not in b". ":
            return False
    return True


def _ntfs_dotgitmodules(name: bytes) -> bool:
    """path.c is_ntfs_dot_generic(name, "gitmodules", "gi7eba"): ".gitmodules", "gitmod~1".."~4"
    or an 8.3 fall-back short name "gi7eba~N", then only spaces and periods up to the end or a
    colon. `name` runs to the end of the path, as in C."""

    def only_spaces_and_periods(rest: bytes) -> bool:
        for byte in rest:
            if byte == ord(":"):
                return True
            if byte not in b". ":
                return False
        return True

    if name[:1] == b"." and name[1:11].lower() == b"gitmodules":
        return only_spaces_and_periods(name[11:])
    if name[:6].lower() == b"gitmod" and name[6:7] == b"~" and len(name) > 7 and (
            name[7:8] in b"1234"):
        return only_spaces_and_periods(name[8:])
    i, saw_tilde = 0, False
    while i < 8:
        if i >= len(name):
            return False
        byte = name[i]
        if saw_tilde:
            if not ord("0") <= byte <= ord("9"):
                return False
        elif byte == ord("~"):
            i += 1
            if i >= len(name) or not ord("1") <= name[i] <= ord("9"):
                return False
            saw_tilde = True
        elif i >= 6 or byte & 0x80 or bytes([byte]).lower() != b"gi7eba"[i:i + 1]:
            return False
        i += 1
    return only_spaces_and_periods(name[8:])


def _refusal(name: bytes, *, leaf: bool) -> tuple[bool, bool]:
    """(git refuses a path through this component whatever its mode, git refuses it when the
    path ends in a symlink) — read-cache.c verify_path_internal with core.protectNTFS on and
    core.protectHFS off, applied to one component. A directory's component is followed by "/"
    in the path, which ends some of git's scans where a leaf's would reach the end."""
    tail = b"" if leaf else b"/"
    starts = [0] + [i + 1 for i, byte in enumerate(name) if byte == ord("\\")]
    lower = name.lower()
    refused = lower == b".git" or any(_ntfs_dotgit(name[i:]) for i in starts)
    refused_for_symlink = lower == b".gitmodules" or any(
        _ntfs_dotgitmodules(name[i:] + tail) for i in starts)
    return refused, refused_for_symlink


# Where in a path `_refusal` can refuse a name, found by one search of the whole path: a name (or
# its part after a backslash) spelling .git or git~1, then only spaces and periods up to its end,
# a backslash or a colon; for a path ending in a symlink also a whole name .gitmodules, and
# .gitmodules, gitmod~1..4 or an 8.3 short name (a start of "gi7eba", "~", then digits up to the
# eighth character) then only spaces and periods up to a colon or the end of the path. Each finds
# at least every name `_refusal` refuses (tests/unit/test_tree.py holds them to it), so a path
# in which neither finds anything holds only names git takes.
_MAY_BE_REFUSED = re.compile(rb"(?<![^/\\])(?i:\.git|git~1)[. ]*(?:[/\\:]|\Z)")
_MAY_BE_REFUSED_FOR_SYMLINK = re.compile(
    rb"(?<![^/])(?i:\.gitmodules)(?![^/])|(?<![^/\\])(?i:\.gitmodules|gitmod~[1-4]|~[1-9][0-9]{6}"
    rb"|g~[1-9][0-9]{5}|gi~[1-9][0-9]{4}|gi7~[1-9][0-9]{3}|gi7e~[1-9][0-9]{2}|gi7eb~[1-9][0-9]"
    rb"|gi7eba~[1-9])[. ]*(?::|\Z)")


def refused_name(path: bytes, *, symlink: bool) -> bytes | None:
    """The first name of `path` (relative, "/"-separated) git refuses, for a path that ends in
    a symlink when `symlink`; None when git takes them all. One search of the whole path finds
    the only places `_refusal` could refuse, and `_refusal` decides each: the cost is the
    path's length however many names it holds (`_refusal` on every name costs microseconds a
    name)."""
    lower = path.lower()  # first whether the path can hold such a name at all: far faster
    if b".git" not in lower and b"git~1" not in lower and not (symlink and b"~" in path):
        return None
    starts = [match.start() for match in _MAY_BE_REFUSED.finditer(path)]
    if symlink:
        starts += [match.start() for match in _MAY_BE_REFUSED_FOR_SYMLINK.finditer(path)]
    for start in sorted(starts):
        begin = path.rfind(b"/", 0, start) + 1
        end = path.find(b"/", start)
        end = len(path) if end < 0 else end
        name = path[begin:end]
        refused, refused_for_symlink = _refusal(name, leaf=end == len(path))
        if refused or (symlink and refused_for_symlink):
            return name
    return None


# --- the stat cache -----------------------------------------------------------------------------


class DirectoryRecord(NamedTuple):
    """One directory as the last scan left it. `names` are the entries hashed, in git's order (a
    subdirectory's with a trailing "/"); `keys` holds, per entry, a file's stat key — None when
    it was not older than the scan's timestamp, so it is never trusted again — or a
    subdirectory's raw tree id (None when it holds nothing); `entries` a file's mode and raw blob
    id (None for a subdirectory); `tree` the directory's raw tree id (None when empty); `files`
    and `size` count its own files."""

    names: list[bytes]
    keys: list[StatKey | bytes | None]
    entries: list[tuple[bytes, bytes] | None]
    tree: bytes | None
    files: int
    size: int


@dataclass
class StatCache:
    """The stat cache of §10.4, kept by the server only: per directory of the last scan, the
    stat key of every file with its blob id, and the directory's tree id, reused whole when
    nothing in it changed. `stamp_dir` is a directory the server owns (never the workspace),
    best on the workspace's filesystem: a file created there gives each scan its timestamp."""

    stamp_dir: str
    directories: dict[bytes, DirectoryRecord] = field(default_factory=dict)

    def stamp(self) -> tuple[int, int]:
        """(device, mtime_ns) of a file created now in `stamp_dir`: the filesystem's own clock
        and granularity, as git takes them from its index file."""
        fd, name = tempfile.mkstemp(dir=self.stamp_dir, prefix=".tree-stamp-")
        try:
            info = os.fstat(fd)
        finally:
            os.close(fd)
            os.unlink(name)
        return info.st_dev, info.st_mtime_ns

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: directory path -> {names, keys, entries, tree, files, size}, bytes as
        text (names are UTF-8) or hex."""

        def key_json(key: StatKey | bytes | None) -> list[int] | str | None:
            return key.hex() if isinstance(key, bytes) else None if key is None else list(key)

        return {prefix.decode(): {
            "names": [name.decode() for name in record.names],
            "keys": [key_json(key) for key in record.keys],
            "entries": [None if entry is None else [entry[0].decode(), entry[1].hex()]
                        for entry in record.entries],
            "tree": None if record.tree is None else record.tree.hex(),
            "files": record.files, "size": record.size,
        } for prefix, record in self.directories.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, stamp_dir: str) -> StatCache:
        """The inverse of `as_dict`; ValueError naming the directory on anything malformed."""

        def key_of(key: Any) -> StatKey | bytes | None:
            if key is None:
                return None
            if isinstance(key, str):
                return _raw_id(key)
            if type(key) is not list or len(key) != 6 or any(type(n) is not int for n in key):
                raise ValueError("a key is not 6 integers, a tree id or null")
            return key[0], key[1], key[2], key[3], key[4], key[5]

        def entry_of(entry: Any) -> tuple[bytes, bytes] | None:
            if entry is None:
                return None
            if (type(entry) is not list or len(entry) != 2
                    or entry[0] not in ("100644", "100755", "120000")):
                raise ValueError("an entry is not [mode, blob id] or null")
            return entry[0].encode(), _raw_id(entry[1])

        directories = {}
        for prefix, row in data.items():
            try:
                names = [name.encode() for name in row["names"]]
                keys = [key_of(key) for key in row["keys"]]
                entries = [entry_of(entry) for entry in row["entries"]]
                tree = None if row["tree"] is None else _raw_id(row["tree"])
                files, size = int(row["files"]), int(row["size"])
                if not len(names) == len(keys) == len(entries):
                    raise ValueError("names, keys and entries differ in length")
            except (AttributeError, KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"stat cache directory {prefix!r}: {exc}") from None
            directories[prefix.encode()] = DirectoryRecord(names, keys, entries, tree, files,
                                                           size)
        return cls(stamp_dir=stamp_dir, directories=directories)


def _raw_id(text: Any) -> bytes:
    if type(text) is not str or not re.fullmatch(r"[0-9a-f]{64}", text):
        raise ValueError(f"{text!r} is not 64 hex digits")
    return bytes.fromhex(text)


# --- the tree -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tree:
    id: str  # gittree:sha256:<64 hex>
    exclusions_digest: str  # sha256:<64 hex>
    files: int  # regular files and symlinks
    size: int  # their bytes (a symlink's are its target's)
    files_read: int  # files and symlinks read from disk (the others came from the stat cache)
    directories: Mapping[bytes, DirectoryRecord] = field(repr=False)

    @cached_property
    def manifest(self) -> tuple[ManifestEntry, ...]:
        """Every file and symlink: path, mode, blob id, in `git ls-tree -r` order."""
        out: list[ManifestEntry] = []

        def visit(prefix: bytes) -> None:
            record = self.directories[prefix]
            for name, key, entry in zip(record.names, record.keys, record.entries, strict=True):
                if entry is not None:
                    out.append(ManifestEntry((prefix + name).decode(), entry[0].decode(),
                                             entry[1].hex()))
                elif key is not None:
                    visit(prefix + name)

        visit(b"")
        return tuple(out)


def tree_reference(tree: Tree) -> dict[str, str]:
    """How events name a tree: `{"id": "gittree:sha256:<hex>", "exclusions": <digest>}`."""
    return {"id": tree.id, "exclusions": tree.exclusions_digest}


_MANIFEST_MODES = frozenset({"100644", "100755", "120000"})
_BLOB_HEX = re.compile(r"[0-9a-f]{64}")


def manifest_tree_id(entries: Iterable[ManifestEntry]) -> str:
    """The tree id of a manifest (path, mode, blob id per file and symlink), built as git builds
    tree objects: one per directory, its entries `mode SP name NUL raw id` in git's order (a
    directory as if its name ended with "/"), a directory holding nothing absent. This is what
    `hash_tree` computes from the disk, so a third party can check an id from a manifest alone.
    Raises TreeError naming the entry for a path that is not relative and normalised, a mode git
    does not write for a file, a blob id that is not 64 lowercase hex, a duplicate path, or a
    path that is both a file and a directory."""
    root: dict[bytes, Any] = {}
    for path, mode, blob in entries:
        if type(path) is not str or not path or "\x00" in path:
            raise TreeError(str(path), "a manifest path must be a non-empty string without NUL")
        parts = path.split("/")
        if any(part in ("", ".", "..") for part in parts):
            raise TreeError(path, "a manifest path must be relative, without empty, '.' or "
                                  "'..' components")
        if mode not in _MANIFEST_MODES:
            raise TreeError(path, f"mode {mode!r} is not one of {sorted(_MANIFEST_MODES)}")
        if type(blob) is not str or not _BLOB_HEX.fullmatch(blob):
            raise TreeError(path, "the blob id must be 64 lowercase hex digits")
        node = root
        for part in parts[:-1]:
            child = node.setdefault(part.encode(), {})
            if not isinstance(child, dict):
                raise TreeError(path, "a path below a file")
            node = child
        name = parts[-1].encode()
        if name in node:
            raise TreeError(path, "a path listed twice, or both a file and a directory")
        node[name] = (mode.encode(), bytes.fromhex(blob))

    def tree_of(node: dict[bytes, Any]) -> bytes:
        records = []
        for name, value in node.items():
            if isinstance(value, dict):
                records.append((name + b"/", MODE_TREE + b" " + name + b"\0" + tree_of(value)))
            else:
                records.append((name, value[0] + b" " + name + b"\0" + value[1]))
        body = b"".join(record for _, record in sorted(records))
        return hashlib.sha256(b"tree %d\0" % len(body) + body).digest()

    return TREE_ID_PREFIX + tree_of(root).hex()


def _display(path: bytes) -> str:
    return path.decode("utf-8", "backslashreplace")


def _kind(mode: int) -> str:
    if S_ISFIFO(mode):
        return "a FIFO"
    if S_ISSOCK(mode):
        return "a socket"
    if S_ISCHR(mode) or S_ISBLK(mode):
        return "a device"
    return "not a regular file, symlink or directory"


def _key(info: os.stat_result) -> StatKey:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns,
            info.st_mode)


class _Walk:
    def __init__(self, *, exclusions: _Exclusions | None, cache: StatCache | None,
                 threshold: int, max_files: int, max_bytes: int, owner: int) -> None:
        self.owner = owner  # of the root directory: whose workspace it is
        self.exclusions = exclusions
        self.old = cache.directories if cache is not None else {}
        self.new: dict[bytes, DirectoryRecord] = {}
        self.threshold = threshold
        self.max_files = max_files
        self.max_bytes = max_bytes
        self.files = self.size = self.files_read = 0

    def count(self, path: bytes, files: int, size: int) -> None:
        self.files += files
        self.size += size
        if self.files > self.max_files:
            raise TreeError(_display(path), f"the workspace has more than max_files="
                                            f"{self.max_files} files (the project's limit)")
        if self.size > self.max_bytes:
            raise TreeError(_display(path), f"the workspace's files exceed max_bytes="
                                            f"{self.max_bytes} bytes (the project's limit)")

    def directory(self, fd: int, prefix: bytes, depth: int, symlinks_refused: bool) -> bytes | None:
        """The raw tree id of the open directory `fd`, None when it holds nothing. Every entry is
        listed and lstat-ed; when names and stat keys are those of the last scan, the last
        scan's record stands. This loop runs once per file at every turn-stop: it is kept lean."""
        listing: list[tuple[bytes, bytes, os.DirEntry[str] | None]] = []
        with os.scandir(fd) as scan:
            for dirent in scan:
                try:
                    name = dirent.name.encode()
                except UnicodeEncodeError:
                    raise TreeError(_display(prefix + os.fsencode(dirent.name)),
                                    "the name is not valid UTF-8") from None
                if dirent.is_dir(follow_symlinks=False):
                    listing.append((name + b"/", name, None))  # git sorts it so
                else:
                    listing.append((name, name, dirent))
        listing.sort()  # the sort keys are distinct: entries themselves are never compared
        names: list[bytes] = []
        keys: list[StatKey | bytes | None] = []
        exclusions = self.exclusions
        for sort_key, name, entry in listing:
            path = prefix + name
            if depth == 0 and name in SKIPPED_AT_TOP:
                continue
            if exclusions is not None and exclusions.excludes(path, entry is None):
                continue
            symlink_refused = symlinks_refused
            if name[0] in SUSPECT_FIRST_BYTES or b"\\" in name:
                symlink_refused |= self.check_name(name, path, entry is not None)
            if entry is None:
                keys.append(self.subdirectory(fd, name, path, depth, symlink_refused))
            else:
                info = entry.stat(follow_symlinks=False)
                if symlink_refused and S_ISLNK(info.st_mode):
                    raise TreeError(_display(path), "git refuses a symlink named or under "
                                                    ".gitmodules (under any spelling)")
                # Every entry, a file the cache would not read again included. A file read
                # later is the inode checked here: its stat key (ctime, which a new link or
                # owner moves, among it) must be unchanged after the read, or it is checked
                # again (`read`).
                if info.st_nlink > 1 and (refused := foreign_hard_link(info, self.owner)):
                    raise TreeError(_display(path), refused)
                keys.append((info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns,
                             info.st_ctime_ns, info.st_mode))
            names.append(sort_key)
        old = self.old.get(prefix)
        if old is not None and old.keys == keys and old.names == names:
            self.count(prefix, old.files, old.size)
            self.new[prefix] = old
            return old.tree
        return self.rebuild(fd, prefix, names, keys, old)

    def rebuild(self, fd: int, prefix: bytes, names: list[bytes],
                keys: list[StatKey | bytes | None], old: DirectoryRecord | None) -> bytes | None:
        """The record of a directory that changed: blob ids from the last scan where a file's
        stat key is unchanged, read from disk otherwise."""
        previous = dict(zip(old.names, zip(old.keys, old.entries, strict=True), strict=True)
                        ) if old is not None else {}
        records: list[bytes] = []
        kept: list[StatKey | bytes | None] = []
        entries: list[tuple[bytes, bytes] | None] = []
        files = size = 0
        for name, key in zip(names, keys, strict=True):
            if not isinstance(key, tuple):  # a subdirectory: its tree id, None when empty
                if key is not None:
                    records.append(MODE_TREE + b" " + name[:-1] + b"\0" + key)
                kept.append(key)
                entries.append(None)
                continue
            path = prefix + name
            self.count(path, 1, key[2])
            seen = previous.get(name)
            if S_ISREG(key[5]):
                if seen is not None and seen[0] == key and seen[1] is not None:
                    raw = seen[1][1]
                else:
                    raw, key = self.read(fd, name, path, key)
                mode = MODE_EXECUTABLE if key[5] & S_IXUSR else MODE_FILE
            elif S_ISLNK(key[5]):
                if seen is not None and seen[0] == key and seen[1] is not None:
                    raw = seen[1][1]
                else:
                    raw = self.symlink(fd, name, path, key)
                mode = MODE_SYMLINK
            else:
                raise TreeError(_display(path), f"is {_kind(key[5])}; only regular files and "
                                                f"symlinks can be hashed")
            records.append(mode + b" " + name + b"\0" + raw)
            trusted = key[3] < self.threshold and key[4] < self.threshold  # racy-clean
            kept.append(key if trusted else None)
            entries.append((mode, raw))
            files += 1
            size += key[2]
        body = b"".join(records)
        tree = hashlib.sha256(b"tree %d\0" % len(body) + body).digest() if body else None
        self.new[prefix] = DirectoryRecord(names, kept, entries, tree, files, size)
        return tree

    def check_name(self, name: bytes, path: bytes, leaf: bool) -> bool:
        """Refuse a nested .git and names git refuses; whether a symlink here or below is
        refused."""
        refused, refused_for_symlink = _refusal(name, leaf=leaf)
        if name == b".git":
            raise TreeError(_display(path), "a nested .git (another repository or a "
                                            "worktree's link) cannot be hashed")
        if refused:
            raise TreeError(_display(path), "git refuses this name (.git under another "
                                            "spelling)")
        return refused_for_symlink

    def subdirectory(self, parent: int, name: bytes, path: bytes, depth: int,
                     symlinks_refused: bool) -> bytes | None:
        if depth + 1 > MAX_DEPTH:
            raise TreeError(_display(path), f"is nested deeper than {MAX_DEPTH} directories")
        try:
            fd = os.open(name, OPEN_DIRECTORY, dir_fd=parent)
        except (FileNotFoundError, NotADirectoryError):
            raise TreeError(_display(path), CHANGED) from None
        except OSError as exc:
            raise TreeError(_display(path), f"cannot be opened ({exc.strerror})") from None
        try:
            return self.directory(fd, path + b"/", depth + 1, symlinks_refused)
        except PermissionError as exc:
            raise TreeError(_display(path), f"cannot be listed ({exc.strerror})") from None
        finally:
            os.close(fd)

    def read(self, parent: int, name: bytes, path: bytes, key: StatKey) -> tuple[bytes, StatKey]:
        """The raw blob id of a regular file and its stat key after reading; read a second time
        when the key changed during the first read, then refused."""
        for attempt in range(2):
            if attempt:
                try:
                    again = os.stat(name, dir_fd=parent, follow_symlinks=False)
                except FileNotFoundError:
                    raise TreeError(_display(path), CHANGED) from None
                if not S_ISREG(again.st_mode):
                    raise TreeError(_display(path), CHANGED)
                if refused := foreign_hard_link(again, self.owner):
                    raise TreeError(_display(path), refused)
                self.count(path, 0, again.st_size - key[2])
                key = _key(again)
            self.files_read += 1
            try:
                fd = os.open(name, OPEN_FILE, dir_fd=parent)
            except PermissionError as exc:
                raise TreeError(_display(path), f"cannot be read ({exc.strerror})") from None
            except OSError:
                continue  # deleted, or replaced by a symlink (ELOOP), since the lstat
            try:
                size = key[2]
                digest = hashlib.sha256(b"blob %d\0" % size)
                got = 0
                while got <= size:  # one byte past the size: a file that grew is caught
                    data = os.read(fd, min(READ_CHUNK, size + 1 - got))
                    if not data:
                        break
                    got += len(data)
                    digest.update(data)
                after = _key(os.fstat(fd))
            finally:
                os.close(fd)
            if got == size and after == key:
                return digest.digest(), key
        raise TreeError(_display(path), CHANGED + " (twice)")

    def symlink(self, parent: int, name: bytes, path: bytes, key: StatKey) -> bytes:
        self.files_read += 1
        try:
            target = os.readlink(name, dir_fd=parent)
            after = _key(os.stat(name, dir_fd=parent, follow_symlinks=False))
        except OSError:
            raise TreeError(_display(path), CHANGED) from None
        if after != key or len(target) != key[2]:
            raise TreeError(_display(path), CHANGED)
        return hashlib.sha256(b"blob %d\0" % len(target) + target).digest()


def _refuse_patterns_through_symlinks(root: int, patterns: Sequence[str]) -> None:
    """Git dies ("pathspec ... is beyond a symbolic link") when the leading components of a
    pattern, read literally, reach a symlink in the tree; the tree is refused as well."""
    for pattern in patterns:
        leading = pattern.encode().split(b"/")[:-1]
        opened: list[int] = []
        try:
            for depth, part in enumerate(leading):
                directory = opened[-1] if opened else root
                try:
                    info = os.stat(part, dir_fd=directory, follow_symlinks=False)
                except OSError:
                    break
                if S_ISLNK(info.st_mode):
                    raise TreeError(_display(b"/".join(leading[:depth + 1])),
                                    f"a symlink that the exclusion {pattern!r} passes through "
                                    f"(git refuses such a pathspec)")
                if not S_ISDIR(info.st_mode) or depth == len(leading) - 1:
                    break
                try:
                    opened.append(os.open(part, OPEN_DIRECTORY, dir_fd=directory))
                except OSError:
                    break
        finally:
            for fd in opened:
                os.close(fd)


def hash_tree(root: int | str, *, exclusions: Sequence[str] = (), cache: StatCache | None = None,
              max_files: int, max_bytes: int) -> Tree:
    """The tree at `root`: a directory descriptor (O_PATH is enough), or a canonical absolute
    path opened one component at a time without following symlinks. With a `cache`, files whose
    stat key is unchanged are not read, and the cache is replaced by this scan's records (it is
    left as it was when the hash fails). Raises TreeError, or FieldsInvalid for a refused
    exclusion pattern."""
    patterns = validate_exclusions(list(exclusions))
    if isinstance(root, str):
        try:
            handle = open_directory(root)
        except OSError as exc:
            raise TreeError("", f"the workspace {root!r} cannot be opened "
                                f"({exc.strerror})") from None
    else:
        handle = os.dup(root)
    try:
        fd = os.open(".", OPEN_DIRECTORY, dir_fd=handle)
    except OSError as exc:
        raise TreeError("", f"the workspace cannot be opened ({exc.strerror})") from None
    finally:
        os.close(handle)
    try:
        threshold = 0  # without a cache nothing is kept, so nothing is trusted
        if cache is not None:
            device, threshold = cache.stamp()
            if device != os.fstat(fd).st_dev:
                threshold -= FOREIGN_FILESYSTEM_MARGIN_NS
        _refuse_patterns_through_symlinks(fd, patterns)
        walk = _Walk(exclusions=_Exclusions(patterns) if patterns else None, cache=cache,
                     threshold=threshold, max_files=max_files, max_bytes=max_bytes,
                     owner=os.fstat(fd).st_uid)
        try:
            raw = walk.directory(fd, b"", 0, False)
        except PermissionError as exc:
            raise TreeError("", f"the workspace cannot be listed ({exc.strerror})") from None
    finally:
        os.close(fd)
    if cache is not None:
        cache.directories = walk.new
    if raw is None:
        raw = hashlib.sha256(b"tree 0\0").digest()
    return Tree(id=TREE_ID_PREFIX + raw.hex(), exclusions_digest=exclusions_digest(patterns),
                files=walk.files, size=walk.size, files_read=walk.files_read,
                directories=walk.new)

"""rules §4 rule 6: every file a check reads goes through `Workspace`.

A session is bound to a directory: its canonical path and its identity (device and inode),
recorded when the session is created. Nothing here resolves a path through the kernel's symlink
resolution. The root is opened one component at a time from "/", each relative to its parent
with O_NOFOLLOW, and must still have the recorded identity: a directory swapped for another, or
for a symlink (say to "/"), at any moment before the open is refused, and after the open the
swap no longer matters, because everything below is opened relative to that descriptor.

Below the root, a file is reached by walking its components relative to descriptors, following
symlinks by hand: a relative target is walked from the link's directory ("..", never above the
root), an absolute one only when it names a place under the root's path, and anything else fails
"outside workspace". The final entry is lstat-ed first (a FIFO or device is refused without
ever being opened — opening a FIFO can block), then opened with O_NOFOLLOW|O_NONBLOCK relative
to its directory and checked to be the inode that was lstat-ed. A regular file with more than
one link whose owner is not the workspace's owner (the root directory's) is refused before any
byte is read (`foreign_hard_link`).

rules §10.2: once `hash` has named the tree an attempt judges, the workspace is read only
through the descriptor that tree was hashed through, and every read is checked against it: a
file's blob id and mode, and each symlink's text on the way, must be the tree's entry, or the
read fails closed ("changed since the tree was hashed"); a path the tree does not hold fails
too, as "outside workspace" when a symlink led there (an excluded place, or `.git`).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    from governor.domain.tree import ManifestEntry, StatCache, Tree

READ_CHUNK = 65536
MAX_SYMLINK_HOPS = 40
# Directories are opened for walking only (O_PATH: search permission is enough), never through
# a symlink.
DIRECTORY_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
NOT_BOUND = ("the session's workspace is not its bound directory (missing, moved or replaced "
             "since the session was created)")
OUTSIDE = "outside workspace"
CHANGED = "changed since the workspace tree was hashed"
NOT_IN_TREE = ("is not in the workspace tree judged (it is excluded, or appeared after the tree "
               "was hashed)")


class WorkspaceError(Exception):
    """A file check cannot read what it needs; the message is the factual reason."""


def foreign_hard_link(info: os.stat_result, owner: int) -> str | None:
    """Why the server must not read the regular file `info` in a workspace whose root `owner`
    owns, or None. The server reads path workspaces with its own rights (root, or a user who can
    read its keys) and keeps what it reads in the blob store, where the session's token and
    reviewers read it back: a hard link to a file the workspace's owner does not own (say
    /etc/shadow, where fs.protected_hardlinks=0 lets anyone link it) would hand them its bytes.
    A file owned by the workspace's owner may have several links (a build tool's hard-linked
    cache): it is theirs to read anyway. The tree hash (`governor.domain.tree`) and every read
    here apply this one rule."""
    if info.st_nlink > 1 and info.st_uid != owner and stat.S_ISREG(info.st_mode):
        return (f"is a hard link ({info.st_nlink} links) to a file owned by uid {info.st_uid}, "
                f"not by the workspace's owner (uid {owner}): refused, as it may be a link to a "
                "file outside the workspace that its owner cannot read")
    return None


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISLNK(mode):
        return "an unresolvable symbolic link"
    return "not a regular file"


def open_directory(path: str) -> int:
    """An O_PATH descriptor of the directory at absolute `path`, opened one component at a time
    from "/", each relative to its parent with O_NOFOLLOW: a symlink anywhere fails (ENOTDIR or
    ELOOP), and no part of the path is resolved twice. Raises OSError."""
    if not os.path.isabs(path) or ".." in path.split("/"):
        raise OSError(errno.EINVAL, f"{path!r} is not a canonical absolute path")
    fd = os.open("/", DIRECTORY_FLAGS)
    try:
        for name in path.split("/"):
            if name in ("", "."):
                continue
            parent, fd = fd, -1
            try:
                fd = os.open(name, DIRECTORY_FLAGS, dir_fd=parent)
            finally:
                os.close(parent)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        raise
    return fd


def identity(fd: int) -> str:
    """The device and inode of an open file, as a session records its workspace."""
    info = os.fstat(fd)
    return f"{info.st_dev}:{info.st_ino}"


def identity_at(path: str) -> str:
    """The identity of the directory at canonical `path` (see `open_directory`)."""
    fd = open_directory(path)
    try:
        return identity(fd)
    finally:
        os.close(fd)


def open_bound_directory(path: str, recorded: str) -> int:
    """The session's workspace directory, opened by `open_directory` and checked to be the one
    recorded when the session was bound; raises WorkspaceError otherwise."""
    try:
        fd = open_directory(path)
    except OSError:
        raise WorkspaceError(NOT_BOUND) from None
    if not recorded or identity(fd) != recorded:
        os.close(fd)
        raise WorkspaceError(NOT_BOUND)
    return fd


class Workspace:
    """A session's workspace directory: its path and its recorded identity. Paths given to it
    are relative to `root`. After `hash`, it holds the bound directory open (close it, or use
    it as a context manager) and reads only the tree it hashed."""

    def __init__(self, root: str | os.PathLike[str], recorded_identity: str) -> None:
        self.root = os.fspath(root)
        self.recorded_identity = recorded_identity
        self.tree: Tree | None = None
        self._directory: int | None = None
        self._entries: dict[str, ManifestEntry] | None = None  # the tree's, by path, once read

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    @property
    def directory(self) -> int | None:
        """The bound directory's descriptor the tree was hashed through (None before `hash`)."""
        return self._directory

    def bind(self) -> int:
        """The bound directory's descriptor, opened (and its identity checked) now if `hash`
        has not opened it. Raises WorkspaceError."""
        if self._directory is None:
            self._directory = open_bound_directory(self.root, self.recorded_identity)
        return self._directory

    def close(self) -> None:
        if self._directory is not None:
            os.close(self._directory)
            self._directory = None

    def hash(self, *, exclusions: Sequence[str], cache: StatCache | None, max_files: int,
             max_bytes: int) -> Tree:
        """The tree of the bound directory (rules §10.1), hashed through its verified
        descriptor, which later reads use too; every read is checked against this tree.
        Raises WorkspaceError (not the bound directory), TreeError or FieldsInvalid."""
        from governor.domain.tree import hash_tree

        if self._directory is None:
            self._directory = open_bound_directory(self.root, self.recorded_identity)
        tree = hash_tree(self._directory, exclusions=exclusions, cache=cache,
                         max_files=max_files, max_bytes=max_bytes)
        self.tree, self._entries = tree, None
        return tree

    def _tree_entries(self) -> dict[str, ManifestEntry]:
        """The hashed tree's entries by path, built at the first read that needs them."""
        if self._entries is None:
            assert self.tree is not None
            self._entries = {entry.path: entry for entry in self.tree.manifest}
        return self._entries

    def _open_root(self) -> int:
        """A descriptor of the root: the one the tree was hashed through, else the bound
        directory opened now."""
        if self._directory is not None:
            return os.dup(self._directory)
        return open_bound_directory(self.root, self.recorded_identity)

    def _tree_entry(self, path: str, *, followed: bool) -> ManifestEntry:
        entry = self._tree_entries().get(path)
        if entry is None:
            raise WorkspaceError(OUTSIDE if followed else NOT_IN_TREE)
        return entry

    def _check_symlink(self, path: str, target: str) -> None:
        """A symlink on the way must be the tree's, with the tree's text."""
        if self.tree is None:
            return
        from governor.domain.tree import blob_id

        entry = self._tree_entries().get(path)
        if entry is None:
            raise WorkspaceError(f"the symlink {path} {NOT_IN_TREE}")
        if entry.mode != "120000" or entry.blob != blob_id(os.fsencode(target)):
            raise WorkspaceError(f"the symlink {path} {CHANGED}")

    def _check_file(self, path: str, followed: bool, data: bytes, mode: int) -> None:
        """What a read returned must be the tree's entry for the file: blob id and mode."""
        if self.tree is None:
            return
        from governor.domain.tree import blob_id

        entry = self._tree_entry(path, followed=followed)
        expected_mode = "100755" if mode & stat.S_IXUSR else "100644"
        if entry.mode != expected_mode or entry.blob != blob_id(data):
            raise WorkspaceError(CHANGED)

    def _segments(self, relative: str) -> list[str]:
        # Defence in depth: contracts are validated on creation (rule 4.2).
        if (
            not relative
            or "\x00" in relative
            or relative.startswith(("/", "\\"))
            or ".." in re.split(r"[/\\]", relative)
        ):
            raise WorkspaceError(f"{relative!r} is not a relative path inside the workspace")
        return [segment for segment in relative.split("/") if segment not in ("", ".")]

    def _under_root(self, target: str) -> list[str]:
        """The components of an absolute symlink target below the root's path."""
        if target != self.root and not target.startswith(self.root.rstrip("/") + "/"):
            raise WorkspaceError(OUTSIDE)
        return target[len(self.root):].split("/")

    def _walk(self, directories: list[int], segments: list[str], *,
              follow_last: bool) -> tuple[str, str, bool]:
        """Walk `segments` from the root (`directories` holds its descriptor and gets one per
        directory entered; the caller closes them) and return the name of the final entry in
        `directories[-1]`, its path from the root, and whether a symlink was followed on the
        way; symlinks are followed inside the tree (the last one only when `follow_last`).
        Raises FileNotFoundError when a directory on the way is missing."""
        pending, hops = list(reversed(segments)), 0
        where: list[str] = []  # the names of the directories entered, below the root
        followed = False

        def here(name: str) -> str:
            return "/".join([*where, name]) if name != "." else "/".join(where)

        while pending:
            name = pending.pop()
            if name in ("", "."):
                if not pending:
                    return ".", here("."), followed
                continue
            if name == "..":
                if len(directories) == 1:
                    raise WorkspaceError(OUTSIDE)
                os.close(directories.pop())
                where.pop()
                if not pending:
                    return ".", here("."), followed
                continue
            last = not pending
            try:
                info = os.stat(name, dir_fd=directories[-1], follow_symlinks=False)
            except (FileNotFoundError, NotADirectoryError):
                if last:
                    return name, here(name), followed
                raise FileNotFoundError(name) from None
            if stat.S_ISLNK(info.st_mode) and (follow_last or not last):
                hops += 1
                if hops > MAX_SYMLINK_HOPS:
                    raise WorkspaceError("has too many levels of symbolic links")
                target = os.readlink(name, dir_fd=directories[-1])
                self._check_symlink(here(name), target)
                followed = True
                if target.startswith("/"):
                    pending += reversed(self._under_root(target))
                    while len(directories) > 1:
                        os.close(directories.pop())
                    where.clear()
                else:
                    pending += reversed(target.split("/"))
                continue
            if last:
                return name, here(name), followed
            if not stat.S_ISDIR(info.st_mode):
                raise FileNotFoundError(name)
            try:
                directories.append(os.open(name, DIRECTORY_FLAGS, dir_fd=directories[-1]))
            except OSError:
                raise WorkspaceError("changed while it was being read") from None
            where.append(name)
        return ".", here("."), followed

    def entry_present(self, relative: str) -> bool:
        """Is there any directory entry at `relative`? The final component is not followed, so a
        dangling symlink counts as present; the directories leading to it must stay inside the
        workspace."""
        segments = self._segments(relative)
        directories = [self._open_root()]
        try:
            name, path, followed = self._walk(directories, segments, follow_last=False)
            info = os.stat(name, dir_fd=directories[-1], follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            named = "/".join(segments)
            if self.tree is not None and any(  # the tree holds it, or something below it
                    held == named or held.startswith(named + "/")
                    for held in self._tree_entries()):
                raise WorkspaceError(CHANGED) from None
            return False
        finally:
            for fd in directories:
                os.close(fd)
        if self.tree is not None and not stat.S_ISDIR(info.st_mode):
            entry = self._tree_entry(path, followed=followed)
            if (entry.mode == "120000") != stat.S_ISLNK(info.st_mode):
                raise WorkspaceError(CHANGED)
        return True

    def read_bytes(self, relative: str, *, max_bytes: int) -> bytes:
        """The content of a regular file of at most `max_bytes` bytes."""
        segments = self._segments(relative)
        directories = [self._open_root()]
        try:
            owner = os.fstat(directories[0]).st_uid
            try:
                name, path, followed = self._walk(directories, segments, follow_last=True)
                before = os.stat(name, dir_fd=directories[-1], follow_symlinks=False)
            except (FileNotFoundError, NotADirectoryError):
                raise WorkspaceError("not found") from None
            if not stat.S_ISREG(before.st_mode):
                raise WorkspaceError(f"is {_kind_of(before.st_mode)}, not a regular file")
            if before.st_size > max_bytes:
                raise WorkspaceError(f"is {before.st_size} bytes, over the {max_bytes}-byte limit")
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
            try:
                fd = os.open(name, flags, dir_fd=directories[-1])
            except (FileNotFoundError, NotADirectoryError):
                raise WorkspaceError("was deleted before it could be read") from None
            except OSError as exc:
                raise WorkspaceError(f"could not be opened ({exc.strerror})") from None
        finally:
            for directory in directories:
                os.close(directory)
        try:
            opened = os.fstat(fd)
            if (opened.st_dev, opened.st_ino) != (before.st_dev, before.st_ino) or not stat.S_ISREG(
                opened.st_mode
            ):
                raise WorkspaceError("changed while it was being read")
            if opened.st_nlink == 0:
                raise WorkspaceError("was deleted while it was being read")
            refused = foreign_hard_link(opened, owner)  # the inode read, before any byte is
            if refused:
                raise WorkspaceError(refused)
            chunks: list[bytes] = []
            remaining = max_bytes + 1  # one byte more tells us the file grew past the limit
            while remaining > 0:
                chunk = os.read(fd, min(READ_CHUNK, remaining))
                if not chunk:
                    break
                chunks.append(chunk)
                remaining -= len(chunk)
        finally:
            os.close(fd)
        data = b"".join(chunks)
        if len(data) > max_bytes:
            raise WorkspaceError(f"grew over the {max_bytes}-byte limit while being read")
        self._check_file(path, followed, data, opened.st_mode)
        return data

    def link_text(self, relative: str) -> bytes:
        """The text of the symlink at `relative`, never followed, checked against the tree."""
        segments = self._segments(relative)
        directories = [self._open_root()]
        try:
            try:
                name, path, _followed = self._walk(directories, segments, follow_last=False)
                target = os.readlink(name, dir_fd=directories[-1])
            except (FileNotFoundError, NotADirectoryError):
                raise WorkspaceError("not found") from None
            except OSError as exc:
                raise WorkspaceError(f"is not a symlink ({exc.strerror})") from None
        finally:
            for directory in directories:
                os.close(directory)
        self._check_symlink(path, target)
        return os.fsencode(target)

    def read_text(self, relative: str, *, max_bytes: int) -> str:
        """Rule 4.6: a regular file of at most `max_bytes`, strict UTF-8 (a BOM is kept as
        content), without NUL."""
        data = self.read_bytes(relative, max_bytes=max_bytes)
        nul = data.find(b"\x00")
        if nul >= 0:
            raise WorkspaceError(f"contains a NUL byte at offset {nul}")
        try:
            return data.decode("utf-8", errors="strict")  # "utf-8", not "utf-8-sig": BOM stays
        except UnicodeDecodeError as exc:
            raise WorkspaceError(f"is not valid UTF-8 (byte offset {exc.start})") from None

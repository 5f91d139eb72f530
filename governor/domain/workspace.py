"""SEMANTICS §4 rule 6: every file a check reads goes through `Workspace`.

Containment is decided on the canonical path (all symlinks resolved), so a link inside the
workspace that points inside is followed and one that points outside fails "outside workspace".

Why resolve-then-verify rather than walking with openat/O_NOFOLLOW: links *inside* the workspace
must be followed, so O_NOFOLLOW on every component would refuse legitimate layouts. Instead we
resolve with realpath, check containment, lstat the resolved path (so a FIFO or device is refused
without ever being opened — opening a FIFO can block), open it with O_NOFOLLOW|O_NONBLOCK, and
then verify the opened descriptor is the same inode we checked and, through /proc/self/fd, that
it still lies inside the root. A swap of any path component between the checks is caught by one
of those two comparisons.
"""

from __future__ import annotations

import os
import re
import stat

READ_CHUNK = 65536


class WorkspaceError(Exception):
    """A file check cannot read what it needs; the message is the factual reason."""


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


class Workspace:
    """A session's workspace directory. Paths given to it are relative to `root`."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.fspath(root)

    def _bound_root(self) -> str:
        """The root, which must still be the canonical directory the session was bound to: a
        directory later swapped for a symlink would otherwise carry every check outside."""
        if not os.path.isabs(self.root) or os.path.realpath(self.root) != self.root:
            raise WorkspaceError("the session's workspace is not its bound directory (missing, "
                                 "moved or replaced by a link)")
        return self.root

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

    def _inside(self, real: str) -> bool:
        return real == self.root or os.path.commonpath([self.root, real]) == self.root

    def resolve(self, relative: str) -> str:
        """The canonical absolute path of `relative`, refused when it leaves the workspace."""
        real = os.path.realpath(os.path.join(self._bound_root(), *self._segments(relative)))
        if not self._inside(real):
            raise WorkspaceError("outside workspace")
        return real

    def entry_present(self, relative: str) -> bool:
        """Is there any directory entry at `relative`? The final component is not followed, so a
        dangling symlink counts as present; the directories leading to it are resolved and must
        stay inside the workspace."""
        segments = self._segments(relative)
        if not segments:
            return True
        parent = os.path.realpath(os.path.join(self._bound_root(), *segments[:-1]))
        if not self._inside(parent):
            raise WorkspaceError("outside workspace")
        try:
            os.lstat(os.path.join(parent, segments[-1]))
        except (FileNotFoundError, NotADirectoryError):
            return False
        return True

    def read_bytes(self, relative: str, *, max_bytes: int) -> bytes:
        """The content of a regular file of at most `max_bytes` bytes."""
        real = self.resolve(relative)
        try:
            before = os.lstat(real)
        except (FileNotFoundError, NotADirectoryError):
            raise WorkspaceError("not found") from None
        if not stat.S_ISREG(before.st_mode):
            raise WorkspaceError(f"is {_kind_of(before.st_mode)}, not a regular file")
        if before.st_size > max_bytes:
            raise WorkspaceError(f"is {before.st_size} bytes, over the {max_bytes}-byte limit")
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(real, flags)
        except (FileNotFoundError, NotADirectoryError):
            raise WorkspaceError("was deleted before it could be read") from None
        except OSError as exc:
            raise WorkspaceError(f"could not be opened ({exc.strerror})") from None
        try:
            opened = os.fstat(fd)
            if (opened.st_dev, opened.st_ino) != (before.st_dev, before.st_ino) or not stat.S_ISREG(
                opened.st_mode
            ):
                raise WorkspaceError("changed while it was being read")
            if opened.st_nlink == 0:
                raise WorkspaceError("was deleted while it was being read")
            self._verify_descriptor(fd)
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
        return data

    def _verify_descriptor(self, fd: int) -> None:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return  # no /proc: the inode comparison above is the remaining guard
        if not self._inside(target):
            raise WorkspaceError("outside workspace")

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

"""The directories the client keeps its own files in — a workspace's `.governor/` and the
snapshot state in the user's cache — opened so that nothing is read or written anywhere but
where it appears to be.

A workspace is the agent's, and whoever wrote it: a cloned repository can carry a `.governor/`
with symlinks in it (git refuses to check out only `.git`), and a file opened by its path
follows them. So the directory is opened once, `O_NOFOLLOW | O_DIRECTORY` relative to a
descriptor of its parent (a symlink planted at `.governor` itself is refused), and every file in
it relative to that descriptor with `O_NOFOLLOW`: a symlink planted at one of its files is
refused, never followed, and `O_CREAT` never makes what a dangling one names. `O_NONBLOCK` keeps
a planted FIFO from hanging the open, and only a regular file is used. A file written whole goes
to a fresh name made `O_EXCL`, then is renamed over the old one in the same directory: a rename
replaces a symlink, never what it points to.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from governor_client.errors import StateUnusable

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = _NOFOLLOW | os.O_NONBLOCK
FILE_MODE = 0o600


class StateDir:
    """An open directory of the client's files: every name is an entry of it, never a path."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path  # for messages, and for git, which is given paths
        self.fd = fd

    def _not_a_file(self, name: str) -> StateUnusable:
        return StateUnusable(f"{self.path / name} is not a file of governor-agent's (a symlink, "
                             "a directory or a FIFO): remove it, and governor-agent makes it again")

    def open(self, name: str, flags: int) -> int:
        """A descriptor of the regular file `name`, made (0600) when `flags` hold O_CREAT."""
        try:
            fd = os.open(name, flags | _FILE, FILE_MODE, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EISDIR):
                raise self._not_a_file(name) from None
            raise
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise self._not_a_file(name)
        return fd

    def read_text(self, name: str) -> str | None:
        """The text of `name`; None when there is no such file."""
        try:
            fd = self.open(name, os.O_RDONLY)
        except FileNotFoundError:
            return None
        with os.fdopen(fd, encoding="utf-8") as handle:
            return handle.read()

    def append(self, name: str) -> BinaryIO:
        return os.fdopen(self.open(name, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "ab")

    def create(self, name: str, text: str) -> None:
        """Write `name` unless something of that name is there already (left as it is)."""
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _FILE, FILE_MODE,
                         dir_fd=self.fd)
        except FileExistsError:
            return
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)

    def replace(self, name: str, text: str) -> None:
        """Write `name` whole, atomically: a fresh file renamed over the old one."""
        temporary = f".{name}-{secrets.token_hex(8)}"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _FILE, FILE_MODE,
                     dir_fd=self.fd)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(temporary, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary, dir_fd=self.fd)
            raise

    def remove(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)


@contextmanager
def open_state_dir(parent: Path, name: str, *, create: bool,
                   mode: int = 0o777) -> Iterator[StateDir]:
    """The directory `name` in `parent`, open until the block ends; made (with `mode`, less the
    umask) when it is absent and `create` says so, else FileNotFoundError. A `name` that is a
    symlink or not a directory is refused (StateUnusable), never followed."""
    parent_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, mode, dir_fd=parent_fd)
        try:
            fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=parent_fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise StateUnusable(f"{parent / name} is not a directory of its own (a symlink "
                                    "or a file): remove it, and governor-agent makes it "
                                    "again") from None
            raise
    finally:
        os.close(parent_fd)
    try:
        yield StateDir(parent / name, fd)
    finally:
        os.close(fd)

"""SEMANTICS §11.3: a kept tree written into a private directory, for file checks and runs on a
machine that shares no disk with the agent.

Files come from this machine's blob cache (`var/blob-cache/<project id>/<blob id>`, plus `.x`
for the executable variant; mode 0444 or 0555, written whole and renamed into place), filled
from the blob store on a miss (every blob read from the store is checked against its id). A
tree that nothing will write (file checks, `read-only` runs) is made of hard links to the cache;
a tree a `workspace-write` run may write is made of private copies, so no write can reach the
cache. Symlinks are created as symlinks holding their text: nothing is followed while the tree
is written (every directory is opened relative to its parent with O_NOFOLLOW, every name is a
single component of a path the snapshot rules already checked), and whoever reads the tree
afterwards follows links inside it only (governor/domain/workspace.py). The private directory
lives under `var/materialised/` (0700) and is deleted when the caller is done.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

from governor.domain.tree import ManifestEntry
from governor.services.blobs import blob_read

# A writable tree belongs to the sandbox's host identity when the worker is root (the sandbox's
# `run_as`, verification/sandbox.py NOBODY), so a `workspace-write` run may change any file of
# its private copy.
SANDBOX_OWNER = (65534, 65534)
OPEN_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MODE_EXECUTABLE, MODE_SYMLINK = "100755", "120000"


def _private_directory(name: str) -> Path:
    directory = Path(settings.VAR_DIR) / name
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    return directory


def blob_cached(project_id: int, blob: str, *, executable: bool) -> str:
    """The path of the blob in this machine's cache, fetched from the store when missing."""
    directory = _private_directory("blob-cache") / str(project_id)
    directory.mkdir(mode=0o700, exist_ok=True)
    path = directory / (blob + (".x" if executable else ""))
    if not path.exists():
        data = blob_read(project_id, blob)
        fd, partial = tempfile.mkstemp(dir=directory, prefix=".fetch-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.chmod(partial, 0o555 if executable else 0o444)
            os.replace(partial, path)
        except BaseException:
            if os.path.exists(partial):
                os.unlink(partial)
            raise
    return str(path)


def _write_entry(project_id: int, root: int, entry: ManifestEntry, *, copy: bool,
                 directory_mode: int, owner: tuple[int, int] | None) -> None:
    parts = entry.path.split("/")
    fds = [root]
    try:
        for part in parts[:-1]:
            created = True
            try:
                os.mkdir(part, 0o700, dir_fd=fds[-1])
            except FileExistsError:
                created = False
            fds.append(os.open(part, OPEN_DIRECTORY, dir_fd=fds[-1]))
            if created:
                os.fchmod(fds[-1], directory_mode)
                if owner is not None:
                    os.fchown(fds[-1], *owner)
        parent, name = fds[-1], parts[-1]
        if entry.mode == MODE_SYMLINK:
            os.symlink(blob_read(project_id, entry.blob), name.encode(), dir_fd=parent)
            if owner is not None:
                os.chown(name, *owner, dir_fd=parent, follow_symlinks=False)
            return
        executable = entry.mode == MODE_EXECUTABLE
        cached = blob_cached(project_id, entry.blob, executable=executable)
        if not copy:
            try:
                os.link(cached, name, dst_dir_fd=parent, follow_symlinks=False)
                return
            except OSError as exc:
                if exc.errno not in (errno.EXDEV, errno.EMLINK, errno.EPERM):
                    raise
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, 0o600, dir_fd=parent)
        with os.fdopen(fd, "wb") as target, open(cached, "rb") as source:
            os.fchmod(target.fileno(), 0o755 if executable else 0o644)
            if owner is not None:
                os.fchown(target.fileno(), *owner)
            shutil.copyfileobj(source, target)
    finally:
        for fd in fds[1:]:
            os.close(fd)


@contextmanager
def materialised(project_id: int, manifest: Sequence[ManifestEntry], *,
                 writable: bool = False) -> Iterator[str]:
    """A private directory holding exactly `manifest`, deleted on exit. `writable`: private
    copies the sandbox user owns (for `workspace-write` runs, whose writes are discarded with
    the directory); otherwise hard links to the blob cache."""
    root = tempfile.mkdtemp(dir=_private_directory("materialised"), prefix="tree-")
    owner = SANDBOX_OWNER if writable and os.geteuid() == 0 else None
    try:
        os.chmod(root, 0o755)  # noqa: S103 - only reachable through var/ (0700)
        if owner is not None:
            os.chown(root, *owner)
        fd = os.open(root, OPEN_DIRECTORY)
        try:
            for entry in manifest:
                _write_entry(project_id, fd, ManifestEntry(*entry), copy=writable,
                             directory_mode=0o755, owner=owner)
        finally:
            os.close(fd)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)

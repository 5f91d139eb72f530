"""A kept tree written into a private directory: what every run executes on (rules §10.2:
never the agent's directory), and what a snapshot session's file checks read (§11.3), on any
machine, whether or not it shares a disk with the agent.

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

`tree_changes_apply` carries what a `workspace-write` run changed in its private copy back to a
path session's workspace, by the same rules (nothing followed, each file renamed into place).

The cache is bounded by GOVERNOR_BLOB_CACHE_BYTES: after each materialisation the least
recently used blobs are evicted until it fits. "Used" is when a tree linking the blob was last
made or removed, or a copy last taken (the inode's ctime, which each of these moves); a blob a
materialised tree still links (link count above 1) is never evicted — evicting would free
nothing anyway, as the tree keeps the bytes whatever happens to the cache's name.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

from governor.domain.tree import ManifestEntry
from governor.lib.blobstore import blob_read

# A writable tree belongs to the sandbox's host identity when the worker is root (the sandbox's
# `run_as`, verification/sandbox.py NOBODY), so a `workspace-write` run may change any file of
# its private copy.
SANDBOX_OWNER = (65534, 65534)
log = logging.getLogger(__name__)
OPEN_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MODE_EXECUTABLE, MODE_SYMLINK = "100755", "120000"


def _private_directory(name: str) -> Path:
    directory = Path(settings.VAR_DIR) / name
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    return directory


def _cache_directory(project_id: int) -> Path:
    directory = _private_directory("blob-cache") / str(project_id)
    directory.mkdir(mode=0o700, exist_ok=True)
    return directory


def blob_cached(project_id: int, blob: str, *, executable: bool,
                directory: Path | None = None) -> str:
    """The path of the blob in this machine's cache (`directory`, the project's, when the
    caller has it), fetched from the store when missing."""
    directory = directory or _cache_directory(project_id)
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


def blob_cache_trim(limit: int | None = None) -> dict[str, int]:
    """Evict the least recently used blobs no materialised tree links until the cache holds at
    most `limit` bytes (GOVERNOR_BLOB_CACHE_BYTES); {"evicted", "bytes"} (what is left)."""
    limit = settings.GOVERNOR_BLOB_CACHE_BYTES if limit is None else limit
    total, evictable = 0, []
    for project in os.scandir(_private_directory("blob-cache")):
        if not project.is_dir(follow_symlinks=False):
            continue
        for entry in os.scandir(project.path):
            try:
                info = entry.stat(follow_symlinks=False)
            except FileNotFoundError:  # evicted by another worker process meanwhile
                continue
            total += info.st_size
            if info.st_nlink == 1 and not entry.name.startswith(".fetch-"):
                evictable.append((info.st_ctime_ns, info.st_size, entry.path))
    evicted = 0
    for _used, size, path in sorted(evictable):
        if total <= limit:
            break
        try:
            os.unlink(path)
        except FileNotFoundError:  # another worker process evicted it
            continue
        except OSError as exc:  # the next blob may go instead; the run goes on either way
            log.warning("blob cache: %s cannot be evicted: %s", path, exc)
            continue
        total, evicted = total - size, evicted + 1
    return {"evicted": evicted, "bytes": total}


class _TreeWriter:
    """Writes manifest entries below an open directory. Directories are entered through a
    stack of descriptors, each created (mode 0755, owned by `owner`) and opened once while the
    entries below it come one after another, as a manifest lists them."""

    def __init__(self, project_id: int, root: int, *, copy: bool,
                 owner: tuple[int, int] | None) -> None:
        self.project_id, self.copy, self.owner = project_id, copy, owner
        self.cache = _cache_directory(project_id)
        self.stack: list[tuple[str, int]] = [("", root)]

    def close(self) -> None:
        while len(self.stack) > 1:
            os.close(self.stack.pop()[1])

    def _directory(self, path: str) -> int:
        """The open directory at `path` ("" is the root), entered or created without following
        a link (every name is one component of a path the manifest rules already checked)."""
        while len(self.stack) > 1 and not (path + "/").startswith(self.stack[-1][0] + "/"):
            os.close(self.stack.pop()[1])
        have = self.stack[-1][0]
        rest = path[len(have):].lstrip("/")
        for part in rest.split("/") if rest else ():
            parent = self.stack[-1][1]
            created = True
            try:
                os.mkdir(part, 0o700, dir_fd=parent)
            except FileExistsError:
                created = False
            fd = os.open(part, OPEN_DIRECTORY, dir_fd=parent)
            self.stack.append((f"{self.stack[-1][0]}/{part}".lstrip("/"), fd))
            if created:
                os.fchmod(fd, 0o755)
                if self.owner is not None:
                    os.fchown(fd, *self.owner)
        return self.stack[-1][1]

    def write(self, entry: ManifestEntry) -> None:
        directory, _, name = entry.path.rpartition("/")
        parent = self._directory(directory)
        if entry.mode == MODE_SYMLINK:
            os.symlink(blob_read(self.project_id, entry.blob), name.encode(), dir_fd=parent)
            if self.owner is not None:
                os.chown(name, *self.owner, dir_fd=parent, follow_symlinks=False)
            return
        executable = entry.mode == MODE_EXECUTABLE
        for attempt in range(2):  # another worker process may evict it between fetch and use
            cached = blob_cached(self.project_id, entry.blob, executable=executable,
                                 directory=self.cache)
            try:
                _place(cached, parent, name, copy=self.copy, executable=executable,
                       owner=self.owner)
                return
            except FileNotFoundError:
                if attempt:
                    raise


def _place(cached: str, parent: int, name: str, *, copy: bool, executable: bool,
           owner: tuple[int, int] | None) -> None:
    """Link `cached` in as `name`, or copy it (a writable tree, or no link possible)."""
    if not copy:
        try:
            os.link(cached, name, dst_dir_fd=parent, follow_symlinks=False)
            return
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.EMLINK, errno.EPERM):
                raise
    with open(cached, "rb") as source:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, 0o600, dir_fd=parent)
        with os.fdopen(fd, "wb") as target:
            os.fchmod(target.fileno(), 0o755 if executable else 0o644)
            if owner is not None:
                os.fchown(target.fileno(), *owner)
            shutil.copyfileobj(source, target)
    try:  # a copy is a use too: its ctime moves (times kept as they are), as a link's does
        info = os.stat(cached)
        os.utime(cached, ns=(info.st_atime_ns, info.st_mtime_ns))
    except FileNotFoundError:  # evicted since: the copy is whole all the same
        pass


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
        writer = _TreeWriter(project_id, fd, copy=writable, owner=owner)
        try:
            for entry in manifest:
                writer.write(ManifestEntry(*entry))
        finally:
            writer.close()
            os.close(fd)
        blob_cache_trim()  # this tree's blobs are linked (or copied) by now: never evicted
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _open_parent(root: int, parts: Sequence[str], *, create: bool,
                 owner: tuple[int, int] | None) -> int:
    """The directory holding `parts[-1]` below `root`, entered one component at a time without
    following a link (created, 0755 and owned by `owner`, where `create` and missing)."""
    fd = os.dup(root)
    try:
        for part in parts[:-1]:
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                    if owner is not None:
                        os.chown(part, *owner, dir_fd=fd, follow_symlinks=False)
                except FileExistsError:
                    pass
            parent, fd = fd, -1
            try:
                fd = os.open(part, OPEN_DIRECTORY, dir_fd=parent)
            finally:
                os.close(parent)
        return fd
    except BaseException:
        if fd >= 0:
            os.close(fd)
        raise


def _copy_entry(source: int, target: int, entry: ManifestEntry,
                owner: tuple[int, int] | None) -> None:
    """Write `entry` from the tree at `source` to the directory at `target`: under a temporary
    name, then renamed over whatever is there (a file, never a directory)."""
    parts = entry.path.split("/")
    source_parent = _open_parent(source, parts, create=False, owner=None)
    target_parent = _open_parent(target, parts, create=True, owner=owner)
    name, temporary = parts[-1], f".governor-change-{os.urandom(8).hex()}"
    try:
        if entry.mode == MODE_SYMLINK:
            os.symlink(os.readlink(name, dir_fd=source_parent), temporary, dir_fd=target_parent)
            if owner is not None:
                os.chown(temporary, *owner, dir_fd=target_parent, follow_symlinks=False)
        else:
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
            reader = os.open(name, flags, dir_fd=source_parent)
            try:
                writer = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                                 | os.O_CLOEXEC, 0o600, dir_fd=target_parent)
                try:
                    while os.sendfile(writer, reader, None, 1 << 20):
                        pass
                    os.fchmod(writer, 0o755 if entry.mode == MODE_EXECUTABLE else 0o644)
                    if owner is not None:
                        os.fchown(writer, *owner)
                finally:
                    os.close(writer)
            finally:
                os.close(reader)
        try:
            os.rename(temporary, name, src_dir_fd=target_parent, dst_dir_fd=target_parent)
        except OSError:
            os.unlink(temporary, dir_fd=target_parent)
            raise
    finally:
        os.close(source_parent)
        os.close(target_parent)


def tree_changes_apply(source: int, target: int, before: Sequence[ManifestEntry],
                       after: Sequence[ManifestEntry]) -> None:
    """Make the directory open as `target` (a path session's workspace) hold what a run changed
    between `before` and `after` in its private copy open as `source`: every entry added or
    changed is copied over (a temporary file renamed into place, owned by the workspace's
    owner when the worker is root), every entry removed is unlinked. Nothing is followed on the
    way in either tree. Raises OSError when the workspace no longer fits (a directory where a
    file goes, say): what was applied stays, and the caller fails the run."""
    was = {entry[0]: tuple(entry) for entry in before}
    now = {entry[0]: tuple(entry) for entry in after}
    info = os.fstat(target)
    owner = (info.st_uid, info.st_gid) if os.geteuid() == 0 else None
    for path in sorted(was.keys() - now.keys()):
        parts = path.split("/")
        try:
            parent = _open_parent(target, parts, create=False, owner=None)
        except FileNotFoundError:
            continue
        try:
            os.unlink(parts[-1], dir_fd=parent)
        except FileNotFoundError:
            pass
        finally:
            os.close(parent)
    for path, entry in sorted(now.items()):
        if was.get(path) != entry:
            _copy_entry(source, target, ManifestEntry(*entry), owner)

"""What a `workspace-write` run may write in total, and that it changes the workspace only when
it passes.

A root worker gives such a run an overlay of the workspace instead of the workspace itself: the
workspace, opened by descriptor and checked (see `_child_setup` in verification/sandbox.py), is
the read-only lower layer; every change goes to an upper layer on a tmpfs of
GOVERNOR_RUN_WRITE_BYTES, private to the run's mount namespace. A run that writes more fails
with "No space left on device" and the workspace never saw any of it. Whole files count: a
change to an existing file copies all of it up first. The tmpfs is memory, charged to the run's
cgroup, so the run's memory bounds it as well.

Only when the command passes are its changes applied to the workspace, by `apply_changes`, one
entry at a time: each file is written under a temporary name and renamed into place (never
through a link or a hard link into something else), a directory is entered only by descriptor
without following a link, a whiteout removes the entry, an opaque directory replaces the one
below. Owners, modes and modification times are those the sandbox left; FIFOs and sockets are
not carried over. What the agent changes in the workspace at the same moment can make the apply
fail half-way (it cannot make it write outside the workspace); the run then fails as
`infrastructure`, saying so.

A worker that is not root cannot mount the overlay: its `workspace-write` runs write the
workspace directly, with per-file `fileBytes` as the only bound (said once in the log).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import stat
import uuid

CHANGES_OPTIONS = "redirect_dir=off,index=off,metacopy=off"
OPAQUE = "trusted.overlay.opaque"
DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
COPY_CHUNK = 1 << 20

_libc = ctypes.CDLL(None, use_errno=True)


def checked(result: int, what: str) -> None:
    if result != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"{what}: {os.strerror(number)}")


def mount_overlay(lower: int, changes: str, merged: str, write_bytes: int) -> None:
    """In the run's own mount namespace (as root): a tmpfs of `write_bytes` at `changes` for the
    upper layer, and the overlay of the directory open as `lower` at `merged`."""
    options = f"size={write_bytes},mode=0700".encode()
    checked(_libc.mount(b"tmpfs", changes.encode(), b"tmpfs", 0, options), "tmpfs")
    # The merged root takes its owner and mode from the upper layer's root: the workspace's.
    workspace = os.fstat(lower)
    os.mkdir(f"{changes}/upper", 0o700)
    os.chown(f"{changes}/upper", workspace.st_uid, workspace.st_gid)
    os.chmod(f"{changes}/upper", stat.S_IMODE(workspace.st_mode))
    os.mkdir(f"{changes}/work", 0o700)
    layers = (f"lowerdir=/proc/self/fd/{lower},upperdir={changes}/upper,"
              f"workdir={changes}/work,{CHANGES_OPTIONS}")
    checked(_libc.mount(b"overlay", merged.encode(), b"overlay", 0, layers.encode()),
             "overlay")


def _remove(directory: int, name: str) -> None:
    try:
        info = os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(info.st_mode):
        shutil.rmtree(name, dir_fd=directory)  # by descriptor, never through a link
    else:
        os.unlink(name, dir_fd=directory)


def _opaque(directory: int) -> bool:
    try:
        return os.getxattr(directory, OPAQUE) == b"y"
    except OSError:
        return False


def _attributes(fd: int, info: os.stat_result) -> None:
    os.fchown(fd, info.st_uid, info.st_gid)
    os.fchmod(fd, stat.S_IMODE(info.st_mode))


def _copy(upper: int, target: int, name: str, temporary: str, info: os.stat_result) -> None:
    source = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=upper)
    try:
        copy = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                       | os.O_CLOEXEC, 0o600, dir_fd=target)
        try:
            while os.sendfile(copy, source, None, COPY_CHUNK):
                pass
            _attributes(copy, info)
            os.utime(copy, ns=(info.st_atime_ns, info.st_mtime_ns))
        finally:
            os.close(copy)
    finally:
        os.close(source)


def apply_changes(upper: int, target: int) -> None:
    """Apply the upper layer open as `upper` to the directory open as `target`."""
    for entry in os.scandir(upper):
        name = entry.name
        info = os.stat(name, dir_fd=upper, follow_symlinks=False)
        if stat.S_ISCHR(info.st_mode) and info.st_rdev == 0:  # a whiteout: removed
            _remove(target, name)
        elif stat.S_ISDIR(info.st_mode):
            _apply_directory(upper, target, name, info)
        elif stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
            temporary = f".governor-change-{uuid.uuid4().hex}"
            if stat.S_ISREG(info.st_mode):
                _copy(upper, target, name, temporary, info)
            else:
                os.symlink(os.readlink(name, dir_fd=upper), temporary, dir_fd=target)
                os.chown(temporary, info.st_uid, info.st_gid, dir_fd=target,
                         follow_symlinks=False)
            try:
                with contextlib.suppress(FileNotFoundError):
                    if stat.S_ISDIR(os.stat(name, dir_fd=target, follow_symlinks=False).st_mode):
                        _remove(target, name)
                os.rename(temporary, name, src_dir_fd=target, dst_dir_fd=target)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=target)
                raise


def _apply_directory(upper: int, target: int, name: str, info: os.stat_result) -> None:
    source = os.open(name, DIRECTORY, dir_fd=upper)
    try:
        try:
            existing = os.stat(name, dir_fd=target, follow_symlinks=False)
        except FileNotFoundError:
            existing = None
        if existing is not None and (not stat.S_ISDIR(existing.st_mode) or _opaque(source)):
            _remove(target, name)
            existing = None
        if existing is None:
            os.mkdir(name, 0o700, dir_fd=target)
        inner = os.open(name, DIRECTORY, dir_fd=target)
        try:
            _attributes(inner, info)
            apply_changes(source, inner)
        finally:
            os.close(inner)
    finally:
        os.close(source)

"""A held-out suite's bytes on the way in and out (rules §18.1, §18.2): the entries of a
directory or an uploaded archive, read without following a link, for `parse_suite` to judge;
and the run's private copy of a suite's files, mounted read-only at /governor-heldout."""

from __future__ import annotations

import io
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

from governor.domain.heldout import MAX_FILE_BYTES, MAX_FILES, MAX_SUITE_BYTES, SuiteError

Entry = tuple[str, str, bytes]  # (path, mode, bytes): mode 100644, 100755, or why not a file
LINK, OTHER = "120000", "000000"


def _over_caps(count: int, total: int) -> None:
    if count > MAX_FILES + 1:
        raise SuiteError([{"path": "(files)", "message": f"more than {MAX_FILES:,} files"}])
    if total > MAX_SUITE_BYTES:
        raise SuiteError([{"path": "(files)", "message": f"more than {MAX_SUITE_BYTES:,} bytes "
                                                         "in all"}])


def directory_entries(root: str | Path) -> list[Entry]:
    """Every entry below `root`, by path: regular files with their bytes (executable or not),
    links and other entries with no bytes (refused by name when the suite is parsed). Reading
    stops at the caps, so a huge directory is refused without being read."""
    root = Path(root)
    if not root.is_dir():
        raise SuiteError([{"path": str(root), "message": "is not a directory"}])
    entries: list[Entry] = []
    total = 0
    for directory, subdirectories, files in os.walk(root, followlinks=False):
        subdirectories.sort()
        for name in [*sorted(files), *[d for d in subdirectories
                                        if os.path.islink(os.path.join(directory, d))]]:
            path = Path(directory, name)
            relative = path.relative_to(root).as_posix()
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                entries.append((relative, LINK, b""))
            elif not stat.S_ISREG(info.st_mode):
                entries.append((relative, OTHER, b""))
            elif info.st_size > MAX_FILE_BYTES:
                entries.append((relative, "100644", b"\0" * (MAX_FILE_BYTES + 1)))
            else:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                with os.fdopen(fd, "rb") as handle:
                    data = handle.read(MAX_FILE_BYTES + 1)
                mode = "100755" if info.st_mode & stat.S_IXUSR else "100644"
                entries.append((relative, mode, data))
                total += len(data)
            _over_caps(len(entries), total)
    return entries


def archive_entries(name: str, data: bytes) -> list[Entry]:
    """The entries of an uploaded archive (.tar, .tar.gz, .tgz or .zip) of a suite's directory:
    a leading "./" is dropped, and when every entry lies under one top directory, that
    directory is the suite. Links and special entries are kept by name, to be refused."""
    try:
        entries = _zip_entries(data) if name.endswith(".zip") else _tar_entries(data)
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, OSError) as exc:
        raise SuiteError([{"path": name, "message": f"is not a readable .tar, .tar.gz or .zip "
                                                    f"archive ({exc})"}]) from None
    return _one_top_directory_dropped(entries)


def _tar_entries(data: bytes) -> list[Entry]:
    entries: list[Entry] = []
    total = 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
        for member in archive:
            path = member.name.removeprefix("./")
            if member.isdir() or not path:
                continue
            if member.issym() or member.islnk():
                entries.append((path, LINK, b""))
            elif not member.isreg():
                entries.append((path, OTHER, b""))
            elif member.size > MAX_FILE_BYTES:
                entries.append((path, "100644", b"\0" * (MAX_FILE_BYTES + 1)))
            else:
                handle = archive.extractfile(member)
                content = handle.read() if handle is not None else b""
                entries.append((path, "100755" if member.mode & 0o100 else "100644", content))
                total += len(content)
            _over_caps(len(entries), total)
    return entries


def _zip_entries(data: bytes) -> list[Entry]:
    entries: list[Entry] = []
    total = 0
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for info in archive.infolist():
            path = info.filename.removeprefix("./")
            if info.is_dir() or not path:
                continue
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                entries.append((path, LINK, b""))
            elif mode and not stat.S_ISREG(mode):
                entries.append((path, OTHER, b""))
            elif info.file_size > MAX_FILE_BYTES:
                entries.append((path, "100644", b"\0" * (MAX_FILE_BYTES + 1)))
            else:
                with archive.open(info) as handle:
                    content = handle.read(MAX_FILE_BYTES + 1)
                entries.append((path, "100755" if mode & 0o100 else "100644", content))
                total += len(content)
            _over_caps(len(entries), total)
    return entries


def _one_top_directory_dropped(entries: Sequence[Entry]) -> list[Entry]:
    tops = {path.split("/", 1)[0] for path, _mode, _data in entries}
    if len(tops) != 1 or any("/" not in path for path, _mode, _data in entries):
        return list(entries)
    return [(path.split("/", 1)[1], mode, data) for path, mode, data in entries]


@contextmanager
def heldout_directory(files: Sequence[Entry] | None) -> Iterator[str | None]:
    """A new directory holding a suite's files (None when the run mounts none), readable and
    never writable by the sandbox user, removed after the run. The run binds it read-only at
    /governor-heldout; it is the run's own, so no other run or agent reaches it."""
    if files is None:
        yield None
        return
    parent = Path(settings.VAR_DIR) / "heldout"
    parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    root = tempfile.mkdtemp(dir=parent, prefix="suite-")
    try:
        for path, mode, data in files:
            target = Path(root, path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            target.chmod(0o555 if mode == "100755" else 0o444)
        for directory, _subdirectories, _files in os.walk(root):
            os.chmod(directory, 0o555)  # noqa: S103 - the sandbox user reads, nobody writes
        yield root
    finally:
        for directory, _subdirectories, _files in os.walk(root):
            os.chmod(directory, 0o700)
        shutil.rmtree(root, ignore_errors=True)

"""rules §17.3: which runner-control sections a change's content touches, read from the kept
blobs of the two trees (the contract-start tree and the attempt's)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from governor.domain.changes import MODE_SYMLINK, WorkspaceChange
from governor.domain.runner_control import changed_sections, sections_at
from governor.lib.blobstore import blob_read
from governor.lib.errors import ServiceError


class _Unreadable(Exception):
    pass


def _content(project_id: int, entry: Sequence[str] | None) -> bytes | None:
    """A file's bytes in a tree (None: not there). A symlink is judged by no target, and a
    blob the store cannot give back is not judged either: both are unreadable."""
    if entry is None:
        return None
    if entry[1] == MODE_SYMLINK:
        raise _Unreadable
    try:
        return blob_read(project_id, entry[2])
    except ServiceError:
        raise _Unreadable from None


def sections_read(project_id: int, start: Iterable[Sequence[str]],
                  attempt: Iterable[Sequence[str]],
                  changes: Sequence[WorkspaceChange]) -> list[WorkspaceChange]:
    """`changes` with the runner-control sections each one's content changed: only a path a
    section entry covers is read (both sides), and one that cannot be read changed every
    section it could hold."""
    covered = [change for change in changes if sections_at(change.path)]
    if not covered:
        return list(changes)
    paths = {change.path for change in covered}
    before = {entry[0]: entry for entry in start if entry[0] in paths}
    after = {entry[0]: entry for entry in attempt if entry[0] in paths}
    read: dict[str, tuple[str, ...]] = {}
    for change in covered:
        try:
            old = _content(project_id, before.get(change.path))
            new = _content(project_id, after.get(change.path))
        except _Unreadable:
            read[change.path] = tuple(sections_at(change.path))
            continue
        read[change.path] = tuple(changed_sections(change.path, old, new))
    return [replace(change, sections=read[change.path]) if change.path in read else change
            for change in changes]

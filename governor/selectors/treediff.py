"""Issue 14 item 6: the changes a reviewer sees between a session's contract-start tree and the
tree judged, and a file of a kept tree, read from the blob store."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from governor.domain.tree import TREE_ID_PREFIX, ManifestEntry
from governor.domain.treediff import Change, as_text, manifest_changes, unified_diff
from governor.lib.blobstore import blob_read
from governor.lib.errors import Invalid, NotFound, ServiceError
from governor.models import Blob, Event, Session, Snapshot, WorkspaceTree

DIFFED_FILES = 20  # files shown with their diff; the rest are listed
DIFF_LINES = 200  # per file
DIFF_BLOB_BYTES = 256 * 1024  # larger files are shown by their sizes


@dataclass(frozen=True)
class ShownChange:
    change: Change
    sizes: tuple[int | None, int | None]
    diff: str | None  # a unified diff, or None: binary, too large, or not kept
    cut_lines: int
    note: str  # why no diff is shown, when none is


@dataclass(frozen=True)
class TreeChanges:
    before: str
    after: str
    changes: list[ShownChange]
    total: int  # changed paths, shown or not


def _tree(session: Session, tree_id: Any) -> WorkspaceTree:
    """A kept tree the session named (a contract start, an attempt, a run, a snapshot); another
    session's or an unknown one is a 404."""
    if type(tree_id) is not str or not tree_id.startswith(TREE_ID_PREFIX):
        raise Invalid("tree: must be a tree id gittree:sha256:<64 hex>",
                      details=[{"path": "tree", "message": "must be gittree:sha256:<64 hex>"}])
    named = (Snapshot.objects.filter(session=session, tree__tree_id=tree_id).exists()
             or Event.objects.filter(session=session, data__contains=f'"{tree_id}"').exists())
    record = (WorkspaceTree.objects.filter(project_id=session.project_id, tree_id=tree_id)
              .order_by("-created_at").first()) if named else None
    if record is None:
        raise NotFound(f"tree {tree_id} is not a tree of session {session.pk}")
    return record


def tree_file(session: Session, tree_id: Any, path: str) -> tuple[ManifestEntry, bytes]:
    """The entry and the bytes of `path` in a kept tree of the session (a symlink: its text)."""
    record = _tree(session, tree_id)
    entry = next((ManifestEntry(*e) for e in record.manifest if e[0] == path), None)
    if entry is None:
        raise NotFound(f"{path!r} is not a file of tree {tree_id}")
    if not Blob.objects.filter(project_id=session.project_id, blob_id=entry.blob).exists():
        raise NotFound(f"the content of {path!r} in tree {tree_id} was not kept")
    return entry, blob_read(session.project_id, entry.blob)


def _sizes(project_id: int, changes: list[Change]) -> dict[str, int]:
    blobs = {entry.blob for change in changes for entry in (change.before, change.after)
             if entry is not None}
    sizes: dict[str, int] = {}
    ids = sorted(blobs)
    for start in range(0, len(ids), 500):
        sizes |= dict(Blob.objects.filter(project_id=project_id,
                                          blob_id__in=ids[start:start + 500])
                      .values_list("blob_id", "size"))
    return sizes


def tree_changes(session: Session, before: str, after: str, *, diffed: int = DIFFED_FILES,
                 listed: int | None = None) -> TreeChanges:
    """What changed from `before` to `after` (trees the session's contract and attempts named,
    as `session_status` reports them): the first `listed`
    changed paths (all when None), the first `diffed` of them with a capped unified diff when
    both sides are kept text, the others by size."""
    # Both named by the session's own contract and attempts: one query, no lookup of who named
    # them (a fixed number of queries whatever the trees hold, besides blob sizes per 500).
    kept = {record.tree_id: record for record in WorkspaceTree.objects.filter(
        project_id=session.project_id, tree_id__in=[before, after]).order_by("created_at")}
    if before not in kept or after not in kept:
        raise NotFound(f"tree {before if before not in kept else after} was not kept")
    old, new = kept[before], kept[after]
    every = manifest_changes(old.manifest, new.manifest)
    changes = every if listed is None else every[:listed]
    sizes = _sizes(session.project_id, changes)
    shown = []
    for index, change in enumerate(changes):
        pair = tuple(None if e is None else sizes.get(e.blob) for e in (change.before,
                                                                          change.after))
        diff, cut, note = None, 0, ""
        if index >= diffed:
            note = "not diffed here"
        elif any(e is not None and e.blob not in sizes for e in (change.before, change.after)):
            note = "content not kept"
        elif any(size is not None and size > DIFF_BLOB_BYTES for size in pair):
            note = "too large to diff"
        else:
            try:
                texts = [b"" if e is None else blob_read(session.project_id, e.blob)
                         for e in (change.before, change.after)]
            except ServiceError as exc:
                note = exc.message
            else:
                a, b = as_text(texts[0]), as_text(texts[1])
                if a is None or b is None:
                    note = "binary"
                else:
                    diff, cut = unified_diff(change.path, a, b, max_lines=DIFF_LINES)
        shown.append(ShownChange(change, (pair[0], pair[1]), diff, cut, note))
    return TreeChanges(old.tree_id, new.tree_id, shown, len(every))


def kept_manifest(project_id: int, reference: Any) -> list[list[str]] | None:
    """The manifest of a kept tree named by its reference `{"id", "exclusions"}` (None when it
    is not kept, or `reference` is none)."""
    if not isinstance(reference, dict):
        return None
    manifest: list[list[str]] | None = (
        WorkspaceTree.objects.filter(project_id=project_id, tree_id=reference.get("id"),
                                     exclusions_digest=reference.get("exclusions"))
        .values_list("manifest", flat=True).first())
    return manifest


def kept_manifests(project_id: int, references: Sequence[Any]) -> dict[tuple[str, str], Any]:
    """The manifests of the kept trees `references` name, in one query: by (id, exclusions)."""
    keys = {(ref["id"], ref["exclusions"]) for ref in references
            if isinstance(ref, dict) and "id" in ref and "exclusions" in ref}
    rows = WorkspaceTree.objects.filter(project_id=project_id,
                                        tree_id__in={tree for tree, _ in keys})
    return {(tree, digest): manifest for tree, digest, manifest in
            rows.values_list("tree_id", "exclusions_digest", "manifest")
            if (tree, digest) in keys}

"""Issue 14 item 6: the changes a reviewer sees between a session's contract-start tree and the
tree judged, and a file of a kept tree, read from the blob store; (rules §17.3) which
runner-control sections a change's content touches, read from the kept blobs of both trees; and
(§17.5) the changes the tamper scan reads."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from html import escape
from typing import Any

from governor.domain.changes import MODE_SYMLINK, WorkspaceChange, workspace_changes
from governor.domain.runner_control import changed_sections, sections_at
from governor.domain.tree import TREE_ID_PREFIX, ManifestEntry
from governor.domain.treediff import (
    Change,
    DiffLine,
    as_text,
    manifest_changes,
    text_diff,
    with_renames,
)
from governor.lib.blobstore import blob_read
from governor.lib.errors import Invalid, NotFound, ServiceError
from governor.lib.highlight import highlighted_lines
from governor.models import Blob, Event, Session, Snapshot, WorkspaceTree
from governor.models import Change as GatedChange

DIFFED_FILES = 20  # files shown with their diff; the rest are listed
DIFF_LINES = 2000  # diff lines shown per file; the file view holds the rest
PAGE_DIFF_LINES = 5000  # diff lines shown on one page in all; later files are listed by size
SIZES_PER_QUERY = 10_000  # blob ids per query (SQLite takes 32,766 parameters, PostgreSQL 65,535)
COLLAPSED_LINES = 300  # a diff longer than this is collapsed behind a "show" control
DIFF_BLOB_BYTES = 256 * 1024  # larger files are shown by their sizes
NOT_DIFFED = "not diffed here"  # past the page's caps: listed, and viewed on its own page


@dataclass(frozen=True)
class ShownLine:
    kind: str  # "context" | "added" | "removed"
    old: int | None
    new: int | None
    html: str  # the line's text, highlighted and escaped

    @property
    def spot(self) -> str:
        """Where a comment on it points: "o<old number>" for a removed line, else "n<new>"."""
        return f"o{self.old}" if self.kind == "removed" else f"n{self.new}"


@dataclass(frozen=True)
class ShownHunk:
    header: str
    lines: list[ShownLine]
    rows: list[tuple[ShownLine | None, ShownLine | None]]


@dataclass(frozen=True)
class ShownChange:
    change: Change  # kind "renamed" when a removed file's blob reappears at another path
    sizes: tuple[int | None, int | None]
    hunks: list[ShownHunk] | None  # the diff, or None: binary, too large, or not kept
    cut_lines: int
    note: str  # why no diff is shown, when none is
    added: int = 0  # lines
    removed: int = 0
    anchor: str = ""

    @property
    def sectioned(self) -> bool:
        """Whether the page gives it a section of its own (a diff, or why there is none);
        a file past the page's caps is a row of the file list only."""
        return self.note != NOT_DIFFED

    @property
    def large(self) -> bool:
        return sum(len(hunk.lines) for hunk in self.hunks or []) > COLLAPSED_LINES


@dataclass(frozen=True)
class TreeChanges:
    before: str
    after: str
    changes: list[ShownChange]
    total: int  # changed paths, shown or not

    @property
    def sections(self) -> list[ShownChange]:
        return [shown for shown in self.changes if shown.sectioned]

    @property
    def added(self) -> int:
        return sum(shown.added for shown in self.changes)

    @property
    def removed(self) -> int:
        return sum(shown.removed for shown in self.changes)


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def _diffed(path: str, before: str, after: str) -> tuple[list[ShownHunk], int, int, int]:
    """The hunks of the change from `before` to `after` with every line highlighted, at most
    DIFF_LINES lines of them; with the added and removed line counts and the lines cut off."""
    old, new = _lines(before), _lines(after)
    marked: list[list[str]] = [list(highlighted_lines(path, text)) for text in (before, after)]
    shown_old, shown_new = (html if len(html) == len(lines) else [escape(line) for line in lines]
                            for html, lines in zip(marked, (old, new), strict=True))
    diff = text_diff(old, new)

    def line(item: DiffLine) -> ShownLine:
        html = shown_new[item.new - 1] if item.new is not None else shown_old[(item.old or 1) - 1]
        return ShownLine(item.kind, item.old, item.new, html)

    hunks, budget, cut = [], DIFF_LINES, 0
    for hunk in diff.hunks:
        kept = hunk.lines[:max(budget, 0)]
        cut += len(hunk.lines) - len(kept)
        budget -= len(hunk.lines)
        if not kept:
            continue
        made = {id(item): line(item) for item in kept}  # in unified order
        rows = [(made.get(id(a)), made.get(id(b))) for a, b in hunk.rows]
        hunks.append(ShownHunk(hunk.header, list(made.values()),
                               [row for row in rows if row[0] is not None or row[1] is not None]))
    return hunks, diff.added, diff.removed, cut


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
    for start in range(0, len(ids), SIZES_PER_QUERY):
        sizes |= dict(Blob.objects.filter(project_id=project_id,
                                          blob_id__in=ids[start:start + SIZES_PER_QUERY])
                      .values_list("blob_id", "size"))
    return sizes


def tree_changes(session: Session | GatedChange, before: str, after: str, *,
                 diffed: int = DIFFED_FILES,
                 listed: int | None = None) -> TreeChanges:
    """What changed from `before` to `after` (trees the session's contract and attempts named,
    as `session_status` reports them): the first `listed`
    changed paths (all when None), the first `diffed` of them with a capped unified diff when
    both sides are kept text, the others by size."""
    # Both named by the session's own contract and attempts: one query, no lookup of who named
    # them (a fixed number of queries whatever the trees hold, up to SIZES_PER_QUERY blobs).
    kept = {record.tree_id: record for record in WorkspaceTree.objects.filter(
        project_id=session.project_id, tree_id__in=[before, after]).order_by("created_at")}
    if before not in kept or after not in kept:
        raise NotFound(f"tree {before if before not in kept else after} was not kept")
    old, new = kept[before], kept[after]
    every = with_renames(manifest_changes(old.manifest, new.manifest))
    changes = every if listed is None else every[:listed]
    sizes = _sizes(session.project_id, changes)
    shown, page_lines = [], 0
    for index, change in enumerate(changes):
        pair = tuple(None if e is None else sizes.get(e.blob) for e in (change.before,
                                                                          change.after))
        hunks, cut, note, added, removed = None, 0, "", 0, 0
        if change.kind == "renamed" and change.before is not None and change.after is not None \
                and change.before.blob == change.after.blob:
            note = "renamed, content unchanged"
        elif index >= diffed or page_lines >= PAGE_DIFF_LINES:
            note = NOT_DIFFED
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
                    hunks, added, removed, cut = _diffed(change.path, a, b)
                    page_lines += sum(len(hunk.lines) for hunk in hunks)
        shown.append(ShownChange(change, (pair[0], pair[1]), hunks, cut, note, added, removed,
                                 f"file-{index + 1}"))
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


def changes_read(project_id: int, base: Iterable[Sequence[str]],
                 manifest: Iterable[Sequence[str]]) -> list[WorkspaceChange]:
    """Rules §14.1 and §17.3: every path whose entry differs between the kept tree `base` (the
    contract-start tree, or the session's reference) and `manifest`, with the runner-control
    sections each one's content changed."""
    base, manifest = list(base), list(manifest)
    return sections_read(project_id, base, manifest, workspace_changes(base, manifest))


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

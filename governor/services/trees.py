"""SEMANTICS §10: the workspace tree a session's attempt, contract start or run is bound to.

The tree is hashed through the session's `Workspace` (its verified descriptor) with a stat cache
kept per session under the server's var directory (`tree-cache/<session id>.json`, mode 0600,
replaced atomically; a missing or unreadable cache is only a cold hash), and every hashed tree's
manifest is kept once per (project, tree id, exclusions digest) in `WorkspaceTree`."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings

from governor.domain.fields import FieldsInvalid
from governor.domain.tree import StatCache, Tree, TreeError, validate_exclusions
from governor.domain.workspace import Workspace, WorkspaceError, identity_at
from governor.models import Project, Session, WorkspaceKind, WorkspaceTree
from governor.services.blobs import blob_store_bytes, blobs_touch
from governor.services.errors import Invalid, ServiceError, Unavailable
from governor.services.materialise import MODE_SYMLINK, materialised
from governor.services.snapshots import snapshot_by_tree, snapshot_current, snapshot_latest

log = logging.getLogger(__name__)


class TreeUnavailable(Exception):
    """The workspace cannot be hashed completely; the message says why (the path named)."""


def tree_reference(tree: Tree) -> dict[str, str]:
    """How events name a tree: `{"id": "gittree:sha256:<hex>", "exclusions": <digest>}`."""
    return {"id": tree.id, "exclusions": tree.exclusions_digest}


def _cache_directory() -> Path:
    return Path(settings.VAR_DIR) / "tree-cache"


def _cache_path(session: Session) -> Path:
    return _cache_directory() / f"{session.pk}.json"


def stat_cache_load(session: Session) -> StatCache:
    """The session's stat cache; empty (a cold hash) when it is missing or unreadable."""
    directory = _cache_directory()
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        data = json.loads(_cache_path(session).read_bytes())
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return StatCache.from_dict(data, stamp_dir=str(directory))
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as exc:
        log.warning("session %s: the stat cache is not usable, hashing cold: %s", session.pk, exc)
    return StatCache(stamp_dir=str(directory))


def stat_cache_save(session: Session, cache: StatCache) -> None:
    """Replace the session's stat cache atomically (a new file of mode 0600, renamed). A cache
    that cannot be written only makes the next hash cold: it is logged, not raised."""
    try:
        fd, name = tempfile.mkstemp(dir=_cache_directory(), prefix=".cache-", suffix=".json")
    except OSError as exc:
        log.warning("session %s: the stat cache cannot be written: %s", session.pk, exc)
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(cache.as_dict(), handle, separators=(",", ":"))
        os.replace(name, _cache_path(session))
    except OSError as exc:
        os.unlink(name)
        log.warning("session %s: the stat cache cannot be written: %s", session.pk, exc)
    except BaseException:
        os.unlink(name)
        raise


def tree_record(project: Project, tree: Tree,
                exclusions: list[str]) -> tuple[WorkspaceTree, bool]:
    """The tree's manifest, written once per (project, tree id, exclusions digest); built only
    when it is written (then True)."""
    return WorkspaceTree.objects.get_or_create(
        project=project, tree_id=tree.id, exclusions_digest=tree.exclusions_digest,
        defaults={"exclusions": exclusions, "files": tree.files, "bytes": tree.size,
                  "manifest": lambda: [list(entry) for entry in tree.manifest]})


def session_tree(session: Session, workspace: Workspace) -> Tree:
    """Hash the session's workspace through `workspace` (which then reads only this tree), with
    the project's exclusions and limits, and record its manifest. Raises TreeUnavailable.
    A snapshot session's workspace is a materialised snapshot (`session_workspace`): hashed
    without a stat cache, and it must hash to the snapshot's id."""
    if isinstance(workspace, SnapshotWorkspace):
        return _snapshot_tree(session, workspace)
    project = session.project
    try:
        exclusions = list(validate_exclusions(project.tree_exclusions, "tree_exclusions"))
        cache = stat_cache_load(session)
        loaded = dict(cache.directories)
        tree = workspace.hash(exclusions=exclusions, cache=cache,
                              max_files=project.tree_max_files,
                              max_bytes=project.tree_max_bytes)
    except (TreeError, WorkspaceError, FieldsInvalid) as exc:
        raise TreeUnavailable(f"the workspace tree cannot be hashed: {exc}") from None
    # A scan that changed nothing keeps every loaded record: writing them again is skipped.
    if cache.directories.keys() != loaded.keys() or any(
            record is not loaded[prefix] for prefix, record in cache.directories.items()):
        stat_cache_save(session, cache)
    if tree_record(project, tree, exclusions)[1]:
        tree_blobs_keep(project, tree, workspace)
    return tree


def tree_blobs_keep(project: Project, tree: Tree, workspace: Workspace) -> None:
    """§11 "the server keeps the trees it judges": store the blobs of a newly recorded path
    tree the project's store lacks, read through the descriptor it was hashed through (each read
    checked against the tree). A blob that cannot be kept is logged: the verdict stands, only
    its replay from the store would be missing that file."""
    manifest = tree.manifest
    present = blobs_touch(project, {entry.blob for entry in manifest})
    for entry in manifest:
        if entry.blob in present:
            continue
        try:
            if entry.mode == MODE_SYMLINK:
                data = workspace.link_text(entry.path)
            else:
                data = workspace.read_bytes(entry.path, max_bytes=settings.GOVERNOR_MAX_BLOB_BYTES)
            blob_store_bytes(project, entry.blob, data)
        except (WorkspaceError, ServiceError) as exc:
            log.warning("tree %s: blob %s of %r is not kept: %s", tree.id, entry.blob,
                        entry.path, exc)
            continue
        present.add(entry.blob)


class SnapshotWorkspace(Workspace):
    """A snapshot materialised privately: the tree it must hash to is `expected`."""

    def __init__(self, root: str, identity: str, expected: WorkspaceTree) -> None:
        super().__init__(root, identity)
        self.expected = expected


def _snapshot_tree(session: Session, workspace: SnapshotWorkspace) -> Tree:
    expected = workspace.expected
    try:
        tree = workspace.hash(exclusions=expected.exclusions, cache=None,
                              max_files=session.project.tree_max_files,
                              max_bytes=session.project.tree_max_bytes)
    except (TreeError, WorkspaceError) as exc:
        raise TreeUnavailable(f"the snapshot cannot be materialised: {exc}") from None
    if (tree.id, tree.exclusions_digest) != (expected.tree_id, expected.exclusions_digest):
        raise TreeUnavailable(f"the snapshot materialised as {tree.id}, not {expected.tree_id}: "
                              "the blob store or cache holds other bytes")
    return tree


def tree_named(session: Session, tree: Any) -> None:
    """§11.3: a snapshot session's begin, turn-stop and runs name its latest snapshot (`tree`);
    a path session's name none (the server hashes its directory itself)."""
    if session.workspace_kind == WorkspaceKind.SNAPSHOT:
        snapshot_current(session, tree)
    elif tree is not None:
        message = "only a snapshot session names a tree; a path session's is hashed by the server"
        raise Invalid(f"tree: {message}", details=[{"path": "tree", "message": message}])


@contextmanager
def session_workspace(session: Session, tree: Any = None, *, writable: bool = False,
                      latest: bool = True) -> Iterator[Workspace]:
    """The workspace a check or run of `session` reads: a path session's bound directory; for
    a snapshot session, the snapshot `tree` names (its latest, unless `latest` is False: a run
    queued before a newer upload still runs on its own) materialised in a private directory,
    deleted afterwards. Raises TreeUnavailable when it cannot be built."""
    if session.workspace_kind != WorkspaceKind.SNAPSHOT:
        with Workspace(session.workspace_path, session.workspace_identity) as workspace:
            yield workspace
        return
    record = (snapshot_current(session, tree) if latest else snapshot_by_tree(session, tree)).tree
    with ExitStack() as stack:
        try:
            root = stack.enter_context(materialised(record.project_id, record.manifest,
                                                    writable=writable))
            workspace = stack.enter_context(SnapshotWorkspace(root, identity_at(root), record))
        except (OSError, Unavailable) as exc:
            raise TreeUnavailable(f"the snapshot {record.tree_id} cannot be materialised: "
                                  f"{getattr(exc, 'message', exc)}") from None
        yield workspace


def session_tree_reference(session: Session, tree: Any = None) -> dict[str, Any]:
    """The reference of the session's workspace tree as it is now (hashed and recorded); for a
    snapshot session, of the snapshot `tree` names (its latest)."""
    if session.workspace_kind == WorkspaceKind.SNAPSHOT:
        named = snapshot_latest(session) if tree is None else snapshot_current(session, tree)
        if named is None:
            raise TreeUnavailable("the session has no snapshot yet")
        record = named.tree
        return {"id": record.tree_id, "exclusions": record.exclusions_digest}
    with Workspace(session.workspace_path, session.workspace_identity) as workspace:
        return tree_reference(session_tree(session, workspace))

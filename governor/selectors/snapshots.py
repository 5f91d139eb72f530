"""The snapshots of a session bound `{"kind": "snapshot"}` (rules §11.1, §11.3): which one a
tree id names, the latest, and the rule that a turn-stop or run names the latest."""

from __future__ import annotations

from governor.domain.tree import TREE_ID_PREFIX
from governor.lib.errors import Conflict, Invalid, NotFound
from governor.models import Session, Snapshot, WorkspaceKind


def snapshot_out(snapshot: Snapshot) -> dict[str, object]:
    tree = snapshot.tree
    return {"tree": tree.tree_id, "exclusions": tree.exclusions_digest, "files": tree.files,
            "bytes": tree.bytes, "number": snapshot.number}


def snapshot_by_tree(session: Session, tree: object, path: str = "tree") -> Snapshot:
    """The session's latest snapshot of `tree` (a tree id); 404 when the session has none."""
    if type(tree) is not str or not tree.startswith(TREE_ID_PREFIX):
        raise Invalid(f"{path}: must be a tree id gittree:sha256:<64 hex>",
                      details=[{"path": path, "message": "must be gittree:sha256:<64 hex>"}])
    snapshot = (Snapshot.objects.filter(session=session, tree__tree_id=tree)
                .select_related("tree").order_by("-number").first())
    if snapshot is None:
        raise NotFound(f"{path}: {tree} is not a snapshot of session {session.pk}",
                       details=[{"path": path, "message": "not a snapshot of this session"}])
    return snapshot


def snapshot_latest(session: Session) -> Snapshot | None:
    return (Snapshot.objects.filter(session=session).select_related("tree")
            .order_by("-number").first())


def snapshot_current(session: Session, tree: object, path: str = "tree") -> Snapshot:
    """§11.3: the tree a turn-stop or run names must be the session's latest snapshot; an
    older one is a 409 naming the latest, another session's a 404."""
    named = snapshot_by_tree(session, tree, path)
    latest = snapshot_latest(session)
    assert latest is not None
    if latest.tree_id != named.tree_id:
        raise Conflict(f"{path}: {tree} is not the session's latest snapshot; the latest is "
                       f"{latest.tree.tree_id}",
                       details=[{"path": path, "message": f"the latest is {latest.tree.tree_id}",
                                 "latest": latest.tree.tree_id}])
    return named


def tree_named(session: Session, tree: object) -> None:
    """§11.3: a snapshot session's begin, turn-stop and runs name its latest snapshot (`tree`);
    a path session's name none (the server hashes its directory itself)."""
    if session.workspace_kind == WorkspaceKind.SNAPSHOT:
        snapshot_current(session, tree)
    elif tree is not None:
        message = "only a snapshot session names a tree; a path session's is hashed by the server"
        raise Invalid(f"tree: {message}", details=[{"path": "tree", "message": message}])

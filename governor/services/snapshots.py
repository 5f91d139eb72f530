"""rules §11.1 and §11.4: recording the snapshots of a session bound `{"kind": "snapshot"}`, and
collecting the superseded ones."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from governor.domain.fields import FieldsInvalid
from governor.domain.snapshots import snapshot_manifest
from governor.domain.tree import (
    ManifestEntry,
    exclusions_digest,
    manifest_tree_id,
    validate_exclusions,
)
from governor.lib.errors import Conflict, Invalid, NotFound
from governor.models import (
    Change,
    Event,
    Origin,
    Project,
    Session,
    Snapshot,
    WorkspaceKind,
    WorkspaceTree,
)
from governor.selectors.snapshots import snapshot_by_tree
from governor.services.blobs import blob_sizes, blobs_touch
from governor.services.references import reference_take
from verification.models import VerificationRun


def _require_snapshot_session(session: Session) -> None:
    if session.workspace_kind != WorkspaceKind.SNAPSHOT:
        raise Conflict(f"session {session.pk} is bound to a path workspace: the server hashes "
                       "it itself; snapshots are for sessions bound {\"kind\": \"snapshot\"}")


def tree_from_entries(project: Project, entries: Any, *, base_tree: WorkspaceTree | None = None,
                      where: str = "", base_field: str = "base", field: str = "entries"
                      ) -> WorkspaceTree:
    """The kept tree `entries` describe (rules §11.1), whole or not at all: every entry checked,
    every blob present in the project's store, the caps kept; over `base_tree`, `entries` list
    only what changed (a null blob deletes). Refusals name the field under `where` (e.g.
    `head.entries/3/blob`; `field` names the list as the body does, e.g. a gated head's
    `changes`). Called inside a transaction."""
    exclusions = list(validate_exclusions(project.tree_exclusions, "tree_exclusions"))
    digest = exclusions_digest(exclusions)
    prefix = f"{where}." if where else ""
    base: list[ManifestEntry] | None = None
    if base_tree is not None:
        if base_tree.exclusions_digest != digest:
            raise NotFound(f"{base_field}: it was recorded under other tree exclusions than "
                           "the project's now: send the whole tree",
                           details=[{"path": base_field, "message": "other exclusions"}])
        base = [ManifestEntry(*entry) for entry in base_tree.manifest]
    try:
        manifest = snapshot_manifest(entries, base=base, exclusions=exclusions,
                                     max_entries=project.tree_max_files)
    except FieldsInvalid as exc:
        if not prefix:
            raise
        raise FieldsInvalid([{"path": prefix + (field + e["path"].removeprefix("entries")
                                                if e["path"].startswith("entries")
                                                else e["path"]), "message": e["message"]}
                             for e in exc.errors]) from None
    # Over a base only what changed is looked up: the base's blobs are kept with its tree.
    before = {entry.path: entry for entry in base or ()}
    merged = {entry.path: entry for entry in manifest}
    added = [entry for entry in manifest if before.get(entry.path) != entry]
    dropped = [entry for path, entry in before.items() if merged.get(path) != entry]
    blobs = {entry.blob for entry in added} - {entry.blob for entry in base or ()}
    # Touched first, so a garbage collection running now spares every blob named here.
    present = blobs_touch(project, blobs)
    missing = blobs - present
    if missing:
        index = {entry.get("path"): i for i, entry in enumerate(entries)
                 if isinstance(entry, dict)}
        details = [{"path": (f"{prefix}{field}/{index[e.path]}/blob" if e.path in index
                             else e.path),
                    "message": f"blob {e.blob} of {e.path!r} is missing: PUT it first"}
                   for e in manifest if e.blob in missing]
        raise Invalid(f"{len(missing)} blobs are missing from the store, first "
                      f"{details[0]['path']}: {details[0]['message']}", details=details)
    sizes = blob_sizes(project.pk, {entry.blob for entry in added + dropped})
    total = (0 if base_tree is None else base_tree.bytes) + sum(
        sizes[entry.blob] for entry in added) - sum(sizes[entry.blob] for entry in dropped)
    if total > project.tree_max_bytes:
        raise Invalid(f"{prefix}{field}: the tree holds {total} bytes; at most "
                      f"{project.tree_max_bytes} (the project's tree_max_bytes)",
                      details=[{"path": f"{prefix}{field}", "message": f"{total} bytes, over "
                                                                       "tree_max_bytes"}])
    tree_id = manifest_tree_id(manifest)
    tree, _ = WorkspaceTree.objects.get_or_create(
        project=project, tree_id=tree_id, exclusions_digest=digest,
        defaults={"exclusions": exclusions, "files": len(manifest), "bytes": total,
                  "manifest": [list(entry) for entry in manifest]})
    return tree


def snapshot_create(*, session: Session, body: dict[str, Any]) -> Snapshot:
    """Record the tree the body describes as the session's newest snapshot, whole or not at
    all: every entry checked, every blob present in the project's store, the caps kept."""
    _require_snapshot_session(session)
    project = session.project
    unknown = sorted(set(body) - {"entries", "base"})
    if unknown:
        raise Invalid("; ".join(f"{key}: unknown field" for key in unknown),
                      details=[{"path": key, "message": "unknown field"} for key in unknown])
    base_tree = None
    if body.get("base") is not None:
        base_tree = snapshot_by_tree(session, body["base"], "base").tree
    with transaction.atomic():
        tree = tree_from_entries(project, body.get("entries"), base_tree=base_tree)
        Session.objects.select_for_update().get(pk=session.pk)  # numbers in order
        number = (Snapshot.objects.filter(session=session)
                  .aggregate(top=Max("number"))["top"] or 0) + 1
        snapshot = Snapshot.objects.create(session=session, number=number, tree=tree)
        if number == 1:  # rules §17.1: a snapshot session's reference is its first tree
            reference_take(session, None)
        return snapshot


def _tree_named(tree_id: str, **where: Any) -> bool:
    """Whether a governor event (a contract's start tree, an attempt, a run's result, a
    terminal), a verification run or a session's reference (rules §17.1, kept before the log
    has it) matching `where` names `tree_id`."""
    return (Event.objects.filter(origin=Origin.GOVERNOR, data__contains=f'"{tree_id}"',
                                 **{f"session__{key}": value for key, value in where.items()})
            .exists()
            or Session.objects.filter(reference__contains=f'"{tree_id}"', **where).exists()
            or VerificationRun.objects.filter(
                tree=tree_id, **{f"session__{key}": value for key, value in where.items()})
            .exists()
            # rules §19: a gated change's trees are kept as long as the change
            or ("project_id" in where and Change.objects.filter(
                Q(base_tree__tree_id=tree_id) | Q(head_tree__tree_id=tree_id),
                project_id=where["project_id"]).exists()))


def snapshots_collect(*, now: datetime | None = None,
                      grace_seconds: int | None = None) -> dict[str, int]:
    """§11.4: delete the superseded snapshots — a later snapshot of their session was made
    more than the grace period ago — that nothing of their session names (no governor event:
    contract start, attempt, run result, terminal; no verification run), then the kept trees
    no snapshot, event or run of the project names any more, so `blobs_collect` can free the
    blobs only those trees held. A session's latest snapshot is never collected.
    {"snapshots": deleted, "trees": deleted}."""
    now = now or timezone.now()
    grace = settings.GOVERNOR_BLOB_GRACE_SECONDS if grace_seconds is None else grace_seconds
    cutoff = now - timedelta(seconds=grace)
    deleted_snapshots, trees = 0, set()
    superseding = (Snapshot.objects.filter(created_at__lt=cutoff).values("session_id")
                   .annotate(top=Max("number")).values_list("session_id", "top"))
    for session_id, top in superseding.iterator():
        older = Snapshot.objects.filter(session_id=session_id, number__lt=top)
        for pk, tree_pk, tree_id in older.values_list("pk", "tree_id", "tree__tree_id"):
            if not _tree_named(tree_id, pk=session_id):
                deleted_snapshots += Snapshot.objects.filter(pk=pk).delete()[0]
                trees.add((tree_pk, tree_id))
    deleted_trees = 0
    for tree_pk, tree_id in trees:
        with transaction.atomic():
            tree = WorkspaceTree.objects.select_for_update().filter(pk=tree_pk).first()
            if (tree is not None and not tree.snapshots.exists()
                    and not _tree_named(tree_id, project_id=tree.project_id)):
                tree.delete()
                deleted_trees += 1
    return {"snapshots": deleted_snapshots, "trees": deleted_trees}

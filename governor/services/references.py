"""rules §17.1: every session's reference — a tree the agent did not choose, taken once and
recorded in the session's log (`reliability/reference`) before its first governor event.

    a path workspace that is a git repository (a `.git` at its root): the tree of the commit
    the project's `reference_ref` names (e.g. `origin/main`), else of the commit HEAD names,
    when the session is created — read from git's objects (governor/domain/commits.py, §16.1),
    never from the files, with the project's exclusions left out; its manifest is kept and the
    blobs the store lacks are read from the objects and kept, so a run can lay the reference's
    protected content over any tree (governor/services/trees.py `run_tree`)
    any other path workspace: its tree hashed when the session is created
    a snapshot session: its first snapshot (the server holds no repository to read)

A `reference_ref` that names no commit refuses the session (nothing written). A repository
whose HEAD names no commit (nothing committed yet) has its tree as the reference, and says why.
A tree that cannot be hashed leaves the reference null with the reason: protected paths are then
judged against the contract-start tree, as the evidence says."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from governor.domain.canonical import receipt
from governor.domain.commits import (
    GitError,
    blob_objects,
    blobs_read,
    commit_tree_id,
    read_commit,
)
from governor.domain.fields import FieldsInvalid
from governor.domain.tree import TreeError, blob_id, exclusions_digest, validate_exclusions
from governor.lib.errors import Invalid, ServiceError
from governor.models import Project, Session, WorkspaceKind, WorkspaceTree
from governor.selectors.profiles import workspace_environment_paths
from governor.services.blobs import blob_sizes, blobs_keep, blobs_touch
from governor.services.trees import (
    TreeUnavailable,
    environment_at_reference,
    session_tree_reference,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GitReference:
    """The reference read from a repository's objects: the tree, and the commit (and ref) that
    named it."""

    tree: dict[str, str]
    commit: str
    ref: str  # "" for HEAD


def _refused(ref: str, why: str) -> Invalid:
    message = f"the project's reference_ref {ref!r} {why}"
    return Invalid(message, details=[{"path": "reference_ref", "message": message}])


def reference_from_repository(project: Project, path: str) -> GitReference | str | None:
    """The reference of the path workspace at `path` read from its repository: None when it is
    no repository, a reason (str) when its HEAD names no readable commit, else the tree with its
    manifest recorded and blobs kept. Raises Invalid naming `reference_ref` when the project's
    ref names no commit (or the workspace is no repository), before anything is written."""
    ref = project.reference_ref
    dotgit = os.path.join(path, ".git")
    if not os.path.lexists(dotgit):
        if ref:
            raise _refused(ref, "cannot be read: the workspace is not a git repository (no "
                                ".git at its root)")
        return None
    if os.path.islink(dotgit) or not os.path.isdir(dotgit):
        # A gitfile or a symlink may name any repository the server can read, whose objects
        # would then become this project's blobs: only the workspace's own is read.
        why = ("cannot be read: the workspace's .git is not a directory of its own (a "
               "worktree's gitfile or a symlink), and only a repository inside the workspace "
               "is read")
        if ref:
            raise _refused(ref, why)
        return f"HEAD {why.removeprefix('cannot be read: ')}: its tree was taken instead"
    try:
        commit = read_commit(path, ref or "HEAD")
        exclusions = list(validate_exclusions(project.tree_exclusions, "tree_exclusions"))
        tree_id, manifest = commit_tree_id(commit.entries, exclusions)
        if len(manifest) > project.tree_max_files:
            raise TreeError(".", f"more than {project.tree_max_files} files (the project's "
                                 "tree_max_files)")
    except (GitError, TreeError, FieldsInvalid) as exc:
        if ref:
            raise _refused(ref, f"does not resolve to a commit whose tree can be a reference: "
                                f"{exc}") from None
        return f"HEAD names no commit whose tree can be read ({exc}): its tree was taken instead"
    _blobs_keep(project, path, commit.oid, {entry.path: entry.blob for entry in manifest})
    digest = exclusions_digest(exclusions)
    sizes = blob_sizes(project.pk, (entry.blob for entry in manifest))
    WorkspaceTree.objects.get_or_create(
        project=project, tree_id=tree_id, exclusions_digest=digest,
        defaults={"exclusions": exclusions, "files": len(manifest),
                  "bytes": sum(sizes.get(entry.blob, 0) for entry in manifest),
                  "manifest": [list(entry) for entry in manifest]})
    return GitReference({"id": tree_id, "exclusions": digest}, commit.oid, ref)


def _blobs_keep(project: Project, repo: str, commit: str, blobs: dict[str, str]) -> None:
    """Keep the blobs of the reference the project's store lacks, read from the repository's
    objects and each checked against its id. One that cannot be kept is logged: a run that
    needs it then fails as `infrastructure`, never on other bytes."""
    present = blobs_touch(project, set(blobs.values()))
    wanted: dict[str, str] = {}  # git object id -> blob id
    objects = None
    for path, blob in blobs.items():
        if blob not in present and blob not in wanted.values():
            objects = objects if objects is not None else blob_objects(repo, commit)
            wanted[objects[path]] = blob
    if not wanted:
        return

    def read() -> Iterator[tuple[str, bytes]]:
        for oid, data in blobs_read(repo, sorted(wanted)):
            if len(data) > settings.GOVERNOR_MAX_BLOB_BYTES or blob_id(data) != wanted[oid]:
                log.warning("reference %s: blob %s is not kept", commit, wanted[oid])
                continue
            yield wanted[oid], data

    try:
        blobs_keep(project, read())
    except (GitError, ServiceError) as exc:
        log.warning("reference %s: its blobs are not kept: %s", commit, exc)


def reference_take(session: Session, taken: GitReference | str | None) -> dict[str, Any]:
    """Take the session's reference, once: the repository's `taken`
    (`reference_from_repository`), else the tree the session holds now (a path workspace
    hashed; a snapshot session's first snapshot). Kept as `Session.reference` and written into
    the log as `reliability/reference` just before the session's first governor event
    (`governor_event_append`). Its data: `{tree: {id, exclusions} | null, source, commit?,
    ref?, reason?, environment?, receipt}`, `source` one of `git-ref`, `git-head`,
    `first-tree`, `first-snapshot`; `environment` (path sessions): the tree id of each
    workspace environment directory the project's profiles declare, by path (null where it
    could not be hashed), rules §17.8."""
    data: dict[str, Any]
    if isinstance(taken, GitReference):
        data = {"tree": taken.tree, "source": "git-ref" if taken.ref else "git-head",
                "commit": taken.commit}
        if taken.ref:
            data["ref"] = taken.ref
    else:
        source = "first-snapshot" if session.workspace_kind == "snapshot" else "first-tree"
        data = {"tree": None, "source": source}
        try:
            data["tree"] = session_tree_reference(session)
        except TreeUnavailable as exc:
            data["reason"] = str(exc)
        if isinstance(taken, str):
            data["reason"] = taken
    if session.workspace_kind == WorkspaceKind.PATH:
        # rules §17.8: the workspace environment directories the project's profiles declare,
        # as they are now — what every run's environment is held against.
        data["environment"] = environment_at_reference(
            session, workspace_environment_paths(session.project))
    data["receipt"] = receipt("reference", data)
    if Session.objects.filter(pk=session.pk, reference__isnull=True).update(reference=data):
        session.reference = data
    return data

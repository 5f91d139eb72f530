"""rules §10: the workspace tree a session's attempt, contract start or run is bound to.

The tree is hashed through the session's `Workspace` (its verified descriptor) with a stat cache
kept per session under the server's var directory (`tree-cache/<session id>.json`, mode 0600,
replaced atomically; a missing or unreadable cache is only a cold hash), and every hashed tree's
manifest is kept once per (project, tree id, exclusions digest) in `WorkspaceTree`, its blobs in
the blob store. A run is given a private copy of a kept tree (`run_tree`), and a snapshot's file
checks read one (`workspace_hashed`); each copy is hashed again and must be its tree."""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from governor.domain.changes import SHOWN_PATHS, left_in, offending, overlaid, workspace_changes
from governor.domain.checkout import CheckoutAttribute, checkout_attributes, is_attributes_file
from governor.domain.documents import Check
from governor.domain.fields import FieldsInvalid
from governor.domain.tree import (
    ManifestEntry,
    PathMatcher,
    StatCache,
    Tree,
    TreeError,
    directory_excluded,
    environment_reference,
    exclusions_digest,
    hash_tree,
    manifest_tree_id,
    tree_reference,
    validate_exclusions,
)
from governor.domain.workspace import (
    DIRECTORY_FLAGS,
    Workspace,
    WorkspaceError,
    identity,
    identity_at,
)
from governor.lib.errors import ServiceError, Unavailable
from governor.lib.materialise import MODE_SYMLINK, materialised
from governor.models import Project, Session, WorkspaceKind, WorkspaceTree
from governor.selectors.snapshots import snapshot_by_tree, snapshot_current, snapshot_latest
from governor.selectors.treediff import changes_read
from governor.services.blobs import blob_sizes, blobs_keep, blobs_touch

log = logging.getLogger(__name__)


class TreeUnavailable(Exception):
    """The workspace cannot be hashed completely; the message says why (the path named)."""


def _cache_directory() -> Path:
    return Path(settings.VAR_DIR) / "tree-cache"


def _cache_path(session: Session, environment: str | None) -> Path:
    if environment is None:
        return _cache_directory() / f"{session.pk}.json"
    key = hashlib.sha256(environment.encode()).hexdigest()[:16]
    return _cache_directory() / f"{session.pk}-environment-{key}.json"


def _stat_cache_load(session: Session, environment: str | None = None) -> StatCache:
    """The session's stat cache (of its tree, or of one environment directory); empty (a cold
    hash) when it is missing or unreadable."""
    directory = _cache_directory()
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        data = json.loads(_cache_path(session, environment).read_bytes())
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return StatCache.from_dict(data, stamp_dir=str(directory))
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as exc:
        log.warning("session %s: the stat cache is not usable, hashing cold: %s", session.pk, exc)
    return StatCache(stamp_dir=str(directory))


def _stat_cache_save(session: Session, cache: StatCache, environment: str | None = None) -> None:
    """Replace the session's stat cache atomically (a new file of mode 0600, renamed). A cache
    that cannot be written only makes the next hash cold: it is logged, not raised."""
    try:
        fd, name = tempfile.mkstemp(dir=_cache_directory(), prefix=".cache-", suffix=".json")
    except OSError as exc:
        log.warning("session %s: the stat cache cannot be written: %s", session.pk, exc)
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            # One string (json.dumps runs in C; json.dump streams through the Python encoder,
            # several times slower at a thousand files and more).
            handle.write(json.dumps(cache.as_dict(), separators=(",", ":")))
        os.replace(name, _cache_path(session, environment))
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


def _hashed(session: Session, workspace: Workspace, exclusions: list[str],
            environment: str | None = None) -> Tree:
    """Hash `workspace` with the session's stat cache (of its tree, or of the `environment`
    directory) and record the manifest, keeping the blobs of a tree new to the project."""
    project = session.project
    cache = _stat_cache_load(session, environment)
    loaded = dict(cache.directories)
    tree = workspace.hash(exclusions=exclusions, cache=cache, max_files=project.tree_max_files,
                          max_bytes=project.tree_max_bytes)
    # A scan that changed nothing keeps every loaded record: writing them again is skipped.
    if cache.directories.keys() != loaded.keys() or any(
            record is not loaded[prefix] for prefix, record in cache.directories.items()):
        _stat_cache_save(session, cache, environment)
    if tree_record(project, tree, exclusions)[1]:
        tree_blobs_keep(project, tree, workspace)
    return tree


def session_tree(session: Session, workspace: Workspace) -> Tree:
    """Hash the session's workspace through `workspace` (which then reads only this tree), with
    the project's exclusions and limits, and record its manifest. Raises TreeUnavailable.
    A materialised workspace (a snapshot, or a run's private copy) is hashed without a stat
    cache, and it must hash to the tree it was written from."""
    if isinstance(workspace, MaterialisedWorkspace):
        return _materialised_tree(session.project, workspace)
    try:
        exclusions = list(validate_exclusions(session.project.tree_exclusions,
                                              "tree_exclusions"))
        return _hashed(session, workspace, exclusions)
    except (TreeError, WorkspaceError, FieldsInvalid) as exc:
        raise TreeUnavailable(f"the workspace tree cannot be hashed: {exc}") from None


def tree_blobs_keep(project: Project, tree: Tree, workspace: Workspace) -> None:
    """§11 "the server keeps the trees it judges": store the blobs of a newly recorded path
    tree the project's store lacks, read through the descriptor it was hashed through (each read
    checked against the tree). A blob that cannot be kept is logged: the verdict stands, but a
    run cannot be given that tree (it is materialised from the store)."""
    present = blobs_touch(project, {entry.blob for entry in tree.manifest})

    def missing() -> Iterator[tuple[str, bytes]]:
        for entry in tree.manifest:
            if entry.blob in present:
                continue
            try:
                if entry.mode == MODE_SYMLINK:
                    data = workspace.link_text(entry.path)
                else:
                    data = workspace.read_bytes(entry.path,
                                                max_bytes=settings.GOVERNOR_MAX_BLOB_BYTES)
            except WorkspaceError as exc:
                log.warning("tree %s: blob %s of %r is not kept: %s", tree.id, entry.blob,
                            entry.path, exc)
                continue
            present.add(entry.blob)
            yield entry.blob, data

    try:
        blobs_keep(project, missing())
    except ServiceError as exc:
        log.warning("tree %s: its blobs are not kept: %s", tree.id, exc)


def _directory_below(workspace: Workspace, path: str) -> str:
    """The identity of the directory at relative `path` under the workspace's bound root,
    walked one component at a time without following a link."""
    try:
        fd = os.dup(workspace.bind())
    except WorkspaceError as exc:
        raise TreeUnavailable(str(exc)) from None
    try:
        for name in path.split("/"):
            parent, fd = fd, -1
            try:
                fd = os.open(name, DIRECTORY_FLAGS, dir_fd=parent)
            finally:
                os.close(parent)
        return identity(fd)
    except OSError as exc:
        reason = ("is a symbolic link or not a directory"
                  if exc.errno in (errno.ELOOP, errno.ENOTDIR) else exc.strerror)
        raise TreeUnavailable(f"the environment directory {path} cannot be opened "
                              f"({reason})") from None
    finally:
        if fd >= 0:
            os.close(fd)


def environment_trees(session: Session, workspace: Workspace,
                      paths: Sequence[str]) -> dict[str, Tree]:
    """Each environment directory of a profile (governor/domain/profiles.py) under the hashed
    path workspace `workspace`, hashed as a tree of its own (no exclusions; a stat cache each)
    and recorded like the workspace tree. Each must be left out of the workspace tree by the
    project's exclusions, else it is part of the tree already. Raises TreeUnavailable."""
    if not paths:
        return {}
    exclusions = list(validate_exclusions(session.project.tree_exclusions, "tree_exclusions"))
    trees = {}
    for path in paths:
        if not directory_excluded(exclusions, path):
            raise TreeUnavailable(f"the environment directory {path} is not excluded from the "
                                  f"workspace tree: add an exclusion such as '{path}/**' to "
                                  f"the project, or drop it from the profile")
        below = Workspace(f"{workspace.root.rstrip('/')}/{path}", _directory_below(workspace,
                                                                                   path))
        with below:
            try:
                trees[path] = _hashed(session, below, [], environment=path)
            except (TreeError, WorkspaceError) as exc:
                raise TreeUnavailable(f"the environment directory {path} cannot be hashed: "
                                      f"{exc}") from None
    return trees


def environment_at_reference(session: Session, paths: Sequence[str]) -> dict[str, str | None]:
    """Rules §17.8: the workspace environment directories `paths` as the path session's
    workspace holds them when its reference is taken — each one's tree id (its manifest kept,
    to name what a run finds changed), None where it cannot be hashed (missing, say)."""
    found: dict[str, str | None] = dict.fromkeys(paths)
    try:
        with Workspace(session.workspace_path, session.workspace_identity) as workspace:
            for path in paths:
                try:
                    found[path] = environment_trees(session, workspace, [path])[path].id
                except TreeUnavailable as exc:
                    log.info("session %s: the environment directory %s is not part of the "
                             "reference: %s", session.pk, path, exc)
    except WorkspaceError as exc:
        log.info("session %s: no environment at the reference: %s", session.pk, exc)
    return found


@dataclass(frozen=True)
class EnvironmentChange:
    """Rules §17.8: a run's workspace environment is not the reference's. `changes` are the
    first SHOWN_PATHS differing paths (under their directory) with their kind, of `count`."""

    tree: dict[str, str]  # the reference of the tree the run would have run on
    environment: dict[str, Any] | None  # environment_reference as the run found it
    changes: list[dict[str, str]]
    count: int

    def reason(self) -> str:
        shown = ", ".join(f"{change['path']} ({change['kind']})" for change in self.changes)
        more = f" and {self.count - len(self.changes)} more" if self.count > len(
            self.changes) else ""
        return f"the environment differs from the session's reference: {shown}{more}"


class EnvironmentChanged(Exception):
    def __init__(self, change: EnvironmentChange) -> None:
        super().__init__(change.reason())
        self.change = change


def _environment_changes(session: Session, below: Mapping[str, WorkspaceTree],
                         opened: Sequence[str] = ()) -> list[dict[str, str]]:
    """Every path of the environment directories `below` (as a run found them) that differs
    from the session's reference, in path order, less those a person opened (`opened`: the
    reviewed contract's `environmentChanges` patterns, matched as exclusions are): `[]` when
    they are the reference's, or when the session predates the rule (its reference records no
    environment)."""
    recorded = (session.reference or {}).get("environment")
    if not isinstance(recorded, dict) or not below:
        return []
    allowed = PathMatcher(opened) if opened else None
    empty = exclusions_digest([])
    changes: list[dict[str, str]] = []
    for path, record in sorted(below.items()):
        if path not in recorded:
            changes.append({"path": f"{path}/", "kind": "not hashed at the reference"})
            continue
        if recorded[path] == record.tree_id:
            continue
        base = WorkspaceTree.objects.filter(project=session.project, tree_id=recorded[path],
                                            exclusions_digest=empty).first()
        changes += [{"path": f"{path}/{change.path}", "kind": change.kind}
                    for change in workspace_changes(base.manifest if base else [],
                                                    record.manifest)
                    if allowed is None or not allowed.matches(f"{path}/{change.path}")]
    return changes


def _workspace_roots() -> list[str]:
    """Every directory any project lets agents bind a workspace under, resolved."""
    roots = {str(settings.GOVERNOR_DEMO_WORKSPACE_ROOT), *settings.GOVERNOR_WORKSPACE_ROOTS}
    for listed in Project.objects.values_list("workspace_roots", flat=True):
        roots.update(root for root in listed or [] if isinstance(root, str))
    return sorted({os.path.realpath(root) for root in roots if root.startswith("/")})


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def operator_environment_problems(paths: Sequence[str]) -> list[str]:
    """Rules §17.8: why each operator environment directory in `paths` cannot be one — it does
    not exist (or is no directory), or it lies inside a workspace root (or holds one), where
    an agent could write it. Resolved as the sandbox mounts it (`os.path.realpath`)."""
    problems = []
    roots = _workspace_roots() if paths else []
    for path in paths:
        real = os.path.realpath(path)
        shown = path if real == path else f"{path} (resolved: {real})"
        if not os.path.isdir(real):
            problems.append(f"the operator environment directory {shown} does not exist or is "
                            "not a directory")
            continue
        for root in roots:
            if _inside(real, root) or _inside(root, real):
                where = "is inside" if _inside(real, root) else "holds"
                problems.append(f"the operator environment directory {shown} {where} the "
                                f"workspace root {root}, where agents write: it must lie "
                                "outside every workspace")
                break
    return problems


def _environment_digests(session: Session, workspace: Workspace,
                         declared: Mapping[str, Sequence[str]]) -> dict[str, str | None]:
    """The environment digest of each profile in `declared` (its environment directories) as
    the hashed path `workspace` holds them now: None where they cannot be hashed. What an
    attempt compares its runs with."""
    digests: dict[str, str | None] = {}
    for profile, paths in declared.items():
        digests[profile] = None
        try:
            trees = environment_trees(session, workspace, paths)
        except TreeUnavailable as exc:
            log.info("session %s: the environment of %s cannot be hashed: %s", session.pk,
                     profile, exc)
            continue
        reference = environment_reference({path: tree.id for path, tree in trees.items()})
        digests[profile] = reference["digest"] if reference else None
    return digests


class MaterialisedWorkspace(Workspace):
    """A kept tree written into a private directory (governor/lib/materialise.py): it
    must hash to `expected`, and each environment directory written beside it to its own
    record."""

    def __init__(self, root: str, identity: str, expected: WorkspaceTree,
                 environment: Mapping[str, WorkspaceTree]) -> None:
        super().__init__(root, identity)
        self.expected = expected
        self.environment = dict(environment)


def _materialised_tree(project: Project, workspace: MaterialisedWorkspace) -> Tree:
    expected = workspace.expected
    try:
        tree = workspace.hash(exclusions=expected.exclusions, cache=None,
                              max_files=project.tree_max_files,
                              max_bytes=project.tree_max_bytes)
        for path, record in workspace.environment.items():
            below = hash_tree(f"{workspace.root}/{path}", max_files=project.tree_max_files,
                              max_bytes=project.tree_max_bytes)
            if below.id != record.tree_id:
                raise TreeUnavailable(f"the environment directory {path} materialised as "
                                      f"{below.id}, not {record.tree_id}: the blob store or "
                                      "cache holds other bytes")
    except (TreeError, WorkspaceError) as exc:
        raise TreeUnavailable(f"the tree cannot be materialised: {exc}") from None
    if (tree.id, tree.exclusions_digest) != (expected.tree_id, expected.exclusions_digest):
        raise TreeUnavailable(f"the tree materialised as {tree.id}, not {expected.tree_id}: "
                              "the blob store or cache holds other bytes")
    return tree


def tree_written(session: Session, copy: MaterialisedWorkspace) -> Tree:
    """The tree a `workspace-write` run left in its private copy, hashed afresh, recorded and
    its blobs kept. Raises TreeUnavailable."""
    exclusions = list(copy.expected.exclusions)
    project = session.project
    with Workspace(copy.root, copy.recorded_identity) as written:
        try:
            tree = written.hash(exclusions=exclusions, cache=None,
                                max_files=project.tree_max_files,
                                max_bytes=project.tree_max_bytes)
        except (TreeError, WorkspaceError) as exc:
            raise TreeUnavailable(f"the tree the run left cannot be hashed: {exc}") from None
        if tree_record(project, tree, exclusions)[1]:
            tree_blobs_keep(project, tree, written)
    return tree


@contextmanager
def _copy(project: Project, record: WorkspaceTree, *, writable: bool,
          environment: Mapping[str, WorkspaceTree],
          check: Callable[[MaterialisedWorkspace], Tree]) -> Iterator[MaterialisedWorkspace]:
    manifest = [*record.manifest,
                *([f"{path}/{entry[0]}", *entry[1:]]
                  for path, below in environment.items() for entry in below.manifest)]
    with ExitStack() as stack:
        try:
            root = stack.enter_context(materialised(record.project_id, manifest,
                                                    writable=writable))
            workspace = stack.enter_context(
                MaterialisedWorkspace(root, identity_at(root), record, environment))
        except (OSError, Unavailable) as exc:
            raise TreeUnavailable(f"the tree {record.tree_id} cannot be materialised: "
                                  f"{getattr(exc, 'message', exc)}") from None
        check(workspace)
        yield workspace


@contextmanager
def tree_materialised(session: Session, record: WorkspaceTree, *, writable: bool = False,
                      environment: Mapping[str, WorkspaceTree] | None = None,
                      ) -> Iterator[MaterialisedWorkspace]:
    """`record` (and the `environment` directories, each at its path) written into a private
    directory and checked to hash to it, deleted afterwards. `writable`: private copies a
    `workspace-write` run may change; otherwise hard links to the blob cache. Raises
    TreeUnavailable when it cannot be built."""
    with _copy(session.project, record, writable=writable, environment=environment or {},
               check=lambda copy: session_tree(session, copy)) as workspace:
        yield workspace


@dataclass(frozen=True)
class HashedWorkspace:
    """A session's workspace hashed once (rules §10.2): the checks read through `workspace`,
    which reads only `tree` (named in events by `reference`); `environments` is each declared
    profile's environment digest (None where it cannot be hashed, and in a snapshot, which
    holds none)."""

    workspace: Workspace
    tree: Tree
    reference: dict[str, str]
    environments: dict[str, str | None]

    def checkout_converted(self, *, max_bytes: int) -> list[CheckoutAttribute]:
        """Rules §17.9: the paths of the tree its own `.gitattributes` files make a checkout
        convert (a symlink's text read as git reads it). Raises TreeUnavailable naming an
        attributes file that cannot be read."""
        files = {}
        for entry in self.tree.manifest:
            if is_attributes_file(entry.path):
                try:
                    files[entry.path] = (
                        self.workspace.link_text(entry.path) if entry.mode == MODE_SYMLINK
                        else self.workspace.read_bytes(entry.path, max_bytes=max_bytes))
                except WorkspaceError as exc:
                    raise TreeUnavailable(f"{entry.path} {exc}") from None
        return checkout_attributes([entry.path for entry in self.tree.manifest], files)


@contextmanager
def workspace_hashed(session: Session, tree: Any = None,
                     declared: Mapping[str, Sequence[str]] | None = None,
                     ) -> Iterator[HashedWorkspace]:
    """The workspace the checks of `session` judge, hashed once: a path session's bound
    directory (each read checked against the tree it hashes to, its manifest recorded), with the
    environment directories of the `declared` profiles hashed beside it; for a snapshot
    session, the snapshot `tree` names (its latest) materialised in a private directory, which
    must hash to it, deleted afterwards. Raises TreeUnavailable when it cannot be hashed."""
    declared = declared or {}
    if session.workspace_kind != WorkspaceKind.SNAPSHOT:
        with Workspace(session.workspace_path, session.workspace_identity) as workspace:
            hashed = session_tree(session, workspace)
            yield HashedWorkspace(workspace, hashed, tree_reference(hashed),
                                  _environment_digests(session, workspace, declared))
        return
    with tree_materialised(session, snapshot_current(session, tree).tree) as copy:
        assert copy.tree is not None  # hashed by `tree_materialised`, and checked to be it
        yield HashedWorkspace(copy, copy.tree, tree_reference(copy.tree),
                              dict.fromkeys(declared))


def _recorded(session: Session, tree: Tree) -> WorkspaceTree:
    return WorkspaceTree.objects.get(project=session.project, tree_id=tree.id,
                                     exclusions_digest=tree.exclusions_digest)


@dataclass(frozen=True)
class RunTree:
    """What a run executes on (rules §10.2): a private copy of exactly the tree it is
    credited with, never the live directory — with the protected content of the session's
    reference laid over it (rules §17.2) when `overlay` says so."""

    workspace: MaterialisedWorkspace
    tree: dict[str, str]  # the reference of the tree it is credited with
    environment: dict[str, Any] | None  # environment_reference, None without one
    overlay: dict[str, Any] | None = None  # what `_overlaid` laid over it


@dataclass(frozen=True)
class Overlay:
    """Rules §17.2: the session's reference tree and the protected-paths check whose patterns
    (`paths`, `sections`, less what a person opened, `allowed`) it judges."""

    reference: dict[str, str]  # {"id", "exclusions"}
    check: Check


def _overlaid(project: Project, kept: WorkspaceTree,
              overlay: Overlay) -> tuple[WorkspaceTree, dict[str, Any]]:
    """`kept` with every protected change against the reference undone (the paths as the
    reference holds them, added ones left out), recorded as a tree of its own; and what the run
    records of it: `{reference, paths, allowed?, sections?, restored, tree}` — `restored` the
    paths undone (at most SHOWN_PATHS, `restoredCount` all of them), `tree` the tree the
    command ran on."""
    ref = overlay.reference
    base = WorkspaceTree.objects.filter(project=project, tree_id=ref["id"],
                                        exclusions_digest=ref["exclusions"]).first()
    if base is None:
        raise TreeUnavailable(f"the reference tree {ref['id']} is not kept: its protected "
                              "content cannot be laid over the run's tree")
    reference = base.manifest if base.exclusions_digest == kept.exclusions_digest else left_in(
        base.manifest, kept.exclusions)
    protected = offending(overlay.check, changes_read(project.pk, reference,
                                                      kept.manifest))
    record = kept
    if protected:
        manifest = [ManifestEntry(*entry)
                    for entry in overlaid(reference, kept.manifest, protected)]
        try:
            tree_id = manifest_tree_id(manifest)
        except TreeError as exc:  # a file where the reference has a directory, say
            raise TreeUnavailable(f"the reference's protected content cannot be laid over "
                                  f"the run's tree: {exc}") from None
        sizes = blob_sizes(project.pk, (entry.blob for entry in manifest))
        record, _ = WorkspaceTree.objects.get_or_create(
            project=project, tree_id=tree_id, exclusions_digest=kept.exclusions_digest,
            defaults={"exclusions": kept.exclusions, "files": len(manifest),
                      "bytes": sum(sizes.get(entry.blob, 0) for entry in manifest),
                      "manifest": [list(entry) for entry in manifest]})
    detail: dict[str, Any] = {"reference": ref["id"], "paths": list(overlay.check["paths"])}
    for key in ("allowed", "sections"):
        if overlay.check.get(key):
            detail[key] = list(overlay.check[key])
    detail.update(restored=[change.path for change in protected[:SHOWN_PATHS]],
                  restoredCount=len(protected), tree=record.tree_id)
    return record, detail


@contextmanager
def run_tree(session: Session, snapshot: Any, *, writable: bool, environment: Sequence[str],
             start: tuple[str, str] | None = None, overlay: Overlay | None = None,
             environment_opened: Sequence[str] = ()) -> Iterator[RunTree]:
    """The private copy a run of `session` executes on: a path session's workspace hashed now
    (the live directory is read for this and never again) with the profile's `environment`
    directories, or the snapshot `snapshot` names (a run queued before a newer upload still
    runs on its own), or for a baseline run the kept tree `start` (id, exclusions digest: the
    contract-start tree), materialised from the kept blobs — with `overlay`'s protected content
    laid over it (rules §17.2; the run is still credited with the tree it was given). Raises
    TreeUnavailable; EnvironmentChanged when the `environment` directories are not the
    session's reference's (rules §17.8) outside what a person opened (`environment_opened`),
    before anything is materialised."""
    snapshots = session.workspace_kind == WorkspaceKind.SNAPSHOT
    if snapshots and environment:
        raise TreeUnavailable("the profile declares environment directories "
                              f"({', '.join(environment)}), which a snapshot holds none "
                              "of: a snapshot session's runs see only the uploaded tree")
    below: dict[str, WorkspaceTree] = {}
    kept: WorkspaceTree | None = None
    if start is not None:
        kept = WorkspaceTree.objects.filter(project=session.project, tree_id=start[0],
                                            exclusions_digest=start[1]).first()
        if kept is None:
            raise TreeUnavailable(f"the contract-start tree {start[0]} is not kept")
    elif snapshots:
        kept = snapshot_by_tree(session, snapshot).tree
    if not snapshots:
        with Workspace(session.workspace_path, session.workspace_identity) as live:
            if kept is None:
                kept = _recorded(session, session_tree(session, live))
            below = {path: _recorded(session, tree)
                     for path, tree in environment_trees(session, live, environment).items()}
    assert kept is not None
    if changes := _environment_changes(session, below, environment_opened):
        raise EnvironmentChanged(EnvironmentChange(
            {"id": kept.tree_id, "exclusions": kept.exclusions_digest},
            environment_reference({path: rec.tree_id for path, rec in below.items()}),
            changes[:SHOWN_PATHS], len(changes)))
    record, laid = kept, None
    if overlay is not None:
        record, laid = _overlaid(session.project, kept, overlay)
    with tree_materialised(session, record, writable=writable, environment=below) as copy:
        yield RunTree(copy, {"id": kept.tree_id, "exclusions": kept.exclusions_digest},
                      environment_reference({path: rec.tree_id for path, rec in below.items()}),
                      laid)


@contextmanager
def kept_run_tree(project: Project, tree: tuple[str, str], *, writable: bool,
                  overlay: Overlay | None) -> Iterator[RunTree]:
    """The private copy a session-less run (a gated change's, rules §19.2) executes on: the
    kept tree `tree` (id, exclusions digest) materialised from the kept blobs, with `overlay`'s
    protected content laid over it (rules §17.2). Raises TreeUnavailable."""
    kept = WorkspaceTree.objects.filter(project=project, tree_id=tree[0],
                                        exclusions_digest=tree[1]).first()
    if kept is None:
        raise TreeUnavailable(f"the tree {tree[0]} is not kept")
    record, laid = kept, None
    if overlay is not None:
        record, laid = _overlaid(project, kept, overlay)
    with _copy(project, record, writable=writable, environment={},
               check=lambda copy: _materialised_tree(project, copy)) as copy:
        yield RunTree(copy, {"id": kept.tree_id, "exclusions": kept.exclusions_digest}, None,
                      laid)


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

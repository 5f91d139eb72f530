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
from pathlib import Path
from typing import Any

from django.conf import settings

from governor.domain.fields import FieldsInvalid
from governor.domain.tree import StatCache, Tree, TreeError, validate_exclusions
from governor.domain.workspace import Workspace, WorkspaceError
from governor.models import Project, Session, WorkspaceTree

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


def tree_record(project: Project, tree: Tree, exclusions: list[str]) -> WorkspaceTree:
    """The tree's manifest, written once per (project, tree id, exclusions digest); built only
    when it is written."""
    record, _created = WorkspaceTree.objects.get_or_create(
        project=project, tree_id=tree.id, exclusions_digest=tree.exclusions_digest,
        defaults={"exclusions": exclusions, "files": tree.files, "bytes": tree.size,
                  "manifest": lambda: [list(entry) for entry in tree.manifest]})
    return record


def session_tree(session: Session, workspace: Workspace) -> Tree:
    """Hash the session's workspace through `workspace` (which then reads only this tree), with
    the project's exclusions and limits, and record its manifest. Raises TreeUnavailable."""
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
    tree_record(project, tree, exclusions)
    return tree


def session_tree_reference(session: Session) -> dict[str, Any]:
    """The reference of the session's workspace tree as it is now (hashed and recorded)."""
    with Workspace(session.workspace_path, session.workspace_identity) as workspace:
        return tree_reference(session_tree(session, workspace))

"""SEMANTICS §11.1: the manifest of an uploaded snapshot, checked whole before anything is kept.

A snapshot is a list of entries `{"path", "mode", "blob"}`; with a `base` (an earlier snapshot's
manifest) the entries list only what changed, and a `null` blob deletes a path. The result is a
manifest `hash_tree` could have produced from a directory with the project's exclusions: every
path relative and normalised, named as git would accept it, not excluded, listed once, never
both a file and a directory. Every refusal names the entry (`entries/<index>/<field>`) and why.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from governor.domain.fields import FieldErrors, FieldsInvalid
from governor.domain.tree import (
    SKIPPED_AT_TOP,
    ManifestEntry,
    _Exclusions,
    _refusal,
)

MODES = ("100644", "100755", "120000")
MAX_PATH_BYTES = 4096


def _path_problem(path: str, mode: str, exclusions: _Exclusions) -> str | None:
    """Why git, or the tree rules of §10.1, would not hold `path`; None when they would."""
    if not path or "\x00" in path:
        return "must be a non-empty path without NUL"
    raw = path.encode("utf-8", "surrogatepass")
    if len(raw) > MAX_PATH_BYTES:
        return f"longer than {MAX_PATH_BYTES} bytes"
    if path.startswith("/"):
        return "must be relative, not absolute"
    parts = raw.split(b"/")
    if any(part in (b"", b".", b"..") for part in parts):
        return "must not hold empty, '.' or '..' segments"
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return "must be valid UTF-8"
    if parts[0] in SKIPPED_AT_TOP:
        return f"{parts[0].decode()}/ at the top is never part of a workspace tree"
    for index, part in enumerate(parts):
        leaf = index == len(parts) - 1
        refused, refused_for_symlink = _refusal(part, leaf=leaf)
        if refused or (leaf and mode == "120000" and refused_for_symlink):
            return f"git refuses the name {part.decode()!r}"
    for depth in range(1, len(parts)):
        if exclusions.excludes(b"/".join(parts[:depth]), True):
            return "is excluded by the project's tree exclusions"
    if exclusions.excludes(raw, False):
        return "is excluded by the project's tree exclusions"
    return None


def snapshot_manifest(entries: Any, *, base: Sequence[ManifestEntry] | None,
                      exclusions: Sequence[str], max_entries: int) -> list[ManifestEntry]:
    """The snapshot's whole manifest, in `git ls-tree -r` order; FieldsInvalid naming every
    refused entry. `exclusions` must already be valid."""
    errors = FieldErrors()
    if type(entries) is not list:
        errors.add("entries", "required: a list of {path, mode, blob}")
        raise FieldsInvalid(errors.items)
    if len(entries) > max_entries:
        errors.add("entries", f"{len(entries)} entries; at most {max_entries} (the project's "
                              "tree_max_files)")
        raise FieldsInvalid(errors.items)
    matcher = _Exclusions(exclusions)
    changes: dict[str, tuple[int, ManifestEntry | None]] = {}
    for index, entry in enumerate(entries):
        where = f"entries/{index}"
        if type(entry) is not dict:
            errors.add(where, "must be an object {path, mode, blob}")
            continue
        unknown = sorted(set(entry) - {"path", "mode", "blob"})
        for key in unknown:
            errors.add(f"{where}/{key}", "unknown field")
        path, mode, blob = entry.get("path"), entry.get("mode"), entry.get("blob")
        if type(path) is not str:
            errors.add(f"{where}/path", "required: a string")
            continue
        if blob is None and base is not None and "blob" in entry:
            if path in changes:
                errors.add(f"{where}/path", f"{path!r} is listed twice (first at entries/"
                                            f"{changes[path][0]})")
            changes[path] = (index, None)
            continue
        if mode not in MODES:
            errors.add(f"{where}/mode", f"must be one of {', '.join(MODES)}")
            continue
        if type(blob) is not str or len(blob) != 64 or any(c not in "0123456789abcdef"
                                                          for c in blob):
            errors.add(f"{where}/blob", "must be a blob id, 64 lowercase hex digits"
                       + ("" if base is None else ", or null to delete the path"))
            continue
        problem = _path_problem(path, mode, matcher)
        if problem is not None:
            errors.add(f"{where}/path", f"{path!r} {problem}")
            continue
        if path in changes:
            errors.add(f"{where}/path", f"{path!r} is listed twice (first at entries/"
                                        f"{changes[path][0]})")
            continue
        changes[path] = (index, ManifestEntry(path, mode, blob))
    if errors.items:
        raise FieldsInvalid(errors.items)
    merged = {entry.path: entry for entry in base or ()}
    for path, (index, change) in changes.items():
        if change is None:
            if merged.pop(path, None) is None:
                errors.add(f"entries/{index}/blob", f"null deletes {path!r}, which the base "
                                                    "snapshot does not hold")
        else:
            merged[path] = change
    if len(merged) > max_entries:
        errors.add("entries", f"the snapshot holds {len(merged)} files; at most {max_entries} "
                              "(the project's tree_max_files)")
    if errors.items:
        raise FieldsInvalid(errors.items)
    _refuse_file_directory_conflicts(merged, changes, errors)
    if errors.items:
        raise FieldsInvalid(errors.items)
    return sorted(merged.values(), key=lambda entry: entry.path.encode())


def _refuse_file_directory_conflicts(merged: dict[str, ManifestEntry],
                                     changes: dict[str, tuple[int, Any]],
                                     errors: FieldErrors) -> None:
    """A path below another path that is a file: name the entry that brought it in."""
    for path in merged:
        for prefix in _prefixes(path):
            if prefix in merged:
                blame = path if path in changes else prefix
                index = changes[blame][0] if blame in changes else None
                where = "entries" if index is None else f"entries/{index}/path"
                errors.add(where, f"{path!r} lies below {prefix!r}, which is a file")
                return


def _prefixes(path: str) -> Iterable[str]:
    position = path.find("/")
    while position != -1:
        yield path[:position]
        position = path.find("/", position + 1)

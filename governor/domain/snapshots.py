"""rules §11.1: the manifest of an uploaded snapshot, checked whole before anything is kept.

A snapshot is a list of entries `{"path", "mode", "blob"}`; with a `base` (an earlier snapshot's
manifest) the entries list only what changed, and a `null` blob deletes a path. The result is a
manifest `hash_tree` could have produced from a directory with the project's exclusions: every
path relative and normalised, named as git would accept it, not excluded, listed once, never
both a file and a directory. Every refusal names the entry (`entries/<index>/<field>`) and why.
"""

from __future__ import annotations

import os
import re
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from typing import Any

from governor.domain.fields import FieldErrors, FieldsInvalid
from governor.domain.tree import (
    MAX_DEPTH,
    SKIPPED_AT_TOP,
    ManifestEntry,
    _Exclusions,
    refused_name,
)

MODES = ("100644", "100755", "120000")
MAX_PATH_BYTES = 4096
BLOB_ID = re.compile(r"[0-9a-f]{64}")


def _path_problem(path: str, mode: str, exclusions: _Exclusions) -> str | None:
    """Why git, or the tree rules of §10.1, would not hold `path`; None when they would. Each
    test is one pass over the path: none looks at its names, or its directories, one by one
    (its depth times its length, or microseconds a name, for a path of thousands of names)."""
    if not path or "\x00" in path:
        return "must be a non-empty path without NUL"
    raw = path.encode("utf-8", "surrogatepass")
    if len(raw) > MAX_PATH_BYTES:
        return f"longer than {MAX_PATH_BYTES} bytes"
    directories = raw.count(b"/")
    if directories > MAX_DEPTH:  # what `hash_tree` refuses: no tree it hashes holds the path
        return (f"is nested {directories} directories deep; at most {MAX_DEPTH} (the tree "
                "hasher's nesting limit)")
    if path.startswith("/"):
        return "must be relative, not absolute"
    wrapped = b"/" + raw + b"/"
    if b"//" in wrapped or b"/./" in wrapped or b"/../" in wrapped:
        return "must not hold empty, '.' or '..' segments"
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return "must be valid UTF-8"
    top = raw.split(b"/", 1)[0]
    if top in SKIPPED_AT_TOP:
        return f"{top.decode()}/ at the top is never part of a workspace tree"
    refused = refused_name(raw, symlink=mode == "120000")
    if refused is not None:
        return f"git refuses the name {refused.decode()!r}"
    if exclusions.excludes_a_directory_of(raw) or exclusions.excludes(raw, False):
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
        if type(blob) is not str or not BLOB_ID.fullmatch(blob):
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
    elif _directories_over(merged, max_entries):
        errors.add("entries", f"the snapshot holds more than {max_entries} directories (the "
                              "project's tree_max_files bounds its directories too: each is "
                              "a tree object to build)")
    if errors.items:
        raise FieldsInvalid(errors.items)
    _refuse_file_directory_conflicts(merged, changes, errors)
    if errors.items:
        raise FieldsInvalid(errors.items)
    return sorted(merged.values(), key=lambda entry: entry.path.encode())


def _directories_over(paths: Iterable[str], limit: int) -> bool:
    """Do `paths` lie in more than `limit` distinct directories? Sorted, the paths under one
    directory are neighbours, so a path's directories not seen before are those that end after
    its common prefix with the path before it: the cost is the paths' total length, whatever
    their depth."""
    directories, previous = 0, ""
    for path in sorted(paths):
        common = len(os.path.commonprefix((previous, path)))
        directories += path.count("/", common)
        if directories > limit:
            return True
        previous = path
    return False


def _refuse_file_directory_conflicts(merged: dict[str, ManifestEntry],
                                     changes: dict[str, tuple[int, Any]],
                                     errors: FieldErrors) -> None:
    """A path below another path that is a file: name the entry that brought it in. In sorted
    order the paths below `file` come first after `file + "/"`, so one binary search per file
    finds them (looking each directory of each path up would cost its depth times its
    length)."""
    ordered = sorted(merged)
    for file in merged:
        directory = file + "/"
        first = bisect_left(ordered, directory)
        if first < len(ordered) and ordered[first].startswith(directory):
            path = ordered[first]
            blame = path if path in changes else file
            index = changes[blame][0] if blame in changes else None
            where = "entries" if index is None else f"entries/{index}/path"
            errors.add(where, f"{path!r} lies below {file!r}, which is a file")
            return

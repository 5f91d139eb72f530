"""Issue 14 item 6: what changed between two kept trees (SEMANTICS §10), as a reviewer reads it.

Changes come from the two manifests alone (path, mode, blob id): a path in one tree only is
added or removed, in both with another blob or mode it is modified. A text diff is a unified
diff of the two contents when both are UTF-8 without NUL (a symlink's content is its link text),
capped in lines; anything else is shown by its sizes.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from governor.domain.tree import ManifestEntry


@dataclass(frozen=True)
class Change:
    path: str
    kind: str  # "added" | "removed" | "modified"
    before: ManifestEntry | None
    after: ManifestEntry | None


def manifest_changes(before: Iterable[Sequence[str]],
                     after: Iterable[Sequence[str]]) -> list[Change]:
    """Every path whose entry differs between the two manifests, in path order."""
    old = {entry[0]: ManifestEntry(*entry) for entry in before}
    new = {entry[0]: ManifestEntry(*entry) for entry in after}
    changes = []
    for path in sorted(old.keys() | new.keys(), key=lambda p: p.encode()):
        a, b = old.get(path), new.get(path)
        if a == b:
            continue
        kind = "added" if a is None else "removed" if b is None else "modified"
        changes.append(Change(path, kind, a, b))
    return changes


def as_text(data: bytes) -> str | None:
    """The content as text when it is UTF-8 without NUL; None for binary content."""
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def unified_diff(path: str, before: str, after: str, *, max_lines: int) -> tuple[str, int]:
    """The unified diff of two texts (3 lines of context) and how many lines were cut off."""
    lines = list(difflib.unified_diff(before.splitlines(keepends=True),
                                      after.splitlines(keepends=True),
                                      fromfile=f"a/{path}", tofile=f"b/{path}"))
    shown = [line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
             for line in lines[:max_lines]]
    return "".join(shown), max(0, len(lines) - max_lines)

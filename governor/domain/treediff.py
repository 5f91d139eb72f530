"""Issue 14 item 6: what changed between two kept trees (rules §10), as a reviewer reads it.

Changes come from the two manifests alone (path, mode, blob id): a path in one tree only is
added or removed, in both with another blob or mode it is modified. A text diff is a line diff
of the two contents when both are UTF-8 without NUL (a symlink's content is its link text), in
hunks a page shows unified or side by side; anything else is shown by its sizes. A removed
path whose blob reappears at an added path is shown as a rename (issue 28).
"""

from __future__ import annotations

import difflib
import re
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


def with_renames(changes: list[Change]) -> list[Change]:
    """`changes` with each removed path whose blob and mode an added path holds shown as one
    rename (kind "renamed": `before` names the old path). Pairs are made in path order, once
    each; content that changed while it moved stays a removal and an addition."""
    added: dict[tuple[str, str], list[Change]] = {}
    for change in changes:
        if change.kind == "added" and change.after is not None:
            added.setdefault((change.after.blob, change.after.mode), []).append(change)
    paired: dict[str, Change] = {}
    for change in changes:
        if change.kind != "removed" or change.before is None:
            continue
        candidates = added.get((change.before.blob, change.before.mode))
        if candidates:
            target = candidates.pop(0)
            paired[change.path] = paired[target.path] = Change(
                target.path, "renamed", change.before, target.after)
    shown, seen = [], set()
    for change in changes:
        rename = paired.get(change.path)
        if rename is None:
            shown.append(change)
        elif rename.path not in seen:
            seen.add(rename.path)
            shown.append(rename)
    return shown


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "context" | "added" | "removed"
    old: int | None  # line number in the old text (1-based), None for an added line
    new: int | None  # line number in the new text, None for a removed line


@dataclass(frozen=True)
class Hunk:
    header: str  # "@@ -1,3 +1,4 @@"
    lines: list[DiffLine]  # unified order
    rows: list[tuple[DiffLine | None, DiffLine | None]]  # side by side: (old, new)


@dataclass(frozen=True)
class TextDiff:
    hunks: list[Hunk]
    added: int
    removed: int


def _range(start: int, length: int) -> str:
    return f"{start + (1 if length else 0)},{length}" if length != 1 else str(start + 1)


def text_diff(before: list[str], after: list[str], *, context: int = 3) -> TextDiff:
    """The hunks of a line diff (difflib, `context` lines around each change), each in unified
    order and as side-by-side rows (a replaced block's old and new lines paired in order), with
    the counts of added and removed lines. Lines carry numbers only: the caller holds the
    texts."""
    hunks, added, removed = [], 0, 0
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for group in matcher.get_grouped_opcodes(context):
        lines: list[DiffLine] = []
        rows: list[tuple[DiffLine | None, DiffLine | None]] = []
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                    line = DiffLine("context", i + 1, j + 1)
                    lines.append(line)
                    rows.append((line, line))
                continue
            old = [DiffLine("removed", i + 1, None) for i in range(i1, i2)]
            new = [DiffLine("added", None, j + 1) for j in range(j1, j2)]
            lines += old + new
            removed, added = removed + len(old), added + len(new)
            for index in range(max(len(old), len(new))):
                rows.append((old[index] if index < len(old) else None,
                             new[index] if index < len(new) else None))
        first, last = group[0], group[-1]
        header = (f"@@ -{_range(first[1], last[2] - first[1])} "
                  f"+{_range(first[3], last[4] - first[3])} @@")
        hunks.append(Hunk(header, lines, rows))
    return TextDiff(hunks, added, removed)


def word_diff(before: str, after: str) -> tuple[list[tuple[str, bool]], list[tuple[str, bool]]]:
    """Two texts as segments (text, changed): the words (and the spaces between them) only
    one side holds are marked, as a reviewer compares two versions of a sentence."""
    old, new = re.split(r"(\s+)", before), re.split(r"(\s+)", after)
    left: list[tuple[str, bool]] = []
    right: list[tuple[str, bool]] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            left.append(("".join(old[i1:i2]), False))
            right.append(("".join(new[j1:j2]), False))
            continue
        if i2 > i1:
            left.append(("".join(old[i1:i2]), True))
        if j2 > j1:
            right.append(("".join(new[j1:j2]), True))
    return _joined(left), _joined(right)


def _joined(segments: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """Adjacent segments of the same kind as one, and the spaces between two changed words
    counted as changed: "not exist" reads as one change, not two."""
    kept = [segment for segment in segments if segment[0]]
    for index in range(1, len(kept) - 1):
        text, changed = kept[index]
        if not changed and not text.strip() and kept[index - 1][1] and kept[index + 1][1]:
            kept[index] = (text, True)
    joined: list[tuple[str, bool]] = []
    for text, changed in kept:
        if joined and joined[-1][1] == changed:
            joined[-1] = (joined[-1][0] + text, changed)
        else:
            joined.append((text, changed))
    return joined


# How a line comment of an earlier delivery round reads in the next one (issue 40).
ANSWERED, ELSEWHERE, UNANSWERED = "answered", "file changed elsewhere", "not answered"


def comment_answered(before: str | None, after: str | None, line: int) -> str:
    """Whether the next delivery answered a comment on `line` (1-based) of a file whose text was
    `before` and is now `after` (None: not text, or removed): ANSWERED when that line, or the
    place right before or after it, changed (or the file was removed); ELSEWHERE when the file
    changed but not there; UNANSWERED when it is the same. A file that is not text is judged
    whole."""
    if before == after:
        return UNANSWERED
    if before is None or after is None:
        return ANSWERED
    index = line - 1
    matcher = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines(),
                                      autojunk=False)
    for tag, start, end, _, _ in matcher.get_opcodes():
        touched = start in (index, index + 1) if tag == "insert" else start <= index < end
        if tag != "equal" and touched:
            return ANSWERED
    return ELSEWHERE

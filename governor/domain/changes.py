"""rules §14.1–14.4 and §17.3: what an attempt changed since the contract started, and the
checks that judge it — scope (`changes_within`, `unchanged`) and the protected paths a begin
injects.

    changes       per path, between the contract's start tree and the attempt's tree, from their
                  manifests: `added`, `deleted`, `modified` (the blob differs) or `mode-changed`
                  (the exec bit, or file <-> symlink); a rename is a delete and an add, a symlink
                  is its own path (never its target), excluded paths never appear (they are in
                  no tree)
    digest        receipt("workspace-changes", [[path, kind], ...]) in path order: what a
                  certified terminal's attestation carries beside the start tree
    changes_within {paths}   passes when every changed path matches a pattern
    unchanged      {paths}   passes when no changed path matches one (`allowed`: the patterns a
                  person opened with `protected_changes`, only on the injected check)
    sections      only on the injected check: the built-in runner-control sections it protects
                  by content (governor/domain/runner_control.py); a change whose `sections`
                  (the protected sections its content changed, read by the caller) meet them
                  is protected too, named with its section ("pyproject.toml [tool.pytest]")

Patterns use the exclusions' syntax and matcher (governor/domain/tree.py `PathMatcher`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from governor.domain.canonical import receipt
from governor.domain.runner_control import section_label
from governor.domain.tree import PathMatcher

if TYPE_CHECKING:  # the offline verifier ships this module without typing_extensions
    from governor.domain.documents import Check, Claim

SHOWN_PATHS = 20
PROTECTED_CHECK_ID = "protected-paths"
PROTECTED_CLAIM_ID = "protected-paths-unchanged"
MODE_SYMLINK = "120000"


@dataclass(frozen=True)
class WorkspaceChange:
    path: str
    kind: str  # "added" | "deleted" | "modified" | "mode-changed"
    # rule 17.3: the runner-control sections (entry names) its content changed, when read
    sections: tuple[str, ...] = ()

    @property
    def section_labels(self) -> list[str]:
        """The sections its content changed as pages name them beside the path."""
        return [section_label(name) for name in self.sections]


def workspace_changes(start: Iterable[Sequence[str]],
                      attempt: Iterable[Sequence[str]]) -> list[WorkspaceChange]:
    """Rule 14.1: every path whose entry differs between the two manifests, in path order."""
    before = {entry[0]: (entry[1], entry[2]) for entry in start}
    after = {entry[0]: (entry[1], entry[2]) for entry in attempt}
    changes = []
    for path in sorted(before.keys() | after.keys(), key=lambda p: p.encode()):
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        if old is None:
            kind = "added"
        elif new is None:
            kind = "deleted"
        elif old[0] != new[0]:
            kind = "mode-changed"
        else:
            kind = "modified"
        changes.append(WorkspaceChange(path, kind))
    return changes


def changes_digest(changes: Sequence[WorkspaceChange]) -> str:
    return receipt("workspace-changes", [[change.path, change.kind] for change in changes])


def offending(check: Check, changes: Sequence[WorkspaceChange]) -> list[WorkspaceChange]:
    """The changes a scope check refuses (rule 14.2)."""
    matcher = PathMatcher(check["paths"])
    if check["kind"] == "changes_within":
        return [change for change in changes if not matcher.matches(change.path)]
    allowed = PathMatcher(check.get("allowed") or [])
    sections = set(check.get("sections") or [])
    return [change for change in changes
            if (matcher.matches(change.path) or sections.intersection(change.sections))
            and not allowed.matches(change.path)]


def _named(change: WorkspaceChange, sections: Sequence[str]) -> str:
    """A change as evidence names it: its path, with the protected sections its content
    changed (rule 17.3), and its kind."""
    changed = [section_label(name) for name in change.sections if name in sections]
    return " ".join([change.path, *changed, f"({change.kind})"])


def offending_text(found: Sequence[WorkspaceChange], sections: Sequence[str] = ()) -> str:
    """The first SHOWN_PATHS offending paths with their kind of change (and the protected
    `sections` their content changed), and how many more."""
    shown = ", ".join(_named(change, sections) for change in found[:SHOWN_PATHS])
    more = len(found) - SHOWN_PATHS
    return shown + (f" and {more} more" if more > 0 else "")


def scope_result(check: Check, changes: Sequence[WorkspaceChange],
                 since: str = "the contract start") -> tuple[bool, str]:
    """A scope check's result on the attempt's changes (`since` the tree they are from), with
    its evidence sentence."""
    found = offending(check, changes)
    count = len(changes)
    if check["kind"] == "changes_within":
        if not found:
            return True, (f"All {count} changed path{'s' if count != 1 else ''} since "
                          f"{since} match the allowed patterns.")
        return False, (f"{len(found)} changed path{'s' if len(found) != 1 else ''} outside the "
                       f"allowed patterns: {offending_text(found)}.")
    if not found:
        return True, (f"None of the {count} changed path{'s' if count != 1 else ''} since "
                      f"{since} matches the protected patterns.")
    return False, (f"{len(found)} protected path{'s' if len(found) != 1 else ''} changed since "
                   f"{since}: {offending_text(found, check.get('sections') or [])}.")


def left_in(manifest: Iterable[Sequence[str]],
            exclusions: Sequence[str]) -> list[Sequence[str]]:
    """The entries of a tree recorded under other exclusions that `exclusions` leave in (as
    a commit's tree leaves them out, governor/domain/commits.py): the session's reference
    compared with a tree hashed after the project's exclusions changed."""
    matcher = PathMatcher(exclusions)
    return [entry for entry in manifest if not matcher.matches(entry[0])]


def overlaid(reference: Iterable[Sequence[str]], attempt: Iterable[Sequence[str]],
             protected: Sequence[WorkspaceChange]) -> list[list[str]]:
    """Rule 17.2: the attempt's manifest with its `protected` changes against the reference
    undone — each such path as the reference holds it (restored, reverted), or left out where
    the reference has none (an added file) — in path order: what a trusted run executes on."""
    undone = {change.path for change in protected}
    kept = {entry[0]: list(entry) for entry in attempt if entry[0] not in undone}
    kept.update((entry[0], list(entry)) for entry in reference if entry[0] in undone)
    return [kept[path] for path in sorted(kept, key=lambda p: p.encode())]


def protected_check(patterns: Sequence[str], opened: Sequence[str],
                    sections: Sequence[str] = (),
                    exempt: Sequence[Mapping[str, str]] = ()) -> Check:
    """Rule 14.3: the injected check over the effective protected set (`opened`: the patterns a
    person's evidence approval opens, rule 14.4; `sections`: the runner-control sections
    protected by content and `exempt` the built-in entries the project removed, with their
    reasons, rule 17.3 — each only when there are some, so earlier contracts read the same)."""
    check: Check = {"id": PROTECTED_CHECK_ID, "kind": "unchanged",
                    "paths": sorted(set(patterns))}
    if opened:
        check["allowed"] = sorted(set(opened))
    if sections:
        check["sections"] = sorted(set(sections))
    if exempt:
        check["exempt"] = [{"entry": item["entry"], "reason": item["reason"]}
                           for item in exempt]
    return check


def protected_claim() -> Claim:
    return {"id": PROTECTED_CLAIM_ID,
            "statement": "The paths the project and its verifier profiles protect (tests and "
                         "what configures them) are unchanged, except those a person opened.",
            "importance": "critical", "verification": "deterministic",
            "checkIds": [PROTECTED_CHECK_ID], "minimumIndependentSources": 1}

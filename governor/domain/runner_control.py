"""rules §17.3: runner control is protected by default.

What configures how a test runner runs — which tests it collects, which plugins it loads, what
`npm test` means — decides the evidence of a trusted run as much as the tests do. This module is
the one place that says which files and file sections that is, per ecosystem, each with the
reason it is there. The list joins the protected set of every contract that names a verifier
profile (`governor/services/contracts.py`), beside the project's and the profiles'
`protected_paths`, so an operator lists only what is theirs (their tests).

    whole-file entries   path patterns (the exclusions' syntax): any change to a matching path
                         is a protected change (`governor/domain/changes.py`)
    section entries      a table or key of a file that also holds what a task may change
                         (dependencies): judged by content, the section parsed on both sides
                         with tomllib or json; a file that cannot be parsed (or is a symlink, or
                         cannot be read) counts as changed in every protected section it could
                         hold

An operator removes an entry only with a reason (`runner_control_exempt`, validated here):
`[{"entry": "<an entry's name>", "reason": "…"}]`.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from governor.domain.fields import FieldErrors, FieldsInvalid, join_path, string_field
from governor.domain.tree import PathMatcher

MAX_REASON_CHARS = 500


@dataclass(frozen=True)
class Entry:
    """One built-in entry: `pattern` the paths it covers; for a section entry, the `section`
    as shown (`[tool.pytest.ini_options]`, `scripts`), its `keys` inside the parsed file and the
    file's `syntax`."""

    ecosystem: str
    pattern: str
    reason: str
    section: str | None = None
    keys: tuple[str, ...] = ()
    syntax: str | None = None  # "toml" | "json", for a section entry
    leave_out: tuple[str, ...] = ()  # keys of the section another entry protects

    @property
    def name(self) -> str:
        """How the docs, an exemption and a contract's check name it."""
        return self.pattern if self.section is None else f"{self.pattern} {self.section}"


def _node(key: str) -> Entry:
    return Entry("node", "**/package.json", f"its `{key}` key configures the test runner",
                 section=key, keys=(key,), syntax="json")


ENTRIES: tuple[Entry, ...] = (
    Entry("python", "**/conftest.py", "pytest loads every conftest.py on the way to a test as a "
                                      "plugin: it can skip, deselect or rewrite any test"),
    Entry("python", "**/pytest.ini", "pytest's own configuration file, read before any other"),
    Entry("python", "**/.pytest.ini", "the hidden pytest.ini, read before pyproject.toml"),
    Entry("python", "**/setup.cfg", "its [tool:pytest] section configures pytest"),
    Entry("python", "**/tox.ini", "its [pytest] section configures pytest"),
    Entry("python", "**/sitecustomize.py", "Python imports it at start-up, before any test"),
    Entry("python", "**/usercustomize.py", "Python imports it at start-up, before any test"),
    Entry("python", "**/*.pth", "a path file's import lines run at start-up"),
    Entry("python", "**/*.dist-info/**", "installed-package metadata: an entry_points.txt "
                                         "[pytest11] entry is a plugin pytest loads itself"),
    Entry("python", "**/*.egg-info/**", "the same metadata in setuptools' older layout"),
    Entry("python", "**/pytest.py", "`python -m pytest` runs the first `pytest` on the path, "
                                    "and the working directory comes first: the runner itself"),
    Entry("python", "**/pytest/**", "a package named pytest shadows the runner the same way"),
    Entry("python", "**/_pytest/**", "pytest's own implementation package, shadowed the same way"),
    Entry("python", "**/pyproject.toml", "pytest's configuration table",
          section="[tool.pytest.ini_options]", keys=("tool", "pytest", "ini_options"),
          syntax="toml"),
    Entry("python", "**/pyproject.toml", "pytest's native configuration table (pytest 9)",
          section="[tool.pytest]", keys=("tool", "pytest"), syntax="toml",
          leave_out=("ini_options",)),
    _node("scripts"),
    *(_node(key) for key in ("jest", "mocha", "vitest", "ava", "c8", "nyc")),
    Entry("node", "**/jest.config.*", "Jest's configuration file"),
    Entry("node", "**/vitest.config.*", "Vitest's configuration file"),
    Entry("node", "**/.mocharc*", "Mocha's configuration file"),
)
ENTRIES_BY_NAME = {entry.name: entry for entry in ENTRIES}
SECTION_ENTRIES = tuple(entry for entry in ENTRIES if entry.section is not None)
_SECTION_PATHS = {entry.name: PathMatcher([entry.pattern]) for entry in SECTION_ENTRIES}


def section_label(name: str) -> str:
    """The section a section entry's name protects, as evidence names it beside the path."""
    entry = ENTRIES_BY_NAME.get(name)
    return entry.section if entry is not None and entry.section is not None else name


def validate_exemptions(value: Any, path: str = "runner_control_exempt") -> list[dict[str, str]]:
    """The operator's removals from the built-in list: each names a built-in entry once and
    gives a reason (trimmed, 1..MAX_REASON_CHARS); FieldsInvalid naming every refused item."""
    errors = FieldErrors()
    if type(value) is not list:
        errors.add(path, 'must be a list of {"entry": …, "reason": …} objects')
        raise FieldsInvalid(errors.items)
    exemptions: list[dict[str, str]] = []
    seen: set[str] = set()
    for index, item in enumerate(value):
        where = join_path(path, index)
        if type(item) is not dict:
            errors.add(where, 'must be an object {"entry": …, "reason": …}')
            continue
        errors.keys(where, item, ("entry", "reason"), ("entry", "reason"))
        if "entry" not in item or "reason" not in item:
            continue
        before = len(errors.items)
        entry = string_field(errors, join_path(where, "entry"), item["entry"])
        if entry is not None and entry not in ENTRIES_BY_NAME:
            errors.add(join_path(where, "entry"),
                       f"{entry!r} is not a built-in runner-control entry (rules §17.3 lists "
                       "them: e.g. '**/setup.cfg' or '**/package.json scripts')")
        elif entry in seen:
            errors.add(join_path(where, "entry"), f"{entry!r} is exempted twice")
        if entry is not None:
            seen.add(entry)
        reason = string_field(errors, join_path(where, "reason"), item["reason"])
        if reason is not None and not 1 <= len(reason.strip()) <= MAX_REASON_CHARS:
            errors.add(join_path(where, "reason"),
                       f"must say why, in 1..{MAX_REASON_CHARS} characters after trimming")
        if len(errors.items) == before and entry is not None and reason is not None:
            exemptions.append({"entry": entry, "reason": reason.strip()})
    if errors.items:
        raise FieldsInvalid(errors.items)
    return exemptions


@dataclass(frozen=True)
class InForce:
    """What the built-in list protects in a project: whole-file `paths` and section names, and
    the entries it does not (`exempt`, each with its reason)."""

    paths: list[str]
    sections: list[str]
    exempt: list[dict[str, str]]


def in_force(exemptions: Sequence[Mapping[str, str]]) -> InForce:
    """The built-in entries a project's (validated) exemptions leave in force."""
    exempt = {item["entry"] for item in exemptions}
    kept = [entry for entry in ENTRIES if entry.name not in exempt]
    return InForce(paths=sorted({entry.pattern for entry in kept if entry.section is None}),
                   sections=sorted(entry.name for entry in kept if entry.section is not None),
                   exempt=[{"entry": item["entry"], "reason": item["reason"]}
                           for item in exemptions])


def sections_at(path: str) -> list[str]:
    """The section entries that cover `path` (`**/pyproject.toml` ones for any pyproject.toml)."""
    return [entry.name for entry in SECTION_ENTRIES if _SECTION_PATHS[entry.name].matches(path)]


class _Unparsable(Exception):
    pass


def _parsed(entry: Entry, content: bytes) -> object:
    try:
        if entry.syntax == "toml":
            document: object = tomllib.loads(content.decode("utf-8"))
        else:
            document = json.loads(content)
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _Unparsable from None
    if not isinstance(document, dict):  # package.json must be an object
        raise _Unparsable
    return document


def _section(entry: Entry, document: object) -> str | None:
    """The section's value as canonical JSON text (None: absent). A non-table on the way is
    the section's value too: what is there is compared, whatever it is."""
    node = document
    for key in entry.keys:
        if not isinstance(node, dict):
            break
        if key not in node:
            return None
        node = node[key]
    if isinstance(node, dict) and entry.leave_out:
        node = {key: value for key, value in node.items() if key not in entry.leave_out}
        if not node:
            return None
    # json.dumps tells true from 1 and 1.0 from 1; TOML's dates are compared by their text.
    return json.dumps(node, sort_keys=True, ensure_ascii=False, default=str)


def changed_sections(path: str, before: bytes | None, after: bytes | None) -> list[str]:
    """Rule 17.3: the section entries covering `path` whose section differs between its two
    contents (None: the file is absent there). A side that cannot be parsed differs."""
    changed = []
    for name in sections_at(path):
        entry = ENTRIES_BY_NAME[name]
        try:
            old = None if before is None else _section(entry, _parsed(entry, before))
            new = None if after is None else _section(entry, _parsed(entry, after))
        except _Unparsable:
            changed.append(name)
            continue
        if old != new:
            changed.append(name)
    return changed

"""A checkout is the certified bytes (rules §17.9): the git attributes a tree's own
`.gitattributes` files give its paths, and those that can make a checkout differ from the blobs.

Git converts content on checkout for a path whose attributes say so: `ident` expands `$Id$`,
`text`, `crlf` and `eol` convert line endings, `working-tree-encoding` re-encodes, `filter` runs a
smudge command. A tree in which any of these six is *set* (`ident`) or *valued* (`eol=crlf`,
`text=auto`) for any of its paths is refused, whatever the path holds (an `ident` on a file
without `$Id$` changes nothing today and everything after the next edit). *Unset* (`-text`, so
`binary`) and *unspecified* (`!eol`) never change bytes and are fine, as is every other attribute
(`diff`, `merge`, `export-ignore`, `linguist-*`, ...).

Only the `.gitattributes` files of the tree count: they are what travels with a clone.
`$GIT_DIR/info/attributes`, `core.attributesFile` and the system file belong to one checkout's
repository, never to the content (and an `info/attributes` that unsets `ident` would hide a
committed one from `git check-attr`).

The reading is deliberately wider than git's, never narrower, so that no git version or
configuration sees an attribute this module does not:

- any positive assertion counts, even when a later line or a deeper file unsets it again;
- patterns match case-insensitively (a clone on a case-insensitive file system has
  `core.ignorecase`), as do the names of the attributes files (`.GitAttributes`);
- a macro is expanded wherever it is defined (git honours definitions in the top-level file only),
  with every definition of its name (`binary` keeps its built-in one too), transitively;
- a line with attribute names git refuses is read anyway; a quoted pattern is read both unquoted
  and as written (git before 2.9 took the quotes literally);
- `**` matches across directories wherever it appears.

Patterns otherwise follow gitattributes(5): blank lines and `#` comments are skipped; a pattern
without a slash matches a path's name at any depth below the file's directory, one with a slash
matches the path relative to it (a leading slash anchors, `*` and `?` stop at `/`, `**/` is any
number of directories, `[...]` a byte class); a pattern ending in `/` matches directories only, so
never a file; a negative pattern (`!x`) is ignored, as git ignores it. Matching is over the UTF-8
bytes of names, as git's is.

Pure Python, the standard library only: the server judges a workspace tree with it before
certifying, and the client package ships it for `governor.domain.commits` (verify --commit, the
git hooks, `governor-agent commit`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

ATTRIBUTES_FILE = ".gitattributes"
CHECKOUT_ATTRIBUTES = frozenset({"crlf", "eol", "filter", "ident", "text",
                                 "working-tree-encoding"})
BUILTIN_MACROS: Mapping[str, tuple[str, ...]] = {"binary": ("-diff", "-merge", "-text")}
_BLANK = " \t\r\n"
_CLASSES = {"alnum": "0-9A-Za-z", "alpha": "A-Za-z", "blank": " \\t", "cntrl": "\\x00-\\x1f\\x7f",
            "digit": "0-9", "graph": "\\x21-\\x7e", "lower": "a-z", "print": "\\x20-\\x7e",
            "punct": "!-/:-@\\[-`{-~", "space": " \\t\\n\\r\\x0b\\x0c", "upper": "A-Z",
            "xdigit": "0-9A-Fa-f"}
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
            '"': '"', "\\": "\\"}


@dataclass(frozen=True)
class CheckoutAttribute:
    """A path of the tree a checkout would convert: the attribute's state as written
    (`ident`, `eol=crlf`), the line that gives it, and the macro it came through, if any."""

    path: str
    state: str
    source: str  # "sub/.gitattributes:3"
    macro: str | None = None

    def __str__(self) -> str:
        through = f", through the macro `{self.macro}`" if self.macro else ""
        return f"`{self.state}` applies to {self.path} ({self.source}{through})"


def is_attributes_file(path: str) -> bool:
    return _folded(path.rsplit("/", 1)[-1]) == ATTRIBUTES_FILE


def checkout_attributes(paths: Iterable[str],
                        files: Mapping[str, bytes]) -> list[CheckoutAttribute]:
    """Every (path, attribute) of `paths` that a checkout would convert, given the content of
    the tree's attributes files (`files`: path -> bytes, as `is_attributes_file` names them),
    sorted by path; one finding per path and attribute, the first line giving it."""
    lines = {source: _parse(data) for source, data in files.items()}
    macros: dict[str, list[tuple[str, ...]]] = {
        name: [states] for name, states in BUILTIN_MACROS.items()}
    for parsed in lines.values():
        for rule in parsed:
            if rule.macro is not None:
                macros.setdefault(rule.macro, []).append(rule.states)
    rules = []  # (its file's directory, "file:line", its matchers, the converting states)
    for source, parsed in sorted(lines.items()):
        base = _bytes_text(source.rsplit("/", 1)[0] if "/" in source else "")
        for rule in parsed:
            if rule.macro is None:
                converting = _converting(rule.states, macros)
                if converting:
                    rules.append((base, f"{source}:{rule.line}", rule.matchers, converting))
    found: dict[tuple[str, str], CheckoutAttribute] = {}
    for path in paths:
        name = _bytes_text(path)
        for base, source, matchers, converting in rules:
            if any(matcher.matches(name, base) for matcher in matchers):
                for attribute, (state, macro) in converting.items():
                    found.setdefault((path, attribute),
                                     CheckoutAttribute(path, state, source, macro))
    return [found[key] for key in sorted(found)]


def refusal_text(found: Sequence[CheckoutAttribute], *, limit: int = 5) -> str:
    """What a refusal says: the attributes and paths (the first `limit`), and what to do."""
    named = "; ".join(str(item) for item in found[:limit])
    more = f"; and {len(found) - limit} more" if len(found) > limit else ""
    return (f"a checkout of this content would not be its bytes: the git attribute {named}"
            f"{more}. Remove it from .gitattributes: `ident`, `filter`, `eol`, `text`, `crlf` "
            f"and `working-tree-encoding` convert content on checkout (unset ones, such as "
            f"`-text` or `binary`, do not)")


# --- reading .gitattributes -------------------------------------------------------------------


@dataclass(frozen=True)
class _Rule:
    line: int
    states: tuple[str, ...]
    macro: str | None  # the name a `[attr]name ...` line defines
    matchers: tuple[_Matcher, ...] = ()


def _parse(data: bytes) -> list[_Rule]:
    text = _bytes_text(data.removeprefix(b"\xef\xbb\xbf"))
    rules = []
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.lstrip(_BLANK)
        if not line or line.startswith("#"):
            continue
        written = re.split(f"[{_BLANK}]", line, maxsplit=1)
        token, rest = written[0], (written[1] if len(written) > 1 else "")
        states = tuple(rest.split())
        if token.startswith("[attr]"):
            rules.append(_Rule(number, states, token.removeprefix("[attr]")))
            continue
        patterns = [token]
        if token.startswith('"'):
            unquoted = _unquoted(line)
            if unquoted is not None:
                patterns, states = [unquoted[0], token], tuple(unquoted[1].split())
        matchers = tuple(m for m in map(_Matcher.of, patterns) if m is not None)
        if matchers:
            rules.append(_Rule(number, states, None, matchers))
    return rules


def _unquoted(line: str) -> tuple[str, str] | None:
    """(the C-quoted pattern at the start of `line`, the rest), None when it is not one."""
    out: list[str] = []
    index = 1
    while index < len(line):
        char = line[index]
        if char == '"':
            return "".join(out), line[index + 1:]
        if char == "\\":
            following = line[index + 1:index + 2]
            if following in _ESCAPES:
                out.append(_ESCAPES[following])
                index += 2
                continue
            octal = line[index + 1:index + 4]
            if len(octal) == 3 and all(c in "01234567" for c in octal) and octal[0] in "0123":
                out.append(chr(int(octal, 8)))
                index += 4
                continue
            return None
        out.append(char)
        index += 1
    return None


def _converting(states: Sequence[str], macros: Mapping[str, list[tuple[str, ...]]],
                macro: str | None = None, seen: frozenset[str] = frozenset(),
                ) -> dict[str, tuple[str, str | None]]:
    """The checkout attributes `states` set or value, directly or through macros: attribute ->
    (its state as written, the macro it came through)."""
    found: dict[str, tuple[str, str | None]] = {}
    for state in states:
        if state.startswith(("-", "!")):
            continue
        name = state.split("=", 1)[0]
        if name in CHECKOUT_ATTRIBUTES:
            found.setdefault(name, (state, macro))
        if name in macros and name not in seen:
            for definition in macros[name]:
                for attribute, given in _converting(definition, macros, macro or name,
                                                    seen | {name}).items():
                    found.setdefault(attribute, given)
    return found


# --- matching paths -----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Matcher:
    """One pattern: a regular expression over the case-folded name (no slash in the pattern)
    or over the path relative to the attributes file's directory."""

    expression: re.Pattern[str]
    basename: bool

    @classmethod
    def of(cls, pattern: str) -> _Matcher | None:
        if pattern.startswith("!") or pattern.endswith("/") or not pattern:
            return None  # negative: ignored by git; a directory's: never a file's
        basename = "/" not in pattern
        body = pattern.removeprefix("/")
        try:
            expression = re.compile(_regex(body, pathname=not basename),
                                    re.ASCII | re.IGNORECASE | re.DOTALL)
        except _Unmatchable:
            return None
        return cls(expression, basename)

    def matches(self, path: str, base: str) -> bool:
        """Does the pattern of an attributes file in directory `base` match `path` (both in
        the UTF-8-bytes-as-Latin-1 form), ASCII letters in either case?"""
        if base:
            if not _folded(path).startswith(_folded(base) + "/"):
                return False
            path = path[len(base) + 1:]
        if self.basename:
            path = path.rsplit("/", 1)[-1]
        return self.expression.fullmatch(path) is not None


class _Unmatchable(Exception):
    """A pattern git never matches anything with (an unterminated class, an unknown one)."""


def _regex(pattern: str, *, pathname: bool) -> str:
    any_but_slash = "[^/]" if pathname else "."
    out, index = [], 0
    while index < len(pattern):
        char = pattern[index]
        if char == "*":
            end = index
            while end < len(pattern) and pattern[end] == "*":
                end += 1
            if end - index == 1:
                out.append(f"{any_but_slash}*")
            elif pattern[end:end + 1] == "/":
                out.append("(?:.*/)?")
                end += 1
            else:
                out.append(".*")
            index = end
        elif char == "?":
            out.append(any_but_slash)
            index += 1
        elif char == "[":
            members, index = _bracket(pattern, index + 1)
            out.append(f"(?!/){members}" if pathname else members)
        elif char == "\\":
            if index + 1 >= len(pattern):
                raise _Unmatchable
            out.append(re.escape(pattern[index + 1]))
            index += 2
        else:
            out.append(re.escape(char))
            index += 1
    return "".join(out)


def _bracket(pattern: str, index: int) -> tuple[str, int]:
    """The regular-expression class of the bracket expression starting after `[` at `index`,
    and the index after its `]`."""
    negated = pattern[index:index + 1] in ("!", "^")
    index += negated
    members: list[str] = []
    first = True
    while True:
        if index >= len(pattern):
            raise _Unmatchable
        char = pattern[index]
        if char == "]" and not first:
            break
        first = False
        if char == "\\":
            if index + 1 >= len(pattern):
                raise _Unmatchable
            low, index = pattern[index + 1], index + 2
        elif pattern.startswith("[:", index):
            end = pattern.find(":]", index + 2)
            name = pattern[index + 2:end] if end >= 0 else ""
            if end >= 0 and "]" not in name:
                if name not in _CLASSES:
                    raise _Unmatchable
                members.append(_CLASSES[name])
                index = end + 2
                continue
            low, index = char, index + 1
        else:
            low, index = char, index + 1
        if pattern[index:index + 1] == "-" and pattern[index + 1:index + 2] not in ("", "]"):
            high = pattern[index + 1]
            index += 2
            if high == "\\":
                if index >= len(pattern):
                    raise _Unmatchable
                high, index = pattern[index], index + 1
            if low <= high:
                members.append(f"{re.escape(low)}-{re.escape(high)}")
            continue
        members.append(re.escape(low))
    return f"[{'^' if negated else ''}{''.join(members)}]" if members else (
        ".(?<!.)" if not negated else "."), index + 1


def _folded(text: str) -> str:
    return text.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _bytes_text(value: str | bytes) -> str:
    """Names as git matches them, byte by byte: UTF-8 bytes, each one character."""
    data = value.encode("utf-8", "surrogateescape") if isinstance(value, str) else value
    return data.decode("latin-1")

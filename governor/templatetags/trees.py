"""Template filters for workspace tree ids (rules §10.1)."""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from typing import Any
from urllib.parse import quote

from django import template
from django.urls import reverse
from django.utils.http import RFC3986_SUBDELIMS
from django.utils.safestring import SafeString, mark_safe

from governor.domain.tree import TREE_ID_PREFIX
from governor.selectors.treediff import ShownChange, ShownLine

register = template.Library()

SHORT_TREE_CHARS = 8


@register.filter
def tree_short(tree_id: object) -> str:
    """The short form of `gittree:sha256:<hex>`: its first 8 hex digits, as git abbreviates."""
    text = str(tree_id)
    return text.removeprefix(TREE_ID_PREFIX)[:SHORT_TREE_CHARS]


@register.filter
def path_breaks(path: object) -> SafeString:
    """A file path that breaks across lines only after a `/` (a `<wbr>` there; the `path`
    class keeps the browser from breaking inside a name, "calc.\npy")."""
    return mark_safe("/<wbr>".join(escape(part) for part in str(path).split("/")))  # noqa: S308


@register.filter
def by_key(mapping: object, key: object) -> object:
    """`mapping[key]`, or None: a template's lookup by a variable key."""
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def byte_count(size: int) -> str:
    """A size as the diff pages show it: exact, in bytes ("3,090 B")."""
    return f"{size:,} B"


@register.filter
def pair(first: object, second: object) -> list[object]:
    """[first, second]: a side-by-side diff row's two sides, to loop over."""
    return [first, second]


def _mark(kind: str) -> str:
    if kind == "added":
        return '<span aria-hidden="true">+</span><span class="visually-hidden">added</span>'
    if kind == "removed":
        return '<span aria-hidden="true">−</span><span class="visually-hidden">removed</span>'
    return ""


def _comment_link(shown: ShownChange, view: str) -> Callable[[ShownLine], str]:
    """`line -> the link that opens the comment form on it`, for the lines of one file."""
    quoted, path = quote(shown.change.path), escape(shown.change.path)

    def link(line: ShownLine) -> str:
        number = f"old line {line.old}" if line.kind == "removed" else f"line {line.new}"
        return (f' <a class="comment-link" href="?diff={view}&amp;path={quoted}&amp;comment='
                f'{line.spot}#comment-form" aria-label="Comment on {number} of {path}">✎</a>')
    return link


@register.simple_tag
def diff_table(shown: Any, view: str, commenting: bool) -> SafeString:
    """The diff table of one file (`sessions/partials/changes.html` draws the same with its
    comments, for a file that has some): built here, as a page of a thousand changed files
    would spend seconds in the template language row by row."""
    anchor, path = shown.anchor, escape(shown.change.path)
    comment_link = _comment_link(shown, view)
    parts: list[str] = []
    if view == "split":
        parts.append(f'<table class="diff diff-split"><caption class="visually-hidden">'
                     f'Side-by-side diff of {path}</caption><thead class="visually-hidden"><tr>'
                     '<th scope="col">Old line</th><th scope="col">Old change</th>'
                     '<th scope="col">Old text</th><th scope="col">New line</th>'
                     '<th scope="col">New change</th><th scope="col">New text</th></tr></thead>')
        empty = ('<td class="num empty"></td><td class="mark empty"></td>'
                 '<td class="code empty"></td>')
        for hunk in shown.hunks:
            parts.append(f'<tbody><tr class="hunk"><td colspan="6">{escape(hunk.header)}'
                         "</td></tr>")
            for old, new in hunk.rows:
                cells = []
                for line, left in ((old, True), (new, False)):
                    if line is None:
                        cells.append(empty)
                        continue
                    kind = line.kind
                    ident = (f' id="{anchor}-{line.spot}"' if not left or kind != "context"
                             else "")
                    number = (str(line.old) if left else
                              f'<a href="#{anchor}-{line.spot}">{line.new}</a>')
                    link = (comment_link(line)
                            if commenting and (not left or kind == "removed") else "")
                    cells.append(f'<td class="num line-{kind}"{ident}>{number}{link}</td>'
                                 f'<td class="mark line-{kind}">{_mark(kind)}</td>'
                                 f'<td class="code line-{kind}">{line.html}</td>')
                parts.append(f"<tr>{''.join(cells)}</tr>")
            parts.append("</tbody>")
    else:
        parts.append(f'<table class="diff diff-unified"><caption class="visually-hidden">'
                     f'Diff of {path}</caption><thead class="visually-hidden"><tr>'
                     '<th scope="col">Old line</th><th scope="col">New line</th>'
                     '<th scope="col">Change</th><th scope="col">Text</th></tr></thead>')
        for hunk in shown.hunks:
            parts.append(f'<tbody><tr class="hunk"><td colspan="4">{escape(hunk.header)}'
                         "</td></tr>")
            for line in hunk.lines:
                old = str(line.old) if line.old else ""
                new = f'<a href="#{anchor}-{line.spot}">{line.new}</a>' if line.new else ""
                link = comment_link(line) if commenting else ""
                parts.append(f'<tr class="line-{line.kind}" id="{anchor}-{line.spot}">'
                             f'<td class="num">{old}</td><td class="num">{new}{link}</td>'
                             f'<td class="mark">{_mark(line.kind)}</td>'
                             f'<td class="code">{line.html}</td></tr>')
            parts.append("</tbody>")
    parts.append("</table>")
    return mark_safe("".join(parts))  # noqa: S308 - paths escaped, lines escaped by Pygments


def _url_of(name: str, session_id: object, tree: str) -> Callable[[str], str]:
    """`path -> reverse(name, args=[session_id, tree, path])`, reversed once: a path argument
    is quoted as `reverse` quotes it (the page of a thousand files would spend its time
    reversing)."""
    stem = reverse(name, args=[session_id, tree, "-"]).removesuffix("-")
    return lambda path: stem + quote(path, safe=RFC3986_SUBDELIMS + "/~:@")


def _badge(kind: str) -> str:
    tone = {"added": "ok", "removed": "bad"}.get(kind, "info")
    return f'<span class="badge {tone}">{kind}</span>'


@register.simple_tag
def file_list(changes: Any, session_id: object) -> SafeString:
    """The table of every changed file (a `TreeChanges`): its path links to its section on the
    page, or, for a file past the page's caps, to its own view. Built here, as `diff_table`."""
    views = {tree: _url_of("sessions:tree_view", session_id, tree)
             for tree in (changes.before, changes.after)}
    rows = []
    for shown in changes.changes:
        change = shown.change
        name: str = path_breaks(change.path)
        if change.kind == "renamed":
            name = f"{path_breaks(change.before.path)} → {name}"
        href = (f"#{shown.anchor}" if shown.sectioned else
                escape(views[changes.after if change.after else changes.before](change.path)))
        lines = (f'<span class="count-added">+{shown.added}</span> '
                 f'<span class="count-removed">−{shown.removed}</span>'
                 if shown.hunks is not None else f'<span class="muted">{escape(shown.note)}</span>')
        size = " → ".join(byte_count(n) for n in shown.sizes if n is not None)
        rows.append(f'<tr><td>{_badge(change.kind)}</td><td class="mono path"><a href="{href}">'
                    f'{name}</a></td><td class="nowrap">{lines}</td><td class="nowrap small">'
                    f"{size}</td></tr>")
    return mark_safe(  # noqa: S308 - paths and notes escaped, the rest is ours
        '<table class="file-list"><caption class="visually-hidden">Changed files</caption>'
        '<thead><tr><th scope="col">Change</th><th scope="col">File</th><th scope="col">Lines'
        f'</th><th scope="col">Size</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')

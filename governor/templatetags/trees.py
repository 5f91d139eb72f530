"""Template filters for workspace tree ids (rules §10.1)."""

from __future__ import annotations

from html import escape
from typing import Any
from urllib.parse import quote

from django import template
from django.utils.safestring import SafeString, mark_safe

from governor.domain.tree import TREE_ID_PREFIX

register = template.Library()

SHORT_TREE_CHARS = 8


@register.filter
def tree_short(tree_id: Any) -> str:
    """The short form of `gittree:sha256:<hex>`: its first 8 hex digits, as git abbreviates."""
    text = str(tree_id)
    return text.removeprefix(TREE_ID_PREFIX)[:SHORT_TREE_CHARS]


@register.filter
def by_key(mapping: Any, key: Any) -> Any:
    """`mapping[key]`, or None: a template's lookup by a variable key."""
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def pair(first: Any, second: Any) -> list[Any]:
    """[first, second]: a side-by-side diff row's two sides, to loop over."""
    return [first, second]


def _mark(kind: str) -> str:
    if kind == "added":
        return '<span aria-hidden="true">+</span><span class="visually-hidden">added</span>'
    if kind == "removed":
        return '<span aria-hidden="true">−</span><span class="visually-hidden">removed</span>'
    return ""


def _comment_link(shown: Any, line: Any, view: str) -> str:
    number = f"old line {line.old}" if line.kind == "removed" else f"line {line.new}"
    return (f' <a class="comment-link" href="?diff={view}&amp;path={quote(shown.change.path)}'
            f'&amp;comment={line.spot}#comment-form" aria-label="Comment on {number} of '
            f'{escape(shown.change.path)}">✎</a>')


@register.simple_tag
def diff_table(shown: Any, view: str, commenting: bool) -> SafeString:
    """The diff table of one file (`sessions/partials/changes.html` draws the same with its
    comments, for a file that has some): built here, as a page of a thousand changed files
    would spend seconds in the template language row by row."""
    anchor, path = shown.anchor, escape(shown.change.path)
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
                    link = (_comment_link(shown, line, view)
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
                link = _comment_link(shown, line, view) if commenting else ""
                parts.append(f'<tr class="line-{line.kind}" id="{anchor}-{line.spot}">'
                             f'<td class="num">{old}</td><td class="num">{new}{link}</td>'
                             f'<td class="mark">{_mark(line.kind)}</td>'
                             f'<td class="code">{line.html}</td></tr>')
            parts.append("</tbody>")
    parts.append("</table>")
    return mark_safe("".join(parts))  # noqa: S308 - paths escaped, lines escaped by Pygments

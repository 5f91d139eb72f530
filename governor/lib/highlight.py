"""Syntax highlighting of workspace text for the pages, with Pygments: everything is escaped
by its HTML formatter, so what a file holds is only ever shown as text."""

from __future__ import annotations

from functools import lru_cache
from html import escape
from posixpath import basename
from typing import Any

from django.utils.safestring import SafeString, mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import TextLexer, find_lexer_class_for_filename
from pygments.token import STANDARD_TYPES

MAX_HIGHLIGHTED_CHARS = 256 * 1024  # beyond this, plain (escaped) text: highlighting is slow


@lru_cache(maxsize=4096)
def _lexer_class(name: str) -> type[Lexer]:
    """The lexer for a file called `name`, as Pygments' `get_lexer_for_filename` chooses it
    without the content — a function of the name alone, and a scan of every lexer's patterns
    (about 0.3 ms), so it is remembered."""
    found: type[Lexer] | None = find_lexer_class_for_filename(name)
    return found or TextLexer


def _lexer(path: str, text: str, **options: Any) -> Lexer:
    """Plain text when `text` is over MAX_HIGHLIGHTED_CHARS, else the lexer for its name."""
    chosen = _lexer_class(basename(path)) if len(text) <= MAX_HIGHLIGHTED_CHARS else TextLexer
    return chosen(**options)


def highlighted(path: str, text: str) -> SafeString:
    """`text` as HTML spans for a file named `path` (a lexer chosen by its name; plain text
    when none fits, or when it is over MAX_HIGHLIGHTED_CHARS)."""
    lexer = _lexer(path, text, stripnl=False)
    formatter = HtmlFormatter(nowrap=True)
    html: str = highlight(text, lexer, formatter)
    return mark_safe(html)  # noqa: S308 - Pygments' formatter escapes all of it


def _css_class(token_type: Any) -> str:
    while token_type not in STANDARD_TYPES:
        token_type = token_type.parent
    return str(STANDARD_TYPES[token_type])


def highlighted_lines(path: str, text: str) -> list[SafeString]:
    """`text` highlighted as `highlighted` does, one escaped HTML string per line (without its
    line break), so a diff or a file view can number and anchor every line."""
    lexer = _lexer(path, text, stripnl=False, ensurenl=False)
    lines: list[list[str]] = [[]]
    for token_type, value in lexer.get_tokens(text):
        css = _css_class(token_type)
        for index, part in enumerate(value.split("\n")):
            if index:
                lines.append([])
            if part:
                lines[-1].append(f'<span class="{css}">{escape(part)}</span>' if css
                                 else escape(part))
    if len(lines) > 1 and not lines[-1] and text.endswith("\n"):
        lines.pop()
    # Every part escaped. SafeString itself, not mark_safe: its lazy-string check is a quarter
    # of a diff's time at thousands of lines.
    return [SafeString("".join(parts)) for parts in lines]

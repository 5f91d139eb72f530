"""Syntax highlighting of workspace text for the pages, with Pygments: everything is escaped
by its HTML formatter, so what a file holds is only ever shown as text."""

from __future__ import annotations

from django.utils.safestring import SafeString, mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import TextLexer, get_lexer_for_filename
from pygments.util import ClassNotFound

MAX_HIGHLIGHTED_CHARS = 256 * 1024  # beyond this, plain (escaped) text: highlighting is slow


def highlighted(path: str, text: str) -> SafeString:
    """`text` as HTML spans for a file named `path` (a lexer chosen by its name; plain text
    when none fits, or when it is over MAX_HIGHLIGHTED_CHARS)."""
    try:
        lexer = (get_lexer_for_filename(path, stripnl=False)
                 if len(text) <= MAX_HIGHLIGHTED_CHARS else TextLexer(stripnl=False))
    except ClassNotFound:
        lexer = TextLexer(stripnl=False)
    formatter = HtmlFormatter(nowrap=True)
    html: str = highlight(text, lexer, formatter)
    return mark_safe(html)  # noqa: S308 - Pygments' formatter escapes all of it

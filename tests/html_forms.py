"""The forms of an HTML page as a browser would submit them (no Django: the bench uses it too)."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any


class _Forms(HTMLParser):
    """Every form of a page: action, method, attributes, named fields, the text of its buttons
    and, in the same order, the (name, value) each button submits."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, Any]] = []
        self._form: dict[str, Any] | None = None
        self._textarea: str | None = None
        self._button = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name: value or "" for name, value in attrs}
        if tag == "form":
            self._form = {"action": attributes.get("action", ""),
                          "method": attributes.get("method", "get"), "fields": {},
                          "buttons": [], "submits": [], "attrs": attributes}
            self.forms.append(self._form)
        elif self._form is None:
            return
        elif tag == "input" and "name" in attributes:
            self._form["fields"][attributes["name"]] = attributes.get("value", "")
        elif tag == "textarea":
            self._textarea = attributes.get("name")
            if self._textarea:
                self._form["fields"][self._textarea] = ""
        elif tag == "button":
            self._form["buttons"].append("")
            self._form["submits"].append((attributes.get("name"), attributes.get("value", "")))
            self._button = True

    def handle_data(self, data: str) -> None:
        if self._form is None:
            return
        if self._textarea:
            self._form["fields"][self._textarea] += data
        elif self._button:
            self._form["buttons"][-1] += data.strip()

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._form = None
        elif tag == "textarea":
            self._textarea = None
        elif tag == "button":
            self._button = False


def forms_on(html: str) -> list[dict[str, Any]]:
    parser = _Forms()
    parser.feed(html)
    return parser.forms

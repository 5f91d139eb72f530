"""The exact text of each event of a batch, as received (the body was parsed strictly already)."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.http import HttpRequest

from governor.lib.errors import Invalid

_WHITESPACE = " \t\n\r"
_decoder = json.JSONDecoder()


def _skip(text: str, index: int) -> int:
    while index < len(text) and text[index] in _WHITESPACE:
        index += 1
    return index


def array_item_spans(text: str, key: str) -> list[str]:
    """The exact source text of each item of the top-level array `key` of a JSON object.

    The text was already parsed strictly, so this only walks known-good JSON."""
    index = _skip(text, 0)
    if text[index] != "{":
        return []
    index = _skip(text, index + 1)
    while index < len(text) and text[index] != "}":
        name, index = _decoder.raw_decode(text, index)
        index = _skip(text, _skip(text, index) + 1)  # past ':'
        if name == key and text[index] == "[":
            spans = []
            index = _skip(text, index + 1)
            while text[index] != "]":
                _, end = _decoder.raw_decode(text, index)
                spans.append(text[index:end])
                index = _skip(text, end)
                if text[index] == ",":
                    index = _skip(text, index + 1)
            return spans
        _, index = _decoder.raw_decode(text, index)
        index = _skip(text, index)
        if text[index] == ",":
            index = _skip(text, index + 1)
    return []


def event_texts(request: HttpRequest, events: list[dict[str, Any]]) -> list[str]:
    """The exact text of each event of a batch the schema accepted (its body was parsed strictly
    already), after the batch's size rule: 1..GOVERNOR_MAX_BATCH events."""
    if not events:
        raise Invalid("events: must hold at least one event",
                      details=[{"path": "events", "message": "must hold at least one event"}])
    if len(events) > settings.GOVERNOR_MAX_BATCH:
        message = f"{len(events)} events; at most {settings.GOVERNOR_MAX_BATCH} per batch"
        raise Invalid(f"events: {message}", details=[{"path": "events", "message": message}])
    return array_item_spans(request.body.decode("utf-8"), "events")

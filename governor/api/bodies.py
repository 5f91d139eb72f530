"""Strict request bodies: lossless JSON, and the exact text of each event as received."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.http import HttpRequest

from governor.domain.canonical import loads_strict
from governor.services.errors import Invalid

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


def json_body(request: HttpRequest) -> tuple[dict[str, Any], str]:
    """The request body as a strictly parsed JSON object, and its text."""
    raw = request.body  # raises RequestDataTooBig over DATA_UPLOAD_MAX_MEMORY_SIZE
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Invalid("body is not valid UTF-8",
                      details=[{"path": "", "message": f"invalid UTF-8 ({exc.reason})"}]) from None
    value = loads_strict(text)
    if not isinstance(value, dict):
        raise Invalid("body must be a JSON object",
                      details=[{"path": "", "message": "expected a JSON object"}])
    return value, text


def events_body(request: HttpRequest) -> tuple[list[dict[str, Any]], list[str], dict[str, Any]]:
    body, text = json_body(request)
    unknown = sorted(set(body) - {"events", "expected_seq"})
    problems = [{"path": key, "message": "unknown field"} for key in unknown]
    events = body.get("events")
    if not isinstance(events, list):
        problems.append({"path": "events", "message": "required: a list of events"})
    elif not events:
        problems.append({"path": "events", "message": "must hold at least one event"})
    elif len(events) > settings.GOVERNOR_MAX_BATCH:
        problems.append({"path": "events",
                         "message": f"{len(events)} events; at most "
                                    f"{settings.GOVERNOR_MAX_BATCH} per batch"})
    else:
        for index, event in enumerate(events):
            if not isinstance(event, dict):
                problems.append({"path": f"events/{index}", "message": "must be a JSON object"})
    expected = body.get("expected_seq")
    if expected is not None and (type(expected) is not int or expected < 0):
        problems.append({"path": "expected_seq", "message": "must be a non-negative integer"})
    if problems:
        raise Invalid("; ".join(f"{p['path']}: {p['message']}" for p in problems), details=problems)
    assert isinstance(events, list)
    return events, array_item_spans(text, "events"), body

"""rules §1: canonical JSON (RFC 8785), strict JSON intake and receipts."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, NoReturn, TypeAlias, cast

import rfc8785

MAX_SAFE_INTEGER = 2**53 - 1
SAFE_INTEGER_DIGITS = len(str(MAX_SAFE_INTEGER))
UNSAFE_INTEGER = MAX_SAFE_INTEGER + 1
MAX_DEPTH = 100  # nesting of arrays and objects; deeper input is refused, never recursed into

# A JSON value as `loads_strict` reads it: the type of a document, or a part of one, whose shape
# no rule fixes (a known shape is a TypedDict: governor/domain/documents.py).
JSONValue: TypeAlias = "dict[str, JSONValue] | list[JSONValue] | str | int | float | bool | None"
JSONObject: TypeAlias = "dict[str, JSONValue]"


class JSONValueError(ValueError):
    """A value that is not lossless JSON. `path` is an RFC 6901 pointer to the offending value."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path or '/'}: {reason}")
        self.path = path
        self.reason = reason


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _check_string(text: str, path: str) -> None:
    # A lone surrogate cannot be encoded as UTF-8; that is the cheapest exact test.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise JSONValueError(path, "string contains a lone surrogate") from None


def _lossless(value: Any, depth: int) -> bool:
    """Whether `check_json_value` accepts `value`, without building the path of every value
    on the way (it names the place only once something is refused)."""
    if depth > MAX_DEPTH:
        return False
    kind = type(value)
    if value is None or kind is bool:
        return True
    if kind is str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if kind is int:
        return bool(-MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER)
    if kind is float:
        return (math.isfinite(value)
                and not (value == 0.0 and math.copysign(1.0, value) < 0)
                and not (value.is_integer() and MAX_SAFE_INTEGER < abs(value) < 1e21))
    if kind is list:
        return all(_lossless(item, depth + 1) for item in value)
    if kind is dict:
        return all(type(key) is str and _lossless(key, depth)
                   and _lossless(item, depth + 1) for key, item in value.items())
    return False


def check_json_value(value: Any, path: str = "", depth: int = 0) -> None:
    """Rule 1.2: refuse anything that would not survive a JSON round trip exactly."""
    if _lossless(value, depth):
        return
    _check_json_value(value, path, depth)


def _check_json_value(value: Any, path: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise JSONValueError(path, f"nested deeper than {MAX_DEPTH} levels")
    if value is None or value is True or value is False:
        return
    kind = type(value)
    if kind is str:
        _check_string(value, path)
    elif kind is int:
        if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            raise JSONValueError(path, "integer beyond ±(2^53−1)")
    elif kind is float:
        if not math.isfinite(value):
            raise JSONValueError(path, "number is not finite")
        if value == 0.0 and math.copysign(1.0, value) < 0:
            raise JSONValueError(path, "negative zero is not allowed")
        # Refuse floats that JCS writes as unsafe integer literals; from 1e21 on it writes an
        # exponent (1e+30), which reads back as the same float (RFC 8785 §3.2.2 example).
        if value.is_integer() and MAX_SAFE_INTEGER < abs(value) < 1e21:
            raise JSONValueError(path, "integer beyond ±(2^53−1)")
    elif kind is list:
        for index, item in enumerate(value):
            _check_json_value(item, f"{path}/{index}", depth + 1)
    elif kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise JSONValueError(path, f"object key {key!r} is not a string")
            _check_string(key, f"{path}/{_escape(key)}")
            _check_json_value(item, f"{path}/{_escape(key)}", depth + 1)
    else:
        raise JSONValueError(path, f"{kind.__name__} is not a JSON value")


def _refuse_constant(name: str) -> NoReturn:
    raise JSONValueError("", f"{name} is not valid JSON")


def _parse_int(text: str) -> int:
    if text == "-0":
        raise JSONValueError("", "negative zero is not allowed")
    if len(text.lstrip("-")) > SAFE_INTEGER_DIGITS:
        # Unsafe whatever its value; int() would refuse one over 4,300 digits with a bare
        # ValueError. An out-of-range stand-in lets check_json_value name the place.
        return -UNSAFE_INTEGER if text.startswith("-") else UNSAFE_INTEGER
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JSONValueError("", f"number {text} is out of range")
    if value == 0.0 and text.lstrip().startswith("-"):
        raise JSONValueError("", "negative zero is not allowed")
    return value


def _no_duplicate_keys(pairs: list[tuple[str, JSONValue]]) -> JSONObject:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise JSONValueError("", f"duplicate object key {key!r}")
            seen.add(key)
    return result


# One decoder for every strict read: `json.loads` with hooks builds a new one per call, which
# costs more than decoding a short line (an oracle run reads one per case).
_STRICT_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_int=_parse_int,
                                   parse_float=_parse_float, object_pairs_hook=_no_duplicate_keys)


def loads_strict(text: str | bytes) -> Any:
    """Parse JSON text, refusing NaN/Infinity, -0, unsafe integers, duplicate keys, lone
    surrogates and invalid UTF-8. Raises JSONValueError naming the place."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONValueError("", f"body is not valid UTF-8 ({exc.reason})") from None
    try:
        value = _STRICT_DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise JSONValueError(
            "", f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise JSONValueError("", f"nested deeper than {MAX_DEPTH} levels") from None
    check_json_value(value)
    return value


def canonical_bytes(value: object) -> bytes:
    """Rule 1.1: the RFC 8785 serialisation of `value` (checked by rule 1.2 first)."""
    check_json_value(value)
    return rfc8785.dumps(cast(JSONValue, value))


def _json_dumps_is_jcs(value: Any) -> bool:
    """True when `json.dumps(sort_keys, compact, ensure_ascii=False)` writes exactly RFC 8785:
    no floats (number formatting differs) and no object key outside the Basic Multilingual Plane
    (code-point order then differs from UTF-16 order). Strings, ints, booleans and null are
    written identically by both."""
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            if not key.isascii() and max(key) > "\uffff":
                return False
            if not _json_dumps_is_jcs(item):
                return False
        return True
    if kind is list:
        return all(_json_dumps_is_jcs(item) for item in value)
    return kind is not float


def canonical_bytes_checked(value: object) -> bytes:
    """`canonical_bytes` for a value already checked by rule 1.2, on the hot path (hashing each
    appended event): the C JSON encoder when it provably agrees with RFC 8785, else rfc8785."""
    if _json_dumps_is_jcs(value):
        return json.dumps(value, sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False).encode("utf-8")
    return rfc8785.dumps(cast(JSONValue, value))


def canonical_equal(left: object, right: object) -> bool:
    """Equality by canonical form: 1 equals 1.0, true never equals 1."""
    return canonical_bytes(left) == canonical_bytes(right)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def receipt(kind: str, payload: object) -> str:
    """Rule 1.3: "sha256:" + hex(sha256(JCS({"kind": kind, "payload": payload})))."""
    return "sha256:" + sha256_hex(canonical_bytes({"kind": kind, "payload": payload}))

"""Refusals that name every failing field: the one shape every validator in the domain uses.

A path is slash-separated from the root of what was validated (``checks/2/path``, ``env/CI``),
each segment escaped as an RFC 6901 token; ``""`` is the root itself."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

from governor.domain.canonical import JSONValueError, check_json_value

# A verifier profile's id and a held-out suite's name: kebab-case (here, in a module the offline
# verifier ships, because verify checks the names runs carry).
PROFILE_ID_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


class FieldsInvalid(ValueError):
    """A refused input. `errors` lists every failing field as {"path", "message"}."""

    root = "(body)"

    def __init__(self, errors: list[dict[str, str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{e['path'] or self.root}: {e['message']}" for e in errors))


class FieldErrors:
    """Collects problems so a validator can report all of them at once."""

    def __init__(self) -> None:
        self.items: list[dict[str, str]] = []

    def add(self, path: str, message: str) -> None:
        self.items.append({"path": path, "message": message})

    def keys(self, path: str, value: Collection[str], known: Collection[str],
             required: Iterable[str] = ()) -> None:
        """The keys of the object `value` at `path`: each that is not `known` is an unknown
        field, each `required` one it lacks is required."""
        for key in value:
            if key not in known:
                self.add(join_path(path, key), "unknown field")
        for key in required:
            if key not in value:
                self.add(join_path(path, key), "required")


def join_path(base: str, *parts: object) -> str:
    """`base` (already a path) extended by `parts`, each escaped as an RFC 6901 token."""
    tokens = [str(p).replace("~", "~0").replace("/", "~1") for p in parts]
    return "/".join([base, *tokens] if base else tokens)


def string_field(errors: FieldErrors, path: str, value: object) -> str | None:
    """`value` if it is a lossless JSON string (rules §1.2), else None (recorded)."""
    if type(value) is not str:
        errors.add(path, "must be a string")
        return None
    try:
        check_json_value(value)
    except JSONValueError as exc:
        errors.add(path, exc.reason)
        return None
    return value

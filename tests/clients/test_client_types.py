"""The client package's types are the server's wire contract (issue 13 item 5): every JSON body a
route reads or writes has a TypedDict in `governor_client.types`, and each one has exactly the
keys of the schema in the server's `openapi.json`, the same keys required and, where a type is
simple (strings, integers, booleans, lists, nested objects, enums, null), the same type. A field
added on one side only fails here, naming the route and the field."""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, get_args, get_origin

import pytest
from django.test import Client
from governor_client import types as client

Doc = dict[str, Any]

# (method, path, "request" or a 2xx status) -> the client's type for that body.
ROUTES: dict[tuple[str, str, str], Any] = {
    ("post", "/sessions", "request"): client.SessionCreate,
    ("post", "/sessions", "200"): client.SessionInfo,
    ("post", "/sessions", "201"): client.SessionInfo,
    ("get", "/sessions/{session_id}", "200"): client.SessionStatus,
    ("post", "/sessions/{session_id}/events", "request"): client.EventBatch,
    ("post", "/sessions/{session_id}/events", "200"): client.AppendResult,
    ("get", "/sessions/{session_id}/events", "200"): client.EventPage,
    ("post", "/sessions/import", "201"): client.SessionInfo,
    ("get", "/keys", "200"): client.KeyList,
    ("get", "/certifications", "200"): client.CertificationList,
    ("get", "/receipts/{receipt}", "200"): client.Receipt,
    ("post", "/sessions/{session_id}/assess", "request"): client.ContractBody,
    ("post", "/sessions/{session_id}/assess", "200"): client.AssessResult,
    **{("post", f"/sessions/{{session_id}}/{route}", status): kind
       for route in ("contracts", "code-contracts")
       for status, kind in (("request", client.BeginBody), ("200", client.BeginResult),
                            ("201", client.BeginResult), ("202", client.BeginResult))},
    ("post", "/sessions/{session_id}/verify", "request"): client.TreeBody,
    ("post", "/sessions/{session_id}/verify", "200"): client.Outcome,
    ("post", "/sessions/{session_id}/turn-stop", "request"): client.TreeBody,
    ("post", "/sessions/{session_id}/turn-stop", "200"): client.TurnStop,
    ("post", "/sessions/{session_id}/abstain", "request"): client.AbstainBody,
    ("post", "/sessions/{session_id}/abstain", "200"): client.Outcome,
    ("get", "/sessions/{session_id}/review", "200"): client.ReviewAnswer,
    ("delete", "/sessions/{session_id}/review", "200"): client.ReviewAnswer,
    ("get", "/code-profiles", "200"): client.ProfileList,
    ("get", "/outcome-profiles", "200"): client.OutcomeProfileList,
    ("post", "/sessions/{session_id}/outcome/observations", "200"): client.OutcomeStatus,
    ("post", "/sessions/{session_id}/outcome/observations", "202"): client.OutcomeStatus,
    ("get", "/sessions/{session_id}/outcome", "200"): client.OutcomeStatus,
    ("post", "/sessions/{session_id}/code-verifications", "request"): client.RunRequest,
    ("post", "/sessions/{session_id}/code-verifications", "202"): client.RunQueued,
    ("get", "/code-verifications/{run_id}", "200"): client.VerificationRun,
    ("post", "/sessions/{session_id}/drafts", "request"): client.DraftRequest,
    ("post", "/sessions/{session_id}/drafts", "201"): client.DraftResult,
    ("get", "/project", "200"): client.ProjectInfo,
    ("post", "/blobs/missing", "request"): client.BlobIds,
    ("post", "/blobs/missing", "200"): client.MissingBlobs,
    ("put", "/blobs/{blob_id}", "200"): client.BlobStored,
    ("put", "/blobs/{blob_id}", "201"): client.BlobStored,
    ("post", "/blobs", "200"): client.BlobBatchStored,
    ("post", "/sessions/{session_id}/snapshots", "request"): client.SnapshotBody,
    ("post", "/sessions/{session_id}/snapshots", "201"): client.SnapshotInfo,
    ("post", "/changes", "request"): client.ChangeBody,
    ("post", "/changes", "201"): client.ChangeInfo,
    ("get", "/changes/{change_id}", "200"): client.ChangeInfo,
}

PREFIX = "/api/v1"
JSON_TYPES = {str: "string", int: "integer", bool: "boolean", float: "number"}
CONSTRAINING = {"type", "enum", "const", "properties", "items"}


@pytest.fixture(scope="module")
def openapi() -> Doc:
    response = Client().get(f"{PREFIX}/openapi.json")
    assert response.status_code == 200
    document: Doc = response.json()
    return document


def json_bodies(document: Doc) -> dict[tuple[str, str, str], Doc]:
    """Every JSON body of every route: (method, path, "request" | 2xx status) -> its schema."""
    bodies: dict[tuple[str, str, str], Doc] = {}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            route = path.removeprefix(PREFIX)
            content = operation.get("requestBody", {}).get("content", {})
            if "application/json" in content:
                bodies[(method, route, "request")] = content["application/json"]["schema"]
            for status, response in operation.get("responses", {}).items():
                content = response.get("content", {})
                if status.startswith("2") and "application/json" in content:
                    bodies[(method, route, status)] = content["application/json"]["schema"]
    return bodies


def resolve(document: Doc, schema: Doc) -> Doc:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def variants(document: Doc, schema: Doc) -> list[Doc]:
    schema = resolve(document, schema)
    options = schema.get("anyOf") or schema.get("oneOf")
    if options is None:
        return [schema]
    return [variant for option in options for variant in variants(document, option)]


def is_typeddict(kind: Any) -> bool:
    return typing.is_typeddict(kind)


def non_null(kind: Any) -> tuple[Any, bool]:
    """The type without None, and whether None was allowed."""
    if get_origin(kind) in (typing.Union, types.UnionType):
        rest = [arg for arg in get_args(kind) if arg is not type(None)]
        nullable = len(rest) < len(get_args(kind))
        return (rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]), nullable  # noqa: UP007
    return kind, False


def compare(document: Doc, kind: Any, schema: Doc, where: str) -> list[str]:
    """Every difference between the client's type `kind` and the server's `schema`."""
    kind, client_null = non_null(kind)
    options = variants(document, schema)
    server_null = any(option.get("type") == "null" for option in options)
    options = [option for option in options if option.get("type") != "null"]
    problems = []
    if client_null != server_null:
        problems.append(f"{where}: null {'allowed' if server_null else 'refused'} by the server, "
                        f"{'allowed' if client_null else 'refused'} by the client")
    if kind is Any or not options or not CONSTRAINING & set(options[0]):
        return problems  # the client takes any value, or the server declares none
    if get_origin(kind) in (typing.Union, types.UnionType):  # one client type per server variant
        members = get_args(kind)
        if len(members) != len(options):
            return [*problems, f"{where}: {len(members)} client types, {len(options)} server "
                               "variants"]
        for member, option in zip(members, options, strict=True):
            problems += compare(document, member, option, f"{where}[{member.__name__}]")
        return problems
    if is_typeddict(kind):
        return problems + compare_object(document, kind, options, where)
    if len(options) > 1:
        return [*problems, f"{where}: the server has {len(options)} shapes, the client one"]
    option = options[0]
    if get_origin(kind) is Literal:
        allowed = set(option.get("enum", [option["const"]] if "const" in option else []))
        if allowed and allowed != set(get_args(kind)):
            problems.append(f"{where}: server {sorted(allowed)}, client {sorted(get_args(kind))}")
        return problems
    if get_origin(kind) is list:
        if option.get("type") != "array":
            return [*problems, f"{where}: the server's is {option.get('type')}, not an array"]
        return problems + compare(document, get_args(kind)[0], option.get("items", {}),
                                  f"{where}[]")
    if kind is dict or get_origin(kind) is dict:
        if option.get("type") != "object":
            problems.append(f"{where}: the server's is {option.get('type')}, not an object")
        return problems
    if kind in JSON_TYPES and option.get("type") != JSON_TYPES[kind]:
        problems.append(f"{where}: the server's is {option.get('type')}, the client's "
                        f"{JSON_TYPES[kind]}")
    return problems


def required_keys(kind: Any) -> set[str]:
    """The keys a TypedDict requires, read from its annotations (under `from __future__ import
    annotations` Python 3.11's `__required_keys__` cannot see `NotRequired`)."""
    hints = typing.get_type_hints(kind, include_extras=True)
    return {name for name, hint in hints.items()
            if get_origin(hint) is not typing.NotRequired
            and (kind.__total__ or get_origin(hint) is typing.Required)}


def compare_object(document: Doc, kind: Any, options: list[Doc], where: str) -> list[str]:
    """A TypedDict against an object schema; against several (one per check kind, say): their
    keys together, required when every one requires them."""
    properties: Doc = {}
    for option in options:
        if option.get("type") != "object":
            return [f"{where}: the server's is {option.get('type')}, not an object"]
        for name, schema in option.get("properties", {}).items():
            properties.setdefault(name, schema)
    required = set.intersection(*(set(option.get("required", [])) for option in options))
    hints = typing.get_type_hints(kind)
    client_required = required_keys(kind)
    problems = [f"{where}.{name}: only the server has it" for name in properties
                if name not in hints]
    problems += [f"{where}.{name}: only the client has it" for name in hints
                 if name not in properties]
    for name in sorted(set(hints) & set(properties)):
        client_requires = name in client_required
        if client_requires != (name in required):
            problems.append(f"{where}.{name}: required by the "
                            f"{'client' if client_requires else 'server'} only")
        if len(options) == 1:
            problems += compare(document, hints[name], properties[name], f"{where}.{name}")
    return problems


def test_every_json_body_of_the_api_has_a_client_type(openapi: Doc) -> None:
    bodies = json_bodies(openapi)
    assert sorted(set(bodies) - set(ROUTES)) == [], "routes without a client type"
    assert sorted(set(ROUTES) - set(bodies)) == [], "client types of routes the API lacks"


@pytest.mark.parametrize("route", sorted(ROUTES), ids=" ".join)
def test_the_client_type_of_each_body_matches_the_servers_schema(
    openapi: Doc, route: tuple[str, str, str]
) -> None:
    schema = json_bodies(openapi)[route]
    kind = ROUTES[route]
    assert compare(openapi, kind, schema, getattr(kind, "__name__", str(kind))) == []


def test_a_field_on_one_side_only_is_found(openapi: Doc) -> None:
    """The comparison itself: a key, a required key or a type changed on one side fails."""
    schema = json_bodies(openapi)[("post", "/sessions/{session_id}/abstain", "request")]

    class Extra(client.AbstainBody):
        note: str

    class Loose(typing.TypedDict):
        reason: typing.NotRequired[str]

    class Wrong(typing.TypedDict):
        reason: int

    assert compare(openapi, Extra, schema, "x") == ["x.note: only the client has it"]
    assert compare(openapi, Loose, schema, "x") == ["x.reason: required by the server only"]
    assert compare(openapi, Wrong, schema, "x") == [
        "x.reason: the server's is string, the client's integer"]

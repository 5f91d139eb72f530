"""The completion contract: rules §4 rules 1–5, the claim rules of §5, the intent of §6 and
the injected code-profile checks of §8 (second bullet).

Wire body (snake_case) an agent sends to begin or assess::

    {
      "objective": "…",                  # required; non-blank; ≤ 4096 UTF-8 bytes
      "claims": [                        # 1..100 (0 allowed with allow_empty_claims)
        {"id": "…", "statement": "…",    # id trimmed, 1..128 chars; statement trimmed, 1..1000
         "importance": "critical" | "important" | "minor",
         "verification": "deterministic" | "human-required" | "unsupported",
         "check_ids": ["…"],             # unique, each naming a check of this body
         "minimum_independent_sources": 1}    # optional, 1..10, default 1
      ],
      "checks": [ {"id": "…", "kind": "…", …the kind's fields…} ],
      "max_attempts": 3,                 # optional; 1..project cap; default the cap
      "intent": {                        # optional (required when review is required)
        "constraints": [], "assumptions": [], "non_goals": [], "ambiguities": []
      },
      "draft_receipt": "sha256:…"        # optional; §9 — whether it is allowed is the caller's call
    }

Check kinds and exactly their wire fields besides ``id`` and ``kind`` (``?`` = optional):

    file_exists, file_absent            path
    file_contains, file_not_contains    path, text (non-empty)
    file_equals                         path, text (may be empty)
    json_equals                         path, pointer, value
    tool_succeeded                      tool, arguments_contain?, min_count? (default 1)
    tool_not_called                     tool
    no_tool_errors                      —
    code_verification_succeeded         profile, min_count? (default 1)

Stored form (inside contracts, events and receipts) is camelCase: ``argumentsContain``,
``minCount`` (always materialised), ``checkIds``, ``minimumIndependentSources`` (always
materialised), ``nonGoals``, ``maxAttempts``, ``startedAtSeq``, ``contractId``. Ids, claim
statements and intent items are stored trimmed; everything else is stored exactly as sent.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar, cast

from governor.domain import changes, tamper
from governor.domain.canonical import (
    JSONObject,
    JSONValueError,
    canonical_bytes,
    check_json_value,
    receipt,
)
from governor.domain.documents import Check, Claim, ContractDocument, Intent, Plan, TokenRef
from governor.domain.fields import (
    PROFILE_ID_RE,
    FieldErrors,
    FieldsInvalid,
    join_path,
    string_field,
)
from governor.domain.runner_control import InForce
from governor.domain.tree import PathMatcher, validate_exclusions

MAX_OBJECTIVE_BYTES = 4096
MAX_ID_CHARS = 128
MAX_PATH_CHARS = 1024
MAX_TOOL_CHARS = 256
MAX_PROFILE_CHARS = 128
MAX_TEXT_CHARS = 4096
MAX_POINTER_CHARS = 2048
MAX_ARGUMENTS_CONTAIN_CHARS = 4096
MIN_COUNT_RANGE = (1, 100)
MAX_CLAIMS = 100
MAX_STATEMENT_CHARS = 1000
INDEPENDENT_SOURCES_RANGE = (1, 10)
# The repair budget: `max_attempts` is 1..the project's cap, which is DEFAULT_ATTEMPTS_CAP unless
# the operator changed it and never above MAX_ATTEMPTS_CAP. The project model and the OpenAPI
# schema take these numbers from here; a test holds the MCP tools' schema to the OpenAPI one.
DEFAULT_ATTEMPTS_CAP = 3
MAX_ATTEMPTS_CAP = 10
MAX_INTENT_ITEMS = 20
MAX_INTENT_ITEM_BYTES = 2048
MAX_INTENT_BYTES = 24 * 1024

RECEIPT_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
T = TypeVar("T")

IMPORTANCES = ("critical", "important", "minor")
VERIFICATIONS = ("deterministic", "human-required", "unsupported")

# kind -> (required wire fields, optional wire fields), besides "id" and "kind".
CHECK_FIELDS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "file_exists": (frozenset({"path"}), frozenset()),
    "file_absent": (frozenset({"path"}), frozenset()),
    "file_contains": (frozenset({"path", "text"}), frozenset()),
    "file_not_contains": (frozenset({"path", "text"}), frozenset()),
    "file_equals": (frozenset({"path", "text"}), frozenset()),
    "json_equals": (frozenset({"path", "pointer", "value"}), frozenset()),
    "tool_succeeded": (frozenset({"tool"}), frozenset({"arguments_contain", "min_count"})),
    "tool_not_called": (frozenset({"tool"}), frozenset()),
    "no_tool_errors": (frozenset(), frozenset()),
    "code_verification_succeeded": (frozenset({"profile"}), frozenset({"min_count"})),
    "changes_within": (frozenset({"paths"}), frozenset()),
    "unchanged": (frozenset({"paths"}), frozenset()),
}
SCOPE_CHECK_KINDS = frozenset({"changes_within", "unchanged"})
MAX_PATTERNS = 64
MAX_PATTERN_CHARS = 1024
CHECK_KINDS = tuple(CHECK_FIELDS)
FILE_CHECK_KINDS = frozenset(
    {
        "file_exists",
        "file_absent",
        "file_contains",
        "file_not_contains",
        "file_equals",
        "json_equals",
    }
)
TOOL_CHECK_KINDS = frozenset({"tool_succeeded", "tool_not_called", "no_tool_errors"})

CLAIM_FIELDS = frozenset(
    {"id", "statement", "importance", "verification", "check_ids", "minimum_independent_sources"}
)
INTENT_LISTS = {
    "constraints": "constraints",
    "assumptions": "assumptions",
    "non_goals": "nonGoals",
    "ambiguities": "ambiguities",
}
BODY_FIELDS = frozenset(
    {"objective", "claims", "checks", "max_attempts", "intent", "draft_receipt",
     "protected_changes", "environment_changes", "outcome_profile"}
)

# §8: ids the server prepends to a code contract. The whole check-id prefix is reserved so an
# agent's own check can never be mistaken for (or shadow) an injected one.
CODE_PROFILE_CHECK_PREFIX = "code-profile-"
REQUIRED_CODE_CLAIM_ID = "required-code-verification"
REQUIRED_CODE_CLAIM_STATEMENT = (
    "Every required trusted code verification profile passes on the final workspace."
)

CONTRACT_VERSION_REVIEW_OFF = 3
CONTRACT_VERSION_REVIEWED = 5


class ContractError(FieldsInvalid):
    """A refused proposal, naming every failing field."""


class NoRequiredProfileError(ContractError):
    """§8: a code contract needs at least one required verifier profile in the project."""


@dataclass(frozen=True)
class Proposal:
    """A validated proposal; `claims`, `checks` and `intent` are in stored camelCase form."""

    objective: str
    claims: list[Claim]
    checks: list[Check]
    max_attempts: int
    intent: Intent | None = None
    draft_receipt: str | None = None
    kind: str = "general"
    protected_changes: list[str] = field(default_factory=list)  # §14.4, opened by a person
    # rules §17.8: the workspace environment paths this task must change, opened by a person
    environment_changes: list[str] = field(default_factory=list)
    outcome_profile: str | None = None  # the outcome profile named at begin
    outcome: JSONObject | None = None  # its binding (the agent's view with its receipt)

    def plan(self) -> Plan:
        """Objective, claims and checks: what §9 compares canonically with a draft."""
        return {"objective": self.objective, "claims": self.claims, "checks": self.checks}


def _identifier(errors: FieldErrors, path: str, value: object, what: str) -> str | None:
    text = string_field(errors, path, value)
    if text is None:
        return None
    text = text.strip()
    if not text:
        errors.add(path, f"{what} must not be empty or blank")
        return None
    if len(text) > MAX_ID_CHARS:
        errors.add(path, f"{what} is longer than {MAX_ID_CHARS} characters ({len(text)})")
        return None
    return text


def _bounded_int(errors: FieldErrors, path: str, value: object, low: int, high: int
                 ) -> int | None:
    if type(value) is not int:  # bool is not an int here, and neither is 2.0
        errors.add(path, "must be an integer")
        return None
    if not low <= value <= high:
        errors.add(path, f"must be between {low} and {high} (got {value})")
        return None
    return value


def _unknown_fields(
    errors: FieldErrors, base: str, raw: Mapping[str, object], allowed: Iterable[str], what: str
) -> None:
    allowed_set = set(allowed)
    for key in raw:
        if key not in allowed_set:
            errors.add(join_path(base, key), f"unknown field for {what}")


def path_problem(path: str) -> str | None:
    """Rule 4.2: why `path` is not a safe relative workspace path, or None."""
    if path == "":
        return "must not be empty"
    if len(path) > MAX_PATH_CHARS:
        return f"is longer than {MAX_PATH_CHARS} characters ({len(path)})"
    if "\x00" in path:
        return "must not contain a NUL character"
    if path.startswith(("/", "\\")):
        return "must be relative to the workspace, not absolute"
    if re.match(r"^[A-Za-z]:", path):
        return "must be relative to the workspace, not a drive path"
    if ".." in re.split(r"[/\\]", path):
        return "must not contain a '..' segment"
    return None


def pointer_problem(pointer: str) -> str | None:
    """Rule 4.4: why `pointer` is not an RFC 6901 JSON pointer we accept, or None."""
    if len(pointer) > MAX_POINTER_CHARS:
        return f"is longer than {MAX_POINTER_CHARS} characters ({len(pointer)})"
    if pointer and not pointer.startswith("/"):
        return "must be empty or start with '/'"
    if re.search(r"~(?![01])", pointer):
        return "has '~' not followed by '0' or '1'"
    return None


def normalise_path(path: str) -> str:
    """The path a file check names, without '.' and empty segments (`./a` and `a` are one)."""
    return "/".join(segment for segment in path.split("/") if segment not in ("", "."))


_REFUSED = object()  # a field rule's answer when the value is not even of the right type
DEFAULTS: dict[str, object] = {"min_count": 1}
STORED_NAMES = {"arguments_contain": "argumentsContain", "min_count": "minCount"}


def _bounded_text(errors: FieldErrors, path: str, value: object, most: int) -> object:
    text = string_field(errors, path, value)
    if text is None:
        return _REFUSED
    if len(text) > most:
        errors.add(path, f"is longer than {most} characters ({len(text)})")
    return text


def _path_rule(errors: FieldErrors, path: str, value: object, kind: str) -> object:
    text = string_field(errors, path, value)
    if text is None:
        return _REFUSED
    if problem := path_problem(text):
        errors.add(path, problem)
    return text


def _text_rule(errors: FieldErrors, path: str, value: object, kind: str) -> object:
    text = _bounded_text(errors, path, value, MAX_TEXT_CHARS)
    if text == "" and kind != "file_equals":
        errors.add(path, f"must not be empty for kind {kind}")
    return text


def _pointer_rule(errors: FieldErrors, path: str, value: object, kind: str) -> object:
    text = string_field(errors, path, value)
    if text is None:
        return _REFUSED
    if problem := pointer_problem(text):
        errors.add(path, problem)
    return text


def _value_rule(errors: FieldErrors, path: str, value: object, kind: str) -> object:
    try:
        check_json_value(value)
    except JSONValueError as exc:
        errors.add(path + exc.path, exc.reason)
    return value


def _tool_rule(errors: FieldErrors, path: str, value: object, kind: str) -> object:
    if type(value) is str and not value.strip():
        errors.add(path, "must not be empty or blank")
        return value
    return _bounded_text(errors, path, value, MAX_TOOL_CHARS)


def _arguments_contain_rule(errors: FieldErrors, path: str, value: object, kind: str) -> object:
    if value == "":
        errors.add(path, "must not be empty when given")
        return value
    return _bounded_text(errors, path, value, MAX_ARGUMENTS_CONTAIN_CHARS)


def _profile_rule(errors: FieldErrors, path: str, value: object, kind: str) -> object:
    text = _bounded_text(errors, path, value, MAX_PROFILE_CHARS)
    if type(text) is str and len(text) <= MAX_PROFILE_CHARS and not PROFILE_ID_RE.match(text):
        errors.add(path, "must be kebab-case (^[a-z0-9]+(-[a-z0-9]+)*$)")
    return text


def _min_count_rule(errors: FieldErrors, path: str, value: object, kind: str) -> object:
    return _bounded_int(errors, path, value, *MIN_COUNT_RANGE)


def patterns_problem(errors: FieldErrors, path: str, value: object) -> list[str] | None:
    """Rule 14.2: 1..MAX_PATTERNS patterns, each ≤ MAX_PATTERN_CHARS, in the exclusions' syntax
    (each refusal names the pattern's index)."""
    if type(value) is not list or not value:
        errors.add(path, f"must be a list of 1..{MAX_PATTERNS} path patterns")
        return None
    if len(value) > MAX_PATTERNS:
        errors.add(path, f"has {len(value)} patterns; at most {MAX_PATTERNS}")
        return None
    before = len(errors.items)
    for index, pattern in enumerate(value):
        where = join_path(path, index)
        if type(pattern) is str and len(pattern) > MAX_PATTERN_CHARS:
            errors.add(where, f"is longer than {MAX_PATTERN_CHARS} characters ({len(pattern)})")
    try:
        validate_exclusions(value, path)
    except FieldsInvalid as exc:
        for item in exc.errors:
            errors.add(item["path"], item["message"])
    return list(value) if len(errors.items) == before else None


def _paths_rule(errors: FieldErrors, path: str, value: object, kind: str) -> object:
    patterns = patterns_problem(errors, path, value)
    return _REFUSED if patterns is None else patterns


# Rules 4.2–4.4: one rule per check field, whichever kinds it belongs to (CHECK_FIELDS).
_FIELD_RULES: dict[str, Callable[[FieldErrors, str, object, str], object]] = {
    "path": _path_rule, "text": _text_rule, "pointer": _pointer_rule, "value": _value_rule,
    "tool": _tool_rule, "arguments_contain": _arguments_contain_rule,
    "profile": _profile_rule, "min_count": _min_count_rule, "paths": _paths_rule,
}


def _parse_check(errors: FieldErrors, index: int, raw: object) -> Check | None:
    base = join_path("checks", index)
    if type(raw) is not dict:
        errors.add(base, "must be an object")
        return None
    before = len(errors.items)
    check_id = None
    if "id" in raw:
        check_id = _identifier(errors, join_path(base, "id"), raw["id"], "check id")
    else:
        errors.add(join_path(base, "id"), "required")
    kind = raw.get("kind")
    if "kind" not in raw:
        errors.add(join_path(base, "kind"), "required")
        return None
    if type(kind) is not str or kind not in CHECK_FIELDS:
        errors.add(
            join_path(base, "kind"), f"unknown check kind {kind!r}; known: {', '.join(CHECK_KINDS)}"
        )
        return None
    required, optional = CHECK_FIELDS[kind]
    _unknown_fields(errors, base, raw, {"id", "kind"} | required | optional, f"kind {kind}")
    for name in sorted(required):
        if name not in raw:
            errors.add(join_path(base, name), f"required for kind {kind}")

    stored: dict[str, object] = {"id": check_id, "kind": kind}
    for name in (rule for rule in _FIELD_RULES if rule in required | optional):
        if name not in raw and name not in DEFAULTS:
            continue
        path = join_path(base, name)
        value = _FIELD_RULES[name](errors, path, raw.get(name, DEFAULTS.get(name)), kind)
        if value is not _REFUSED:
            stored[STORED_NAMES.get(name, name)] = value
    return cast(Check, stored) if len(errors.items) == before else None


def _parse_claim(
    errors: FieldErrors, index: int, raw: object, check_ids: set[str]
) -> Claim | None:
    base = join_path("claims", index)
    if type(raw) is not dict:
        errors.add(base, "must be an object")
        return None
    before = len(errors.items)
    _unknown_fields(errors, base, raw, CLAIM_FIELDS, "a claim")
    for name in ("id", "statement", "importance", "verification", "check_ids"):
        if name not in raw:
            errors.add(join_path(base, name), "required")
    stored: dict[str, object] = {}
    if "id" in raw:
        stored["id"] = _identifier(errors, join_path(base, "id"), raw["id"], "claim id")
    if "statement" in raw:
        statement = string_field(errors, join_path(base, "statement"), raw["statement"])
        if statement is not None:
            statement = statement.strip()
            if not statement:
                errors.add(join_path(base, "statement"), "must not be empty or blank")
            elif len(statement) > MAX_STATEMENT_CHARS:
                errors.add(
                    join_path(base, "statement"),
                    f"is longer than {MAX_STATEMENT_CHARS} characters ({len(statement)})",
                )
            stored["statement"] = statement
    for name, allowed in (("importance", IMPORTANCES), ("verification", VERIFICATIONS)):
        if name in raw:
            if raw[name] not in allowed or type(raw[name]) is not str:
                errors.add(join_path(base, name), f"must be one of {', '.join(allowed)}")
            stored[name] = raw[name]
    if "check_ids" in raw:
        refs = raw["check_ids"]
        if type(refs) is not list:
            errors.add(join_path(base, "check_ids"), "must be a list of check ids")
        else:
            seen: set[str] = set()
            stored_refs: list[str] = []
            for ref_index, ref in enumerate(refs):
                path = join_path(base, "check_ids", ref_index)
                ref_id = _identifier(errors, path, ref, "check id")
                if ref_id is None:
                    continue
                if ref_id in seen:
                    errors.add(path, f"check id {ref_id!r} is listed twice")
                elif ref_id not in check_ids:
                    errors.add(path, f"no check has id {ref_id!r}")
                seen.add(ref_id)
                stored_refs.append(ref_id)
            stored["checkIds"] = stored_refs
    stored["minimumIndependentSources"] = _bounded_int(
        errors,
        join_path(base, "minimum_independent_sources"),
        raw.get("minimum_independent_sources", 1),
        *INDEPENDENT_SOURCES_RANGE,
    )
    return cast(Claim, stored) if len(errors.items) == before else None


def _parse_list(
    errors: FieldErrors, body: Mapping[str, object], name: str, allow_empty: bool
) -> list[object]:
    if name not in body:
        if not allow_empty:
            errors.add(name, "required")
        return []
    value = body[name]
    if type(value) is not list:
        errors.add(name, "must be a list")
        return []
    return value


def _parse_items(
    errors: FieldErrors, name: str, raws: list[object], parse: Callable[[int, object], T | None],
    *, most: int, allow_empty: bool,
) -> list[T]:
    """Each item of the list `name` (`checks`, `claims`) parsed, and each id used once."""
    if not raws and not allow_empty:
        errors.add(name, f"at least one {name[:-1]} is required")
    if len(raws) > most:
        errors.add(name, f"at most {most} {name} are allowed (got {len(raws)})")
    items: list[T] = []
    first_at: dict[str, int] = {}
    for index, raw in enumerate(raws):
        parsed = parse(index, raw)
        item_id = _declared_id(raw)
        if item_id is not None:
            if item_id in first_at:
                errors.add(join_path(name, index, "id"), f"duplicate {name[:-1]} id {item_id!r} "
                           f"(first used by {name}/{first_at[item_id]})")
            else:
                first_at[item_id] = index
        if parsed is not None:
            items.append(parsed)
    return items


def _parse_checks(
    errors: FieldErrors, raw_checks: list[object], *, max_checks: int, allow_empty: bool
) -> list[Check]:
    return _parse_items(errors, "checks", raw_checks,
                        lambda index, raw: _parse_check(errors, index, raw),
                        most=max_checks, allow_empty=allow_empty)


def _declared_id(raw: object) -> str | None:
    if type(raw) is dict and type(raw.get("id")) is str and raw["id"].strip():
        return str(raw["id"].strip())
    return None


def _parse_claims(
    errors: FieldErrors, raw_claims: list[object], raw_checks: list[object], *, allow_empty: bool
) -> list[Claim]:
    check_ids = {i for i in (_declared_id(raw) for raw in raw_checks) if i is not None}
    return _parse_items(errors, "claims", raw_claims,
                        lambda index, raw: _parse_claim(errors, index, raw, check_ids),
                        most=MAX_CLAIMS, allow_empty=allow_empty)


def _parse_intent(errors: FieldErrors, raw: object) -> Intent | None:
    if type(raw) is not dict:
        errors.add("intent", "must be an object")
        return None
    before = len(errors.items)
    _unknown_fields(errors, "intent", raw, INTENT_LISTS, "the intent")
    intent: dict[str, list[str]] = {}
    for wire, stored in INTENT_LISTS.items():
        items = raw.get(wire, [])
        base = join_path("intent", wire)
        if type(items) is not list:
            errors.add(base, "must be a list of strings")
            continue
        if len(items) > MAX_INTENT_ITEMS:
            errors.add(base, f"at most {MAX_INTENT_ITEMS} items are allowed (got {len(items)})")
        kept: list[str] = []
        for index, item in enumerate(items):
            path = join_path(base, index)
            text = string_field(errors, path, item)
            if text is None:
                continue
            text = text.strip()
            if not text:
                errors.add(path, "must not be empty or blank")
            elif len(text.encode("utf-8")) > MAX_INTENT_ITEM_BYTES:
                errors.add(path, f"is longer than {MAX_INTENT_ITEM_BYTES} UTF-8 bytes")
            elif text in kept:
                errors.add(path, f"repeats item {kept.index(text)} (after trimming)")
            else:
                kept.append(text)
        intent[stored] = kept
    if len(errors.items) != before:
        return None
    size = len(canonical_bytes(intent))
    if size > MAX_INTENT_BYTES:
        errors.add("intent", f"is larger than {MAX_INTENT_BYTES} bytes as canonical JSON ({size})")
        return None
    return cast(Intent, intent)


def validate_proposal(
    body: object,
    *,
    max_checks: int,
    max_attempts_cap: int,
    allow_empty_checks: bool = False,
    allow_empty_claims: bool = False,
    require_intent: bool = False,
) -> Proposal:
    """Parse an agent's wire body into a Proposal, or raise ContractError listing every problem.

    `allow_empty_checks` is for the assess preflight and for code contracts (whose required checks
    are injected afterwards); `allow_empty_claims` likewise for code contracts."""
    errors = FieldErrors()
    if type(body) is not dict:
        raise ContractError([{"path": "", "message": "the body must be a JSON object"}])
    _unknown_fields(errors, "", body, BODY_FIELDS, "a contract proposal")

    objective = ""
    if "objective" not in body:
        errors.add("objective", "required")
    else:
        parsed_objective = string_field(errors, "objective", body["objective"])
        if parsed_objective is None:
            pass
        elif not parsed_objective.strip():
            errors.add("objective", "must not be empty or blank")
        elif len(parsed_objective.encode("utf-8")) > MAX_OBJECTIVE_BYTES:
            errors.add("objective", f"is longer than {MAX_OBJECTIVE_BYTES} UTF-8 bytes")
        else:
            objective = parsed_objective

    raw_checks = _parse_list(errors, body, "checks", allow_empty_checks)
    raw_claims = _parse_list(errors, body, "claims", allow_empty_claims)
    checks = _parse_checks(
        errors, raw_checks, max_checks=max_checks, allow_empty=allow_empty_checks
    )
    claims = _parse_claims(errors, raw_claims, raw_checks, allow_empty=allow_empty_claims)

    max_attempts = max_attempts_cap
    if "max_attempts" in body:
        parsed = _bounded_int(errors, "max_attempts", body["max_attempts"], 1, max_attempts_cap)
        max_attempts = parsed if parsed is not None else max_attempts_cap

    intent = None
    if "intent" in body and body["intent"] is not None:
        intent = _parse_intent(errors, body["intent"])
    elif require_intent:
        errors.add("intent", "required: review is required, so the proposal must state its intent")

    draft_receipt = None
    if "draft_receipt" in body:
        draft_receipt = string_field(errors, "draft_receipt", body["draft_receipt"])
        if draft_receipt is not None and not RECEIPT_RE.match(draft_receipt):
            errors.add("draft_receipt", "must be 'sha256:' followed by 64 lowercase hex digits")

    protected_changes: list[str] = []
    if "protected_changes" in body:
        protected_changes = patterns_problem(errors, "protected_changes",
                                             body["protected_changes"]) or []

    environment_changes: list[str] = []
    if "environment_changes" in body:
        environment_changes = patterns_problem(errors, "environment_changes",
                                               body["environment_changes"]) or []

    outcome_profile = None
    if body.get("outcome_profile") is not None:
        outcome_profile = string_field(errors, "outcome_profile", body["outcome_profile"])
        if outcome_profile is not None and not PROFILE_ID_RE.match(outcome_profile):
            errors.add("outcome_profile", f"{outcome_profile!r} is not an outcome profile id "
                                          "(kebab-case)")

    if errors.items:
        raise ContractError(errors.items)
    return Proposal(
        objective=objective,
        claims=claims,
        checks=checks,
        max_attempts=max_attempts,
        intent=intent,
        draft_receipt=draft_receipt,
        protected_changes=sorted(set(protected_changes)),
        environment_changes=sorted(set(environment_changes)),
        outcome_profile=outcome_profile,
    )


def validate_plan(
    body: object, *, max_checks: int
) -> tuple[list[Claim], list[Check]]:
    """§9: a drafted ``{claims, checks}`` object with exactly the fields of §4/§5 (wire names).
    Returns (claims, checks) in stored form or raises ContractError."""
    errors = FieldErrors()
    if type(body) is not dict:
        raise ContractError([{"path": "", "message": "must be a JSON object"}])
    _unknown_fields(errors, "", body, ("claims", "checks"), "a drafted plan")
    raw_checks = _parse_list(errors, body, "checks", False)
    raw_claims = _parse_list(errors, body, "claims", False)
    checks = _parse_checks(errors, raw_checks, max_checks=max_checks, allow_empty=False)
    claims = _parse_claims(errors, raw_claims, raw_checks, allow_empty=False)
    if errors.items:
        raise ContractError(errors.items)
    return claims, checks


# Rule 17.7: what each log check is, for a claim that rests on it alone: the agent's own report.
AGENT_REPORTED = {
    "tool_succeeded": "the agent's own tool calls",
    "tool_not_called": "the agent's own tool calls",
    "no_tool_errors": "the agent's own tool results",
}


def agent_authored(check: Check, protected: PathMatcher) -> str | None:
    """Rule 17.7: why `check` is evidence the agent can author (a file check on a path no
    protected pattern matches, or a log check, which reads what the agent reports), or None for
    operator evidence (a trusted profile's run, a protected path, a scope check over the tree
    the server hashed)."""
    kind = check["kind"]
    if kind in FILE_CHECK_KINDS:
        path = normalise_path(check["path"])
        return None if protected.matches(path) else f"{kind} on {path}, which is not protected"
    if kind in AGENT_REPORTED:
        return f"{kind}, which reads {AGENT_REPORTED[kind]}"
    return None


def unattended_refusals(claims: Sequence[Claim], checks: Sequence[Check],
                        protected: Sequence[str]) -> list[dict[str, str]]:
    """Rule 17.7, for a project whose review is off and whose `unattended_evidence` is
    `operator`: each critical claim that rests on evidence the agent can author with no trusted
    run beside it, named at its index in `claims` (the agent's own, as sent). `protected`: the
    contract's effective protected set (rule 14.3). A check of a protected path or a scope
    check beside the agent's evidence does not make up for it: neither can change with the
    work, so the agent's own check would still be the one that shows it done."""
    matcher = PathMatcher(protected)
    by_id = {check["id"]: check for check in checks}
    refusals = []
    for index, claim in enumerate(claims):
        if claim["importance"] != "critical":
            continue
        own = [check for check in (by_id[check_id] for check_id in claim["checkIds"])
               if check["kind"] == "code_verification_succeeded"
               or agent_authored(check, matcher) is not None]
        if own and all(check["kind"] != "code_verification_succeeded" for check in own):
            reasons = "; ".join(str(agent_authored(check, matcher)) for check in own)
            refusals.append({"path": join_path("claims", index), "message": (
                f"critical claim {claim['id']!r} rests on evidence the agent can author "
                f"({reasons}) with no trusted run beside it: unattended, this project "
                "certifies only on operator evidence — support it with a trusted profile "
                "(code_verification_succeeded), or have a person review the contract")})
    return refusals


def inject_code_profiles(
    proposal: Proposal, required_profile_ids: Sequence[str], *, max_checks: int | None = None
) -> Proposal:
    """§8: prepend one `code_verification_succeeded` check `code-profile-<id>` per required profile
    (sorted, so the result does not depend on database order) and the critical deterministic claim
    `required-code-verification` over them. The agent's own ids may not use the reserved names."""
    profile_ids = sorted(set(required_profile_ids))
    if not profile_ids:
        raise NoRequiredProfileError(
            [
                {
                    "path": "",
                    "message": "a code contract needs at least one required code verification "
                    "profile, and this project has none",
                }
            ]
        )
    errors = FieldErrors()
    for index, check in enumerate(proposal.checks):
        if str(check["id"]).startswith(CODE_PROFILE_CHECK_PREFIX):
            errors.add(
                join_path("checks", index, "id"),
                f"check ids starting with {CODE_PROFILE_CHECK_PREFIX!r} are reserved for "
                "the required code verification checks",
            )
    for index, claim in enumerate(proposal.claims):
        if claim["id"] == REQUIRED_CODE_CLAIM_ID:
            errors.add(
                join_path("claims", index, "id"),
                f"claim id {REQUIRED_CODE_CLAIM_ID!r} is reserved for the required code "
                "verification claim",
            )
    total = len(profile_ids) + len(proposal.checks)
    if max_checks is not None and total > max_checks:
        errors.add(
            "checks",
            f"with {len(profile_ids)} required code verification checks the "
            f"contract would hold {total} checks; at most {max_checks} are allowed",
        )
    if errors.items:
        raise ContractError(errors.items)
    injected_checks: list[Check] = [
        {
            "id": CODE_PROFILE_CHECK_PREFIX + profile_id,
            "kind": "code_verification_succeeded",
            "profile": profile_id,
            "minCount": 1,
        }
        for profile_id in profile_ids
    ]
    claim = {
        "id": REQUIRED_CODE_CLAIM_ID,
        "statement": REQUIRED_CODE_CLAIM_STATEMENT,
        "importance": "critical",
        "verification": "deterministic",
        "checkIds": [check["id"] for check in injected_checks],
        "minimumIndependentSources": 1,
    }
    return replace(
        proposal,
        kind="code",
        checks=injected_checks + list(proposal.checks),
        claims=[claim, *proposal.claims],
    )


def contract_document(
    proposal: Proposal,
    *,
    contract_id: str,
    version: int,
    started_at_seq: int,
    coverage_receipt: str | None = None,
    authorship: JSONObject | None = None,
    intent_proposal_receipt: str | None = None,
    intent_review_receipt: str | None = None,
    contract_proposal_receipt: str | None = None,
    contract_review_receipt: str | None = None,
    start_tree: dict[str, str] | None = None,
    baselines: dict[str, str] | None = None,
    begun_by: TokenRef | None = None,
) -> ContractDocument:
    """The stored contract (the `reliability/contract` event data), with its receipt::

        {contractId, version, kind: "general"|"code", objective, claims, checks, maxAttempts,
         startedAtSeq, review, intent? (v5), coverageReceipt?, draftReceipt?, authorship?,
         startTree?, baselines?, outcomeProfile?, begunBy?, environmentChanges?, receipt}

    `begunBy` (rules §17.10) is the agent token whose begin this contract is: its owner may
    not approve the contract's delivery.
    `environmentChanges` (rules §17.8, version 5 only) are the workspace environment paths a
    person let this task change: a run's environment may differ from the reference there.
    `baselines` (rules §14.5) is each check's result on the start state, by check id.
    `startTree` (rules §10.2) is the workspace tree when the contract became active,
    ``{"id": "gittree:sha256:<hex>", "exclusions": <exclusions digest>}``.

    Version 3: review off, ``review = {"mode": "off", "reviewed": false}``.
    Version 5: two-stage approved, ``review = {"mode": "required", "reviewed": true,
    intentProposalReceipt, intentReviewReceipt, contractProposalReceipt, contractReviewReceipt}``
    plus the approved ``intent``."""
    review_refs = {
        "intentProposalReceipt": intent_proposal_receipt,
        "intentReviewReceipt": intent_review_receipt,
        "contractProposalReceipt": contract_proposal_receipt,
        "contractReviewReceipt": contract_review_receipt,
    }
    document: dict[str, object] = {
        "contractId": contract_id,
        "version": version,
        "kind": proposal.kind,
        "objective": proposal.objective,
        "claims": proposal.claims,
        "checks": proposal.checks,
        "maxAttempts": proposal.max_attempts,
        "startedAtSeq": started_at_seq,
    }
    if version == CONTRACT_VERSION_REVIEW_OFF:
        if any(value is not None for value in review_refs.values()):
            raise ValueError("a version 3 contract is unreviewed and carries no review references")
        document["review"] = {"mode": "off", "reviewed": False}
    elif version == CONTRACT_VERSION_REVIEWED:
        missing = [name for name, value in review_refs.items() if value is None]
        if missing or proposal.intent is None:
            raise ValueError(f"a version 5 contract needs the approved intent and {missing}")
        document["intent"] = proposal.intent
        document["review"] = {"mode": "required", "reviewed": True, **review_refs}
    else:
        raise ValueError(f"this server writes contract versions 3 and 5, not {version}")
    if coverage_receipt is not None:
        document["coverageReceipt"] = coverage_receipt
    if proposal.draft_receipt is not None:
        document["draftReceipt"] = proposal.draft_receipt
    if authorship is not None:
        document["authorship"] = authorship
    if start_tree is not None:
        document["startTree"] = start_tree
    if baselines is not None:
        document["baselines"] = baselines
    if proposal.environment_changes:
        if version != CONTRACT_VERSION_REVIEWED:
            raise ValueError("only a person's review opens environment paths (version 5)")
        document["environmentChanges"] = list(proposal.environment_changes)
    if proposal.outcome is not None:
        document["outcomeProfile"] = proposal.outcome
    if begun_by is not None:
        document["begunBy"] = dict(begun_by)
    document["receipt"] = contract_receipt(document)
    return cast(ContractDocument, document)


def contract_receipt(document: Mapping[str, object]) -> str:
    """receipt("contract", the stored contract minus its receipt)."""
    return receipt("contract", {key: value for key, value in document.items() if key != "receipt"})


def inject_protected_paths(proposal: Proposal, patterns: Sequence[str], *,
                           runner_control: InForce | None = None,
                           max_checks: int | None = None) -> Proposal:
    """§14.3: with a non-empty effective protected set (the project's patterns and those of
    every profile the checks name, and, when a check names a profile, the built-in
    runner-control list the project leaves in force, §17.3), prepend the `unchanged` check
    `protected-paths` over it — ignoring what `protected_changes` opens (§14.4) — and the
    critical claim `protected-paths-unchanged`; the agent may use neither id.
    `protected_changes` needs a protected set to open."""
    errors = FieldErrors()
    # Runner control matters where a runner runs: a contract with no trusted run has none.
    if not any(check["kind"] == "code_verification_succeeded" for check in proposal.checks):
        runner_control = None
    if runner_control is not None:
        patterns = [*patterns, *runner_control.paths]
    sections = runner_control.sections if runner_control is not None else []
    if not patterns and not sections:
        if proposal.protected_changes:
            errors.add("protected_changes", "this project and its profiles protect no paths, so "
                                            "there is nothing to open")
            raise ContractError(errors.items)
        return proposal
    for index, check in enumerate(proposal.checks):
        if check["id"] == changes.PROTECTED_CHECK_ID:
            errors.add(join_path("checks", index, "id"),
                       f"check id {changes.PROTECTED_CHECK_ID!r} is reserved for the protected "
                       "paths check")
    for index, claim in enumerate(proposal.claims):
        if claim["id"] == changes.PROTECTED_CLAIM_ID:
            errors.add(join_path("claims", index, "id"),
                       f"claim id {changes.PROTECTED_CLAIM_ID!r} is reserved for the protected "
                       "paths claim")
    if max_checks is not None and len(proposal.checks) + 1 > max_checks:
        errors.add("checks", f"with the protected paths check the contract would hold "
                             f"{len(proposal.checks) + 1} checks; at most {max_checks} are "
                             "allowed")
    if errors.items:
        raise ContractError(errors.items)
    return replace(
        proposal,
        checks=[changes.protected_check(
            patterns, proposal.protected_changes, sections,
            runner_control.exempt if runner_control is not None else ()), *proposal.checks],
        claims=[changes.protected_claim(), *proposal.claims])


def refuse_tamper_ids(proposal: Proposal) -> None:
    """Rule 17.5: the tamper scan's check and claim ids are the server's in every contract; an
    agent's check or claim using one is refused, named at its index in the body as sent."""
    errors = FieldErrors()
    for index, check in enumerate(proposal.checks):
        if check["id"] == tamper.TAMPER_CHECK_ID:
            errors.add(join_path("checks", index, "id"),
                       f"check id {tamper.TAMPER_CHECK_ID!r} is reserved for the tamper scan")
    for index, claim in enumerate(proposal.claims):
        if claim["id"] == tamper.TAMPER_CLAIM_ID:
            errors.add(join_path("claims", index, "id"),
                       f"claim id {tamper.TAMPER_CLAIM_ID!r} is reserved for the tamper scan")
    if errors.items:
        raise ContractError(errors.items)


def inject_tamper_scan(proposal: Proposal, *, max_checks: int | None = None) -> Proposal:
    """Rule 17.5: when a check of the contract names a verifier profile (code runs), append
    the check `tamper-free` (kind `tamper_free`) and the critical claim
    `no-evidence-tampering` over it (their ids refused to the agent: `refuse_tamper_ids`)."""
    if not any(check["kind"] == "code_verification_succeeded" for check in proposal.checks):
        return proposal
    if max_checks is not None and len(proposal.checks) + 1 > max_checks:
        raise ContractError([{"path": "checks", "message": (
            f"with the tamper scan's check the contract would hold {len(proposal.checks) + 1} "
            f"checks; at most {max_checks} are allowed")}])
    return replace(proposal, checks=[*proposal.checks, tamper.tamper_check()],
                   claims=[*proposal.claims, tamper.tamper_claim()])

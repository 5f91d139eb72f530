"""rules §4 rules 1–5, §5 claim rules, §6 intent and §8 injection: what a proposal may say."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest

from governor.domain.canonical import receipt
from governor.domain.contracts import (
    ContractError,
    NoRequiredProfileError,
    Proposal,
    contract_document,
    contract_receipt,
    inject_code_profiles,
    validate_plan,
    validate_proposal,
)

CAP = 3
MAX_CHECKS = 20


def body(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "objective": "Add a greeting module.",
        "claims": [
            {
                "id": "greets",
                "statement": "hello.py prints a greeting",
                "importance": "critical",
                "verification": "deterministic",
                "check_ids": ["hello-exists", "says-hello"],
            }
        ],
        "checks": [
            {"id": "hello-exists", "kind": "file_exists", "path": "hello.py"},
            {"id": "says-hello", "kind": "file_contains", "path": "hello.py", "text": "hello"},
        ],
    }
    base.update(overrides)
    return base


def validate(data: Any, **kwargs: Any) -> Proposal:
    kwargs.setdefault("max_checks", MAX_CHECKS)
    kwargs.setdefault("max_attempts_cap", CAP)
    return validate_proposal(data, **kwargs)


def errors_of(data: Any, **kwargs: Any) -> list[dict[str, str]]:
    with pytest.raises(ContractError) as caught:
        validate(data, **kwargs)
    return caught.value.errors


def paths_of(data: Any, **kwargs: Any) -> list[str]:
    return [error["path"] for error in errors_of(data, **kwargs)]


def with_check(check: dict[str, Any]) -> dict[str, Any]:
    data = body()
    data["checks"].append(check)
    return data


def check_errors(check: dict[str, Any]) -> list[dict[str, str]]:
    return errors_of(with_check(check))


# --- a valid proposal -----------------------------------------------------------------------


def test_valid_proposal_is_stored_in_camel_case_with_defaults_materialised() -> None:
    data = body()
    data["checks"] += [
        {"id": "ran", "kind": "tool_succeeded", "tool": "shell", "arguments_contain": "pytest"},
        {"id": "tests", "kind": "code_verification_succeeded", "profile": "unit-tests"},
    ]
    data["claims"][0]["check_ids"] += ["ran", "tests"]
    proposal = validate(data)
    assert proposal.max_attempts == CAP
    assert proposal.checks[2] == {
        "id": "ran",
        "kind": "tool_succeeded",
        "tool": "shell",
        "argumentsContain": "pytest",
        "minCount": 1,
    }
    assert proposal.checks[3]["minCount"] == 1
    assert proposal.claims[0]["checkIds"] == ["hello-exists", "says-hello", "ran", "tests"]
    assert proposal.claims[0]["minimumIndependentSources"] == 1
    assert proposal.kind == "general"


def test_every_check_kind_is_accepted_with_exactly_its_fields() -> None:
    checks: list[dict[str, Any]] = [
        {"id": "a", "kind": "file_exists", "path": "a"},
        {"id": "b", "kind": "file_absent", "path": "b"},
        {"id": "c", "kind": "file_contains", "path": "c", "text": "x"},
        {"id": "d", "kind": "file_not_contains", "path": "d", "text": "x"},
        {"id": "e", "kind": "file_equals", "path": "e", "text": ""},
        {"id": "f", "kind": "json_equals", "path": "f.json", "pointer": "", "value": {"a": [1]}},
        {"id": "g", "kind": "tool_succeeded", "tool": "t", "min_count": 100},
        {"id": "h", "kind": "tool_not_called", "tool": "t"},
        {"id": "i", "kind": "no_tool_errors"},
        {"id": "j", "kind": "code_verification_succeeded", "profile": "p", "min_count": 2},
    ]
    claims = [
        {
            "id": "all",
            "statement": "s",
            "importance": "critical",
            "verification": "deterministic",
            "check_ids": [check["id"] for check in checks],
        }
    ]
    proposal = validate(body(checks=checks, claims=claims))
    assert [check["kind"] for check in proposal.checks] == [check["kind"] for check in checks]


def test_errors_report_every_failing_field_not_just_the_first() -> None:
    data = body(objective="", max_attempts=0)
    data["checks"][0]["path"] = "/etc/passwd"
    data["checks"][1]["text"] = ""
    assert paths_of(data) == ["objective", "checks/0/path", "checks/1/text", "max_attempts"]


def test_body_must_be_an_object() -> None:
    assert paths_of([1, 2]) == [""]


def test_unknown_body_field_is_refused() -> None:
    assert paths_of(body(deadline="tomorrow")) == ["deadline"]


# --- objective -----------------------------------------------------------------------------


def test_objective_over_4096_utf8_bytes_is_refused() -> None:
    assert validate(body(objective="é" * 2048)).objective == "é" * 2048
    assert paths_of(body(objective="é" * 2049)) == ["objective"]


def test_objective_blank_or_missing_is_refused() -> None:
    assert paths_of(body(objective="   ")) == ["objective"]
    data = body()
    del data["objective"]
    assert paths_of(data) == ["objective"]


# --- rule 4.1 ------------------------------------------------------------------------------


def test_rule_4_1_at_least_one_check_is_required() -> None:
    assert "checks" in paths_of(body(checks=[], claims=[]))


def test_rule_4_1_assess_may_have_zero_checks() -> None:
    data = body(checks=[])
    data["claims"][0]["check_ids"] = []
    assert validate(data, allow_empty_checks=True).checks == []


def test_rule_4_1_more_than_max_checks_is_refused() -> None:
    checks = [{"id": f"c{i}", "kind": "file_exists", "path": "a"} for i in range(4)]
    data = body(checks=checks)
    data["claims"][0]["check_ids"] = ["c0"]
    assert validate(data, max_checks=4)
    errors = errors_of(data, max_checks=3)
    assert [e["path"] for e in errors] == ["checks"]
    assert "at most 3" in errors[0]["message"]


def test_rule_4_1_duplicate_check_ids_are_refused() -> None:
    errors = check_errors({"id": "hello-exists", "kind": "file_absent", "path": "x"})
    assert [e["path"] for e in errors] == ["checks/2/id"]
    assert "duplicate" in errors[0]["message"]


def test_rule_4_1_ids_are_compared_after_trimming() -> None:
    assert paths_of(with_check({"id": " hello-exists ", "kind": "file_absent", "path": "x"})) == [
        "checks/2/id"
    ]


def test_rule_4_1_blank_or_long_check_id_is_refused() -> None:
    assert paths_of(with_check({"id": "  ", "kind": "no_tool_errors"})) == ["checks/2/id"]
    assert paths_of(with_check({"id": "x" * 129, "kind": "no_tool_errors"})) == ["checks/2/id"]
    assert validate(with_check({"id": "x" * 128, "kind": "no_tool_errors"}))


def test_rule_4_1_check_id_is_stored_trimmed() -> None:
    assert validate(with_check({"id": "  spaced ", "kind": "no_tool_errors"})).checks[2]["id"] == (
        "spaced"
    )


def test_rule_4_1_missing_check_id_is_refused() -> None:
    assert paths_of(with_check({"kind": "no_tool_errors"})) == ["checks/2/id"]


# --- rule 4.2 ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/etc/passwd", "\\windows\\system32", "C:\\x", "c:x"])
def test_rule_4_2_path_refuses_absolute_paths(path: str) -> None:
    errors = check_errors({"id": "x", "kind": "file_exists", "path": path})
    assert [e["path"] for e in errors] == ["checks/2/path"]


@pytest.mark.parametrize("path", ["..", "../x", "a/../b", "a/..", "a/b/../../.."])
def test_rule_4_2_path_refuses_dotdot_segments(path: str) -> None:
    errors = check_errors({"id": "x", "kind": "file_exists", "path": path})
    assert "'..'" in errors[0]["message"]


@pytest.mark.parametrize("path", ["..\\x", "a\\..\\b", "a/..\\b", "a\\.."])
def test_rule_4_2_path_refuses_dotdot_hidden_behind_backslashes(path: str) -> None:
    errors = check_errors({"id": "x", "kind": "file_exists", "path": path})
    assert [e["path"] for e in errors] == ["checks/2/path"]


@pytest.mark.parametrize("path", ["...", "a..b", "..a", "./a", "a/./b", "dir/file.txt"])
def test_rule_4_2_path_allows_dots_that_are_not_a_parent_segment(path: str) -> None:
    assert validate(with_check({"id": "x", "kind": "file_exists", "path": path}))


def test_rule_4_2_path_must_be_non_empty_and_at_most_1024_chars() -> None:
    assert paths_of(with_check({"id": "x", "kind": "file_exists", "path": ""})) == ["checks/2/path"]
    assert paths_of(with_check({"id": "x", "kind": "file_exists", "path": "a" * 1025})) == [
        "checks/2/path"
    ]
    assert validate(with_check({"id": "x", "kind": "file_exists", "path": "a" * 1024}))


def test_rule_4_2_path_with_nul_is_refused() -> None:
    assert paths_of(with_check({"id": "x", "kind": "file_exists", "path": "a\x00b"})) == [
        "checks/2/path"
    ]


def test_rule_4_2_path_must_be_a_string() -> None:
    assert paths_of(with_check({"id": "x", "kind": "file_exists", "path": ["a"]})) == [
        "checks/2/path"
    ]


# --- rule 4.3 ------------------------------------------------------------------------------


def test_rule_4_3_tool_must_be_non_empty_and_at_most_256_chars() -> None:
    assert paths_of(with_check({"id": "x", "kind": "tool_not_called", "tool": ""})) == [
        "checks/2/tool"
    ]
    assert paths_of(with_check({"id": "x", "kind": "tool_not_called", "tool": "t" * 257})) == [
        "checks/2/tool"
    ]
    assert validate(with_check({"id": "x", "kind": "tool_not_called", "tool": "t" * 256}))


@pytest.mark.parametrize("profile", ["Tests", "unit_tests", "-unit", "unit-", "a--b", "", "a b"])
def test_rule_4_3_profile_must_be_kebab_case(profile: str) -> None:
    check = {"id": "x", "kind": "code_verification_succeeded", "profile": profile}
    assert paths_of(with_check(check)) == ["checks/2/profile"]


def test_rule_4_3_profile_at_most_128_chars() -> None:
    check = {"id": "x", "kind": "code_verification_succeeded", "profile": "a" * 129}
    assert paths_of(with_check(check)) == ["checks/2/profile"]
    check["profile"] = "a" * 128
    assert validate(with_check(check))


# --- rule 4.4 ------------------------------------------------------------------------------


def test_rule_4_4_text_must_be_non_empty_for_contains_and_not_contains() -> None:
    for kind in ("file_contains", "file_not_contains"):
        check = {"id": "x", "kind": kind, "path": "a", "text": ""}
        assert paths_of(with_check(check)) == ["checks/2/text"]


def test_rule_4_4_text_may_be_empty_for_file_equals() -> None:
    check = {"id": "x", "kind": "file_equals", "path": "a", "text": ""}
    assert validate(with_check(check)).checks[2]["text"] == ""


def test_rule_4_4_text_at_most_4096_chars() -> None:
    check = {"id": "x", "kind": "file_equals", "path": "a", "text": "é" * 4097}
    assert paths_of(with_check(check)) == ["checks/2/text"]
    check["text"] = "é" * 4096
    assert validate(with_check(check))


@pytest.mark.parametrize("pointer", ["a", "a/b", "/a~", "/a~2", "/~x", "#/a"])
def test_rule_4_4_invalid_json_pointers_are_refused(pointer: str) -> None:
    check = {"id": "x", "kind": "json_equals", "path": "a.json", "pointer": pointer, "value": 1}
    assert paths_of(with_check(check)) == ["checks/2/pointer"]


@pytest.mark.parametrize("pointer", ["", "/", "/a", "/a~1b", "/~0", "/0/-"])
def test_rule_4_4_valid_json_pointers_are_accepted(pointer: str) -> None:
    check = {"id": "x", "kind": "json_equals", "path": "a.json", "pointer": pointer, "value": 1}
    assert validate(with_check(check))


def test_rule_4_4_pointer_at_most_2048_chars() -> None:
    check = {"id": "x", "kind": "json_equals", "path": "a", "pointer": "/" * 2049, "value": 1}
    assert paths_of(with_check(check)) == ["checks/2/pointer"]


@pytest.mark.parametrize(
    ("value", "where"),
    [
        (math.nan, "checks/2/value"),
        (math.inf, "checks/2/value"),
        ({"a": [1, -math.inf]}, "checks/2/value/a/1"),
        (-0.0, "checks/2/value"),
        (2**53, "checks/2/value"),
        (-(2**53), "checks/2/value"),
        ({"k": {1, 2}}, "checks/2/value/k"),
        ("\ud800", "checks/2/value"),
    ],
)
def test_rule_4_4_value_refuses_non_finite_and_out_of_range_numbers(value: Any, where: str) -> None:
    check = {"id": "x", "kind": "json_equals", "path": "a", "pointer": "", "value": value}
    assert paths_of(with_check(check)) == [where]


def test_rule_4_4_value_accepts_any_lossless_json() -> None:
    value: dict[str, Any] = {"n": None, "b": True, "i": 2**53 - 1, "f": 1.5, "s": "x", "l": [[]]}
    check = {"id": "x", "kind": "json_equals", "path": "a", "pointer": "", "value": value}
    assert validate(with_check(check)).checks[2]["value"] == value


def test_rule_4_4_arguments_contain_must_be_non_empty_when_given() -> None:
    check = {"id": "x", "kind": "tool_succeeded", "tool": "t", "arguments_contain": ""}
    assert paths_of(with_check(check)) == ["checks/2/arguments_contain"]
    check["arguments_contain"] = "a" * 4097
    assert paths_of(with_check(check)) == ["checks/2/arguments_contain"]


@pytest.mark.parametrize("min_count", [0, 101, -1, 1.0, True, "2", None])
def test_rule_4_4_min_count_must_be_an_integer_from_1_to_100(min_count: Any) -> None:
    for check in (
        {"id": "x", "kind": "tool_succeeded", "tool": "t", "min_count": min_count},
        {"id": "x", "kind": "code_verification_succeeded", "profile": "p", "min_count": min_count},
    ):
        assert paths_of(with_check(check)) == ["checks/2/min_count"]


def test_rule_4_4_min_count_bounds_1_and_100_are_accepted() -> None:
    for count in (1, 100):
        check = {"id": "x", "kind": "tool_succeeded", "tool": "t", "min_count": count}
        assert validate(with_check(check)).checks[2]["minCount"] == count


# --- rule 4.5 ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["file_matches", "FILE_EXISTS", "", None, 3])
def test_rule_4_5_unknown_kinds_are_refused(kind: Any) -> None:
    errors = check_errors({"id": "x", "kind": kind, "path": "a"})
    assert [e["path"] for e in errors] == ["checks/2/kind"]


def test_rule_4_5_missing_kind_is_refused() -> None:
    assert paths_of(with_check({"id": "x", "path": "a"})) == ["checks/2/kind"]


@pytest.mark.parametrize(
    ("check", "field"),
    [
        ({"id": "x", "kind": "file_exists", "path": "a", "text": "t"}, "text"),
        ({"id": "x", "kind": "no_tool_errors", "tool": "t"}, "tool"),
        ({"id": "x", "kind": "tool_not_called", "tool": "t", "min_count": 1}, "min_count"),
        ({"id": "x", "kind": "tool_succeeded", "tool": "t", "minCount": 1}, "minCount"),
        (
            {"id": "x", "kind": "file_equals", "path": "a", "text": "", "ignore_case": True},
            "ignore_case",
        ),
    ],
)
def test_rule_4_5_unknown_fields_are_refused(check: dict[str, Any], field: str) -> None:
    assert paths_of(with_check(check)) == [f"checks/2/{field}"]


def test_rule_4_5_missing_required_fields_are_refused() -> None:
    check = {"id": "x", "kind": "json_equals", "path": "a"}
    assert paths_of(with_check(check)) == ["checks/2/pointer", "checks/2/value"]


def test_rule_4_5_check_must_be_an_object() -> None:
    assert paths_of(with_check("file_exists a")) == ["checks/2"]  # type: ignore[arg-type]


# --- max_attempts --------------------------------------------------------------------------


def test_max_attempts_defaults_to_the_project_cap() -> None:
    assert validate(body(), max_attempts_cap=7).max_attempts == 7


def test_max_attempts_above_the_cap_is_refused() -> None:
    assert validate(body(max_attempts=3)).max_attempts == 3
    assert paths_of(body(max_attempts=4)) == ["max_attempts"]


@pytest.mark.parametrize("value", [0, -1, 2.0, True, "2"])
def test_max_attempts_must_be_an_integer_of_at_least_1(value: Any) -> None:
    assert paths_of(body(max_attempts=value)) == ["max_attempts"]


# --- §5 claims -----------------------------------------------------------------------------


def claim(**overrides: Any) -> dict[str, Any]:
    base = {
        "id": "c2",
        "statement": "s",
        "importance": "minor",
        "verification": "deterministic",
        "check_ids": ["hello-exists"],
    }
    base.update(overrides)
    return base


def claim_paths(extra: dict[str, Any]) -> list[str]:
    data = body()
    data["claims"].append(extra)
    return paths_of(data)


def test_rule_5_at_least_one_claim_is_required() -> None:
    assert "claims" in paths_of(body(claims=[]))


def test_rule_5_at_most_100_claims() -> None:
    claims = [claim(id=f"c{i}") for i in range(101)]
    assert "claims" in paths_of(body(claims=claims))
    assert validate(body(claims=claims[:100]))


def test_rule_5_duplicate_claim_ids_are_refused() -> None:
    assert claim_paths(claim(id="greets")) == ["claims/1/id"]


def test_rule_5_claim_id_at_most_128_chars() -> None:
    assert claim_paths(claim(id="c" * 129)) == ["claims/1/id"]


def test_rule_5_statement_non_empty_and_at_most_1000_chars() -> None:
    assert claim_paths(claim(statement="")) == ["claims/1/statement"]
    assert claim_paths(claim(statement="s" * 1001)) == ["claims/1/statement"]


def test_rule_5_importance_and_verification_are_enumerations() -> None:
    assert claim_paths(claim(importance="high")) == ["claims/1/importance"]
    assert claim_paths(claim(verification="manual")) == ["claims/1/verification"]


def test_rule_5_check_ids_must_exist() -> None:
    assert claim_paths(claim(check_ids=["nope"])) == ["claims/1/check_ids/0"]


def test_rule_5_check_ids_must_be_unique() -> None:
    assert claim_paths(claim(check_ids=["hello-exists", "hello-exists"])) == [
        "claims/1/check_ids/1"
    ]


@pytest.mark.parametrize("value", [0, 11, 1.5, True])
def test_rule_5_minimum_independent_sources_from_1_to_10(value: Any) -> None:
    assert claim_paths(claim(minimum_independent_sources=value)) == [
        "claims/1/minimum_independent_sources"
    ]


def test_rule_5_unknown_claim_field_is_refused() -> None:
    assert claim_paths(claim(checkIds=["hello-exists"])) == ["claims/1/checkIds"]


def test_rule_5_missing_claim_fields_are_refused() -> None:
    assert claim_paths({"id": "c2"}) == [
        "claims/1/statement",
        "claims/1/importance",
        "claims/1/verification",
        "claims/1/check_ids",
    ]


# --- §6 intent -----------------------------------------------------------------------------


def intent(**lists: Any) -> dict[str, Any]:
    return body(intent=lists)


def test_rule_6_intent_is_stored_trimmed_with_camel_case_lists() -> None:
    proposal = validate(intent(constraints=["  keep API  "], non_goals=["no refactor"]))
    assert proposal.intent == {
        "constraints": ["keep API"],
        "assumptions": [],
        "nonGoals": ["no refactor"],
        "ambiguities": [],
    }


def test_rule_6_intent_is_required_when_review_is_required() -> None:
    assert paths_of(body(), require_intent=True) == ["intent"]


def test_rule_6_intent_lists_hold_at_most_20_items() -> None:
    assert validate(intent(assumptions=[f"a{i}" for i in range(20)]))
    assert paths_of(intent(assumptions=[f"a{i}" for i in range(21)])) == ["intent/assumptions"]


def test_rule_6_intent_items_are_unique_after_trimming() -> None:
    assert paths_of(intent(ambiguities=["x", " x "])) == ["intent/ambiguities/1"]


def test_rule_6_intent_items_are_non_empty_after_trimming() -> None:
    assert paths_of(intent(constraints=["  "])) == ["intent/constraints/0"]


def test_rule_6_intent_item_at_most_2048_utf8_bytes() -> None:
    assert validate(intent(constraints=["é" * 1024]))
    assert paths_of(intent(constraints=["é" * 1025])) == ["intent/constraints/0"]


def test_rule_6_whole_intent_at_most_24_kib() -> None:
    items = [f"{i:02d}" + "x" * 2000 for i in range(13)]
    assert paths_of(intent(constraints=items)) == ["intent"]
    assert validate(intent(constraints=items[:11]))


def test_rule_6_unknown_intent_field_is_refused() -> None:
    assert paths_of(intent(goals=["x"])) == ["intent/goals"]


# --- draft receipt and the §9 plan ----------------------------------------------------------


def test_draft_receipt_must_be_a_receipt() -> None:
    assert paths_of(body(draft_receipt="abc")) == ["draft_receipt"]
    good = "sha256:" + "0" * 64
    assert validate(body(draft_receipt=good)).draft_receipt == good


def test_rule_9_plan_has_exactly_claims_and_checks() -> None:
    data = body()
    claims, checks = validate_plan(
        {"claims": data["claims"], "checks": data["checks"]}, max_checks=MAX_CHECKS
    )
    assert [c["id"] for c in checks] == ["hello-exists", "says-hello"]
    with pytest.raises(ContractError) as caught:
        validate_plan({**data}, max_checks=MAX_CHECKS)
    assert [e["path"] for e in caught.value.errors] == ["objective"]


# --- §8 code profile injection --------------------------------------------------------------


def test_rule_8_required_profiles_are_prepended_with_a_critical_claim() -> None:
    proposal = inject_code_profiles(validate(body()), ["unit-tests", "lint", "lint"])
    assert proposal.kind == "code"
    assert proposal.checks[:2] == [
        {
            "id": "code-profile-lint",
            "kind": "code_verification_succeeded",
            "profile": "lint",
            "minCount": 1,
        },
        {
            "id": "code-profile-unit-tests",
            "kind": "code_verification_succeeded",
            "profile": "unit-tests",
            "minCount": 1,
        },
    ]
    first = proposal.claims[0]
    assert first["id"] == "required-code-verification"
    assert (first["importance"], first["verification"]) == ("critical", "deterministic")
    assert first["checkIds"] == ["code-profile-lint", "code-profile-unit-tests"]
    assert [c["id"] for c in proposal.checks[2:]] == ["hello-exists", "says-hello"]


def test_rule_8_code_contract_may_add_no_checks_or_claims_of_its_own() -> None:
    proposal = validate(
        body(checks=[], claims=[]), allow_empty_checks=True, allow_empty_claims=True
    )
    injected = inject_code_profiles(proposal, ["tests"])
    assert [c["id"] for c in injected.checks] == ["code-profile-tests"]


def test_rule_8_agent_check_may_not_use_a_reserved_id() -> None:
    data = with_check({"id": "code-profile-tests", "kind": "no_tool_errors"})
    with pytest.raises(ContractError) as caught:
        inject_code_profiles(validate(data), ["tests"])
    assert [e["path"] for e in caught.value.errors] == ["checks/2/id"]


def test_rule_8_agent_claim_may_not_use_the_reserved_claim_id() -> None:
    data = body()
    data["claims"][0]["id"] = "required-code-verification"
    with pytest.raises(ContractError) as caught:
        inject_code_profiles(validate(data), ["tests"])
    assert [e["path"] for e in caught.value.errors] == ["claims/0/id"]


def test_rule_8_no_required_profile_is_refused() -> None:
    with pytest.raises(NoRequiredProfileError):
        inject_code_profiles(validate(body()), [])


def test_rule_8_injected_checks_count_towards_max_checks() -> None:
    with pytest.raises(ContractError) as caught:
        inject_code_profiles(validate(body()), ["a", "b"], max_checks=3)
    assert [e["path"] for e in caught.value.errors] == ["checks"]


# --- stored contract -----------------------------------------------------------------------


def test_version_3_contract_is_unreviewed_and_carries_its_receipt() -> None:
    proposal = validate(body())
    doc = contract_document(proposal, contract_id="ct-1", version=3, started_at_seq=41)
    assert doc["version"] == 3
    assert doc["startedAtSeq"] == 41
    assert doc["maxAttempts"] == CAP
    assert doc["contractId"] == "ct-1"
    assert doc["review"] == {"mode": "off", "reviewed": False}
    without = {k: v for k, v in doc.items() if k != "receipt"}
    assert doc["receipt"] == receipt("contract", without) == contract_receipt(doc)


def test_version_5_contract_holds_the_approved_intent_and_review_references() -> None:
    proposal = validate(intent(constraints=["keep API"]))
    refs: dict[str, Any] = {
        "intent_proposal_receipt": "sha256:" + "1" * 64,
        "intent_review_receipt": "sha256:" + "2" * 64,
        "contract_proposal_receipt": "sha256:" + "3" * 64,
        "contract_review_receipt": "sha256:" + "4" * 64,
    }
    doc = contract_document(proposal, contract_id="ct-1", version=5, started_at_seq=0, **refs)
    assert doc["intent"]["constraints"] == ["keep API"]
    assert doc["review"]["reviewed"] is True
    assert doc["review"]["intentReviewReceipt"] == refs["intent_review_receipt"]
    assert doc["receipt"] == contract_receipt(doc)


def test_version_5_contract_without_review_references_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="version 5"):
        contract_document(validate(intent()), contract_id="c", version=5, started_at_seq=0)
    with pytest.raises(ValueError, match="versions 3 and 5"):
        contract_document(validate(body()), contract_id="c", version=4, started_at_seq=0)


def test_contract_receipt_changes_with_any_check_parameter() -> None:
    first = contract_document(validate(body()), contract_id="c", version=3, started_at_seq=1)
    data = body()
    data["checks"][1]["text"] = "hello!"
    second = contract_document(validate(data), contract_id="c", version=3, started_at_seq=1)
    assert first["receipt"] != second["receipt"]


def test_validation_does_not_modify_the_body() -> None:
    data = body(intent={"constraints": [" a "]})
    snapshot = copy.deepcopy(data)
    validate(data)
    assert data == snapshot

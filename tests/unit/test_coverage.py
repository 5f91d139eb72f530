"""rules §5: the structural coverage assessment."""

from __future__ import annotations

from typing import Any

import pytest

from governor.domain.canonical import receipt
from governor.domain.contracts import validate_proposal
from governor.domain.coverage import assess, assessment_receipt, evidence_source

OBJECTIVE = "Ship the parser."


def check(check_id: str, kind: str = "file_equals", **fields: Any) -> dict[str, Any]:
    defaults: dict[str, dict[str, Any]] = {
        "file_equals": {"path": f"{check_id}.txt", "text": "x"},
        "file_exists": {"path": f"{check_id}.txt"},
        "file_absent": {"path": f"{check_id}.txt"},
        "file_contains": {"path": f"{check_id}.txt", "text": "x"},
        "file_not_contains": {"path": f"{check_id}.txt", "text": "x"},
        "json_equals": {"path": f"{check_id}.json", "pointer": "", "value": 1},
        "tool_succeeded": {"tool": "t", "minCount": 1},
        "tool_not_called": {"tool": "t"},
        "no_tool_errors": {},
        "code_verification_succeeded": {"profile": "tests", "minCount": 1},
    }
    return {"id": check_id, "kind": kind, **{**defaults[kind], **fields}}


def claim(
    claim_id: str,
    check_ids: list[str],
    importance: str = "critical",
    verification: str = "deterministic",
    sources: int = 1,
) -> dict[str, Any]:
    return {
        "id": claim_id,
        "statement": f"{claim_id} holds",
        "importance": importance,
        "verification": verification,
        "checkIds": check_ids,
        "minimumIndependentSources": sources,
    }


def codes(assessment: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f["severity"], f["code"]) for f in assessment["findings"]]


def test_rule_5_a_well_covered_proposal_is_ready() -> None:
    result = assess(OBJECTIVE, [claim("c", ["a"])], [check("a")])
    assert result["status"] == "ready"
    assert codes(result) == [("warning", "structural_coverage_only")]
    assert result["scores"] == {
        "critical": {"covered": 1, "total": 1, "percent": 100},
        "weighted": {"covered": 5, "total": 5, "percent": 100},
    }


def test_rule_5_the_structural_warning_always_comes_first() -> None:
    result = assess(OBJECTIVE, [], [])
    assert result["findings"][0]["code"] == "structural_coverage_only"
    assert result["findings"][0]["severity"] == "warning"


def test_rule_5_missing_critical_claim_is_an_error() -> None:
    result = assess(OBJECTIVE, [claim("c", ["a"], importance="important")], [check("a")])
    assert ("error", "missing_critical_claim") in codes(result)
    assert result["status"] == "not-ready"


@pytest.mark.parametrize(
    ("kind", "code"),
    [
        ("file_contains", "exact_literal_brittleness"),
        ("file_not_contains", "exact_literal_brittleness"),
        ("file_exists", "presence_only_evidence"),
        ("no_tool_errors", "trajectory_not_outcome"),
        ("tool_succeeded", "tool_success_not_outcome"),
    ],
)
def test_rule_5_weak_evidence_kinds_warn_per_claim_and_check(kind: str, code: str) -> None:
    result = assess(
        OBJECTIVE,
        [claim("c1", ["a"]), claim("c2", ["a", "b"], "minor")],
        [check("a", kind), check("b")],
    )
    weak = [f for f in result["findings"] if f["code"] == code]
    assert [(f["claimId"], f["checkId"]) for f in weak] == [("c1", "a"), ("c2", "a")]
    assert all(f["severity"] == "warning" for f in weak)
    assert result["status"] == "ready"


@pytest.mark.parametrize(
    "kind",
    ["file_equals", "json_equals", "file_absent", "tool_not_called", "code_verification_succeeded"],
)
def test_rule_5_outcome_kinds_raise_no_evidence_warning(kind: str) -> None:
    result = assess(OBJECTIVE, [claim("c", ["a"])], [check("a", kind)])
    assert codes(result) == [("warning", "structural_coverage_only")]


def test_rule_5_claim_requiring_a_human_is_an_error() -> None:
    result = assess(OBJECTIVE, [claim("c", ["a"], verification="human-required")], [check("a")])
    assert ("error", "claim_requires_human") in codes(result)
    assert result["scores"]["critical"]["covered"] == 0


def test_rule_5_unsupported_claim_is_an_error() -> None:
    result = assess(OBJECTIVE, [claim("c", ["a"], verification="unsupported")], [check("a")])
    assert ("error", "claim_unsupported") in codes(result)


def test_rule_5_claim_without_checks_has_insufficient_sources() -> None:
    result = assess(OBJECTIVE, [claim("c", [])], [])
    assert codes(result)[-1] == ("error", "insufficient_independent_sources")
    assert result["claims"][0]["covered"] is False


def test_rule_5_same_file_counts_as_one_source_even_as_dot_slash() -> None:
    checks = [check("a", path="src/x.py"), check("b", "file_contains", path="./src//x.py")]
    result = assess(OBJECTIVE, [claim("c", ["a", "b"], sources=2)], checks)
    assert ("error", "insufficient_independent_sources") in codes(result)
    assert result["claims"][0]["sources"] == ["workspace-file:src/x.py"]


def test_rule_5_distinct_sources_satisfy_the_minimum() -> None:
    checks = [
        check("a"),
        check("b", "tool_succeeded"),
        check("c", "no_tool_errors"),
        check("d", "code_verification_succeeded"),
    ]
    result = assess(OBJECTIVE, [claim("c1", ["a", "b", "c", "d"], sources=3)], checks)
    assert result["claims"][0]["sources"] == [
        "session-trajectory:tool-events",
        "trusted-profile:tests",
        "workspace-file:a.txt",
    ]
    assert result["status"] == "ready"


def test_rule_5_evidence_source_of_each_kind() -> None:
    assert evidence_source(check("a", "json_equals", path="./cfg/a.json")) == (
        "workspace-file:cfg/a.json"
    )
    assert evidence_source(check("a", "tool_not_called")) == "session-trajectory:tool-events"
    assert evidence_source(check("a", "code_verification_succeeded", profile="lint")) == (
        "trusted-profile:lint"
    )


def test_rule_5_orphan_and_shared_checks_warn() -> None:
    result = assess(
        OBJECTIVE,
        [claim("c1", ["shared"]), claim("c2", ["shared"], "minor")],
        [check("shared"), check("lonely")],
    )
    assert codes(result)[-2:] == [("warning", "shared_check"), ("warning", "orphan_check")]
    assert result["status"] == "ready"


def test_rule_5_findings_come_in_the_specified_order() -> None:
    claims = [
        claim("c1", ["exists"], importance="important"),
        claim("c2", ["exists"], importance="minor", verification="human-required"),
    ]
    result = assess(OBJECTIVE, claims, [check("exists", "file_exists"), check("orphan")])
    assert [code for _, code in codes(result)] == [
        "structural_coverage_only",
        "missing_critical_claim",
        "presence_only_evidence",
        "presence_only_evidence",
        "claim_requires_human",
        "shared_check",
        "orphan_check",
    ]


def test_rule_5_weighted_score_uses_5_3_1() -> None:
    claims = [
        claim("crit", ["a"]),
        claim("imp", ["b"], "important"),
        claim("min", ["c"], "minor", verification="unsupported"),
    ]
    result = assess(OBJECTIVE, claims, [check("a"), check("b"), check("c")])
    assert result["scores"]["weighted"] == {"covered": 8, "total": 9, "percent": 88.89}
    assert result["scores"]["critical"] == {"covered": 1, "total": 1, "percent": 100}


def test_rule_5_percent_is_zero_when_total_is_zero() -> None:
    assert assess(OBJECTIVE, [], [])["scores"]["critical"] == {
        "covered": 0,
        "total": 0,
        "percent": 0,
    }


def test_rule_5_receipt_covers_objective_claims_checks_and_assessment() -> None:
    claims, checks = [claim("c", ["a"])], [check("a")]
    result = assess(OBJECTIVE, claims, checks)
    body = {k: v for k, v in result.items() if k != "receipt"}
    expected = receipt(
        "coverage-assessment",
        {"objective": OBJECTIVE, "claims": claims, "checks": checks, "assessment": body},
    )
    assert result["receipt"] == expected == assessment_receipt(OBJECTIVE, claims, checks, result)
    assert assess("Another objective.", claims, checks)["receipt"] != result["receipt"]


def test_rule_5_assesses_a_validated_proposal_end_to_end() -> None:
    proposal = validate_proposal(
        {
            "objective": OBJECTIVE,
            "claims": [
                {
                    "id": "parses",
                    "statement": "the parser parses",
                    "importance": "critical",
                    "verification": "deterministic",
                    "check_ids": ["tests"],
                }
            ],
            "checks": [{"id": "tests", "kind": "code_verification_succeeded", "profile": "unit"}],
        },
        max_checks=20,
        max_attempts_cap=3,
    )
    result = assess(proposal.objective, proposal.claims, proposal.checks)
    assert result["status"] == "ready"
    assert result["evidenceSources"] == {"tests": "trusted-profile:unit"}

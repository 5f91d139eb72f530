"""rules §17.6–17.7 on plain data: a test run counts as discriminating evidence only when a test
that failed on the contract-start tree passes now, and an unattended contract's critical claims
rest on evidence the operator controls."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from governor.domain.checks import LogEvidence, evaluate_check
from governor.domain.contracts import (
    REQUIRED_CODE_CLAIM_ID,
    inject_code_profiles,
    unattended_refusals,
    validate_proposal,
)
from governor.domain.coverage import assess
from governor.domain.documents import Check, Claim
from governor.domain.reports import against_baseline
from governor.domain.workspace import Workspace
from tests.unit.test_checks import CODE_CHECK, RECEIPT, START, TREE, verification

BEFORE_ALL_PASS = {"t::mul": "passed", "t::add": "passed"}
BEFORE_ONE_FAILS = {"t::mul": "failed", "t::add": "passed"}
NOW_ALL_PASS = {"t::mul": "passed", "t::add": "passed"}


def test_rule_17_6_fail_to_pass_0_of_0_holds_only_when_evidence_need_not_tell() -> None:
    """A failing test removed before begin: every test passed on the start tree too."""
    assert against_baseline(BEFORE_ALL_PASS, NOW_ALL_PASS) == (
        True, "fail-to-pass 0 of 0, pass-to-pass 2 of 2")
    held, evidence = against_baseline(BEFORE_ALL_PASS, NOW_ALL_PASS, discriminating=True)
    assert not held
    assert evidence.startswith("fail-to-pass 0 of 0, pass-to-pass 2 of 2; "
                               "claim_not_discriminating: no test failed on the contract-start "
                               "tree")
    assert "abstain" in evidence


def test_rule_17_6_one_test_that_failed_before_and_passes_now_is_discriminating() -> None:
    assert against_baseline(BEFORE_ONE_FAILS, NOW_ALL_PASS, discriminating=True) == (
        True, "fail-to-pass 1 of 1, pass-to-pass 1 of 1")


def test_rule_17_6_a_broken_run_is_named_as_broken_first() -> None:
    """Rule 14.7 still names what does not pass now; discrimination is judged on a run that
    holds against its baseline."""
    held, evidence = against_baseline(BEFORE_ALL_PASS, {"t::mul": "skipped", "t::add": "passed"},
                                      discriminating=True)
    assert not held and "t::mul (skipped)" in evidence
    assert "claim_not_discriminating" not in evidence


class _ReportEvidence(LogEvidence):
    """The log, and the per-test outcomes kept beside each report run."""

    def __init__(self, events: list[dict[str, Any]], outcomes: Mapping[str, Mapping[str, str]]):
        super().__init__(events)
        self._outcomes = outcomes

    def test_outcomes(self, verification_id: str) -> Mapping[str, str] | None:
        return self._outcomes.get(verification_id)


def _report_run(seq: int, *, baseline: bool) -> dict[str, Any]:
    event = verification(seq)
    event["data"]["report"] = {"format": "junit", "tests": 2, "passed": 2, "failed": 0,
                               "errors": 0, "skipped": 0, "receipt": RECEIPT}
    if baseline:
        event["data"]["baseline"] = True
    return event


def _judged(events: list[dict[str, Any]], *, require_discriminating: bool,
            before: Mapping[str, str] = BEFORE_ALL_PASS) -> dict[str, Any]:
    evidence = _ReportEvidence(events, {"v11": before, "v12": NOW_ALL_PASS})
    return dict(evaluate_check(
        CODE_CHECK, after_seq=START, evidence=evidence,
        workspace=Workspace("/nonexistent-workspace", ""), tree=TREE,
        current_profile_receipts={"tests": RECEIPT}, max_file_bytes=4096,
        require_discriminating=require_discriminating))


def test_rule_17_6_a_trusted_run_whose_baseline_passed_fails_claim_not_discriminating() -> None:
    events = [_report_run(11, baseline=True), _report_run(12, baseline=False)]
    assert _judged(events, require_discriminating=False)["passed"]
    refused = _judged(events, require_discriminating=True)
    assert not refused["passed"]
    assert "fail-to-pass 0 of 0" in refused["evidence"]
    assert "claim_not_discriminating" in refused["evidence"]
    assert _judged(events, require_discriminating=True, before=BEFORE_ONE_FAILS)["passed"]


def test_rule_17_6_while_the_baseline_runs_the_check_waits_as_before() -> None:
    waiting = _judged([_report_run(12, baseline=False)], require_discriminating=True)
    assert not waiting["passed"] and "still running" in waiting["evidence"]
    assert "claim_not_discriminating" not in waiting["evidence"]


def test_rule_17_6_the_assessment_warns_that_a_test_run_must_fail_on_the_start_tree() -> None:
    """Before its baseline run a trusted run's baseline is unknown: a warning, never a refusal
    (rules §14.5), which says what the project's setting will ask of the run."""
    claims = [_claim("done", "unit")]
    checks = [CHECKS[5]]
    for required, said in ((False, False), (True, True)):
        assessment = assess("Fix mul", claims, checks, baselines={"unit": "unknown"},
                            require_discriminating=required)
        [finding] = [f for f in assessment["findings"] if f["code"] == "claim_not_discriminating"]
        assert finding["severity"] == "warning" and assessment["status"] == "ready"
        assert ("a test run none of whose tests failed there does not count"
                in finding["message"]) is said


def test_rule_14_5_the_injected_code_claim_is_not_warned_about_beside_the_agents_own() -> None:
    """The governor's own claim that every required profile passes is a regression guard: it
    passes before the work by design. Beside a critical claim of the agent's it is no warning
    (issue 40); alone, it is the contract's only critical claim and still warned about."""
    required = inject_code_profiles(
        validate_proposal({"objective": "Fix mul", "claims": [], "checks": []},
                          max_checks=20, max_attempts_cap=3, allow_empty_checks=True,
                          allow_empty_claims=True),
        ["unit-tests"])
    baselines = {"code-profile-unit-tests": "unknown", "notes": "fails"}
    agents = _claim("fixed", "notes")
    with_own = assess("Fix mul", [*required.claims, agents], [*required.checks, CHECKS[0]],
                      baselines=baselines)
    assert [f for f in with_own["findings"] if f.get("claimId") == REQUIRED_CODE_CLAIM_ID] == []
    alone = assess("Fix mul", required.claims, required.checks, baselines=baselines)
    assert [f["code"] for f in alone["findings"] if f.get("claimId") == REQUIRED_CODE_CLAIM_ID
            ] == ["claim_not_discriminating"]
    refused = assess("Fix mul", [*required.claims, agents], [*required.checks, CHECKS[0]],
                     baselines={**baselines, "code-profile-unit-tests": "passes"},
                     require_discriminating=True)
    assert refused["status"] == "not-ready"  # an error is never left out


def _claim(claim_id: str, *check_ids: str, importance: str = "critical") -> Claim:
    return {"id": claim_id, "statement": claim_id, "importance": importance,
            "verification": "deterministic", "checkIds": list(check_ids),
            "minimumIndependentSources": 1}


CHECKS: list[Check] = [
    {"id": "notes", "kind": "file_contains", "path": "./NOTES.md", "text": "fixed"},
    {"id": "test-file", "kind": "file_contains", "path": "tests/test_calc.py", "text": "mul"},
    {"id": "ran", "kind": "tool_succeeded", "tool": "run_tests", "minCount": 1},
    {"id": "no-push", "kind": "tool_not_called", "tool": "git_push"},
    {"id": "no-errors", "kind": "no_tool_errors"},
    {"id": "unit", "kind": "code_verification_succeeded", "profile": "unit-tests",
     "minCount": 1},
    {"id": "scope", "kind": "changes_within", "paths": ["calc.py"]},
]
PROTECTED = ["tests/**", "**/conftest.py"]


@pytest.mark.parametrize("check_id", ["notes", "ran", "no-push", "no-errors"])
def test_rule_17_7_a_critical_claim_on_one_piece_of_agent_authored_evidence_is_refused(
        check_id: str) -> None:
    [refusal] = unattended_refusals([_claim("done", check_id)], CHECKS, PROTECTED)
    assert refusal["path"] == "claims/0"
    assert refusal["message"].startswith("critical claim 'done' rests on evidence the agent "
                                         "can author (")
    kind = next(check["kind"] for check in CHECKS if check["id"] == check_id)
    assert kind in refusal["message"]


def test_rule_17_7_every_refused_claim_is_named_at_its_index_with_each_reason() -> None:
    claims = [_claim("ok", "unit"), _claim("bad", "notes", "ran"), _claim("worse", "no-errors")]
    refusals = unattended_refusals(claims, CHECKS, PROTECTED)
    assert [refusal["path"] for refusal in refusals] == ["claims/1", "claims/2"]
    assert ("(file_contains on NOTES.md, which is not protected; tool_succeeded, which reads "
            "the agent's own tool calls) with no trusted run beside it") in refusals[0]["message"]


@pytest.mark.parametrize("padding", ["scope", "test-file"])
def test_rule_17_7_a_scope_check_or_a_protected_path_beside_the_agents_evidence_is_no_padding(
        padding: str) -> None:
    """Neither can change with the work (the agent widens the scope; the protected path may
    not change), so the agent's own check would still be what shows the claim done: the
    claim is refused as if it stood alone. Found by review: `file_contains NOTES.md` with
    `changes_within ["**"]` was accepted and certified once the agent wrote NOTES.md."""
    [refusal] = unattended_refusals([_claim("padded", "notes", padding)], CHECKS, PROTECTED)
    assert refusal["path"] == "claims/0" and "file_contains on NOTES.md" in refusal["message"]


def test_rule_17_7_operator_evidence_and_claims_that_are_not_critical_are_accepted() -> None:
    claims = [_claim("trusted", "unit"), _claim("mixed", "notes", "ran", "unit"),
              _claim("protected", "test-file"), _claim("scope", "scope"),
              _claim("minor", "notes", "ran", importance="important"), _claim("empty")]
    assert unattended_refusals(claims, CHECKS, PROTECTED) == []


def test_rule_17_7_a_file_is_protected_by_the_patterns_matched_as_the_exclusions_are() -> None:
    """`./NOTES.md` is NOTES.md; a directory pattern protects what is under it."""
    claims = [_claim("notes", "notes"), _claim("test-file", "test-file")]
    assert [r["path"] for r in unattended_refusals(claims, CHECKS, [])] == [
        "claims/0", "claims/1"]
    assert unattended_refusals(claims, CHECKS, ["NOTES.md", "tests"]) == []

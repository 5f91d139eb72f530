"""rules §14 rule by rule, on plain data: changes, scope checks, protected paths, baselines in
the assessment, trusted test reports and the fail-to-pass / pass-to-pass rule."""

from __future__ import annotations

import time
from typing import Any

import pytest

from governor.domain import coverage
from governor.domain.changes import (
    PROTECTED_CHECK_ID,
    PROTECTED_CLAIM_ID,
    WorkspaceChange,
    changes_digest,
    scope_result,
    workspace_changes,
)
from governor.domain.contracts import ContractError, inject_protected_paths, validate_proposal
from governor.domain.reports import (
    MAX_REPORT_BYTES,
    ReportError,
    against_baseline,
    parse_reports,
)

BLOB_A, BLOB_B = "a" * 64, "b" * 64


def test_rule_14_1_changes_are_added_deleted_modified_or_mode_changed_in_path_order() -> None:
    start = [["a.txt", "100644", BLOB_A], ["b.sh", "100644", BLOB_A], ["c", "100644", BLOB_A],
             ["link", "120000", BLOB_A], ["same", "100644", BLOB_A]]
    now = [["a.txt", "100644", BLOB_B], ["b.sh", "100755", BLOB_A], ["d", "100644", BLOB_A],
           ["link", "100644", BLOB_A], ["same", "100644", BLOB_A]]
    assert workspace_changes(start, now) == [
        WorkspaceChange("a.txt", "modified"), WorkspaceChange("b.sh", "mode-changed"),
        WorkspaceChange("c", "deleted"), WorkspaceChange("d", "added"),
        WorkspaceChange("link", "mode-changed")]


def test_rule_14_1_a_rename_is_a_delete_and_an_add_and_the_digest_binds_the_list() -> None:
    changes = workspace_changes([["old.py", "100644", BLOB_A]], [["new.py", "100644", BLOB_A]])
    assert changes == [WorkspaceChange("new.py", "added"), WorkspaceChange("old.py", "deleted")]
    assert changes_digest(changes) != changes_digest(changes[:1])
    assert changes_digest(changes).startswith("sha256:")


def test_rule_14_2_changes_within_names_the_paths_outside_its_patterns() -> None:
    changes = [WorkspaceChange("src/app.py", "modified"), WorkspaceChange("notes.md", "deleted")]
    check = {"id": "scope", "kind": "changes_within", "paths": ["src/**"]}
    passed, evidence = scope_result(check, changes)
    assert not passed and "notes.md (deleted)" in evidence and "src/app.py" not in evidence
    assert scope_result(check, changes[:1])[0]


def test_rule_14_2_unchanged_matches_directories_as_the_exclusions_do() -> None:
    check = {"id": "tests", "kind": "unchanged", "paths": ["tests", "**/conftest.py"]}
    assert not scope_result(check, [WorkspaceChange("tests/unit/test_a.py", "added")])[0]
    assert not scope_result(check, [WorkspaceChange("pkg/conftest.py", "added")])[0]
    assert scope_result(check, [WorkspaceChange("tests_old.py", "added")])[0]


def test_rule_14_2_evidence_names_the_first_20_offending_paths_and_how_many_more() -> None:
    changes = [WorkspaceChange(f"f{index:02}", "added") for index in range(25)]
    _, evidence = scope_result({"id": "s", "kind": "changes_within", "paths": ["x"]}, changes)
    assert "f19 (added)" in evidence and "f20" not in evidence and "and 5 more" in evidence


def test_rule_14_2_pattern_lists_are_refused_naming_the_item() -> None:
    body = {"objective": "o", "claims": [], "checks": [
        {"id": "s", "kind": "unchanged", "paths": ["ok/**", "/abs", "x" * 1025]}]}
    with pytest.raises(ContractError) as refused:
        validate_proposal(body, max_checks=5, max_attempts_cap=3, allow_empty_claims=True)
    assert {error["path"] for error in refused.value.errors} == {"checks/0/paths/1",
                                                                 "checks/0/paths/2"}
    with pytest.raises(ContractError):
        validate_proposal({"objective": "o", "claims": [], "checks": [
            {"id": "s", "kind": "unchanged", "paths": []}]}, max_checks=5, max_attempts_cap=3,
            allow_empty_claims=True)


def _proposal(**extra: Any) -> Any:
    return validate_proposal({"objective": "o", "claims": [
        {"id": "c", "statement": "s", "importance": "critical", "verification": "deterministic",
         "check_ids": ["f"]}], "checks": [{"id": "f", "kind": "file_exists", "path": "a"}],
        **extra}, max_checks=5, max_attempts_cap=3)


def test_rule_14_3_protected_paths_are_injected_as_a_critical_check_the_agent_cannot_shadow(
) -> None:
    proposal = inject_protected_paths(_proposal(), ["tests/**", "pytest.ini"])
    assert proposal.checks[0] == {"id": PROTECTED_CHECK_ID, "kind": "unchanged",
                                  "paths": ["pytest.ini", "tests/**"]}
    assert proposal.claims[0]["id"] == PROTECTED_CLAIM_ID
    assert proposal.claims[0]["importance"] == "critical"
    shadow = validate_proposal({"objective": "o", "claims": [], "checks": [
        {"id": PROTECTED_CHECK_ID, "kind": "file_exists", "path": "a"}]}, max_checks=5,
        max_attempts_cap=3, allow_empty_claims=True)
    with pytest.raises(ContractError):
        inject_protected_paths(shadow, ["tests/**"])
    assert inject_protected_paths(_proposal(), []) == _proposal()


def test_rule_14_4_protected_changes_open_only_what_they_name() -> None:
    proposal = inject_protected_paths(_proposal(protected_changes=["tests/test_new.py"]),
                                      ["tests/**"])
    check = proposal.checks[0]
    assert check["allowed"] == ["tests/test_new.py"]
    assert scope_result(check, [WorkspaceChange("tests/test_new.py", "added")])[0]
    assert not scope_result(check, [WorkspaceChange("tests/test_old.py", "modified")])[0]
    with pytest.raises(ContractError):  # nothing protected: nothing to open
        inject_protected_paths(_proposal(protected_changes=["tests/**"]), [])


def test_rule_14_5_a_critical_claim_without_a_failing_baseline_is_not_discriminating() -> None:
    claims = [{"id": "c", "statement": "s", "importance": "critical",
               "verification": "deterministic", "checkIds": ["f"],
               "minimumIndependentSources": 1}]
    checks = [{"id": "f", "kind": "file_exists", "path": "a"}]
    warned = coverage.assess("o", claims, checks, baselines={"f": "passes"})
    [finding] = [f for f in warned["findings"] if f["code"] == "claim_not_discriminating"]
    assert finding["severity"] == "warning" and warned["status"] == "ready"
    assert warned["baselines"] == {"f": "passes"}
    refused = coverage.assess("o", claims, checks, baselines={"f": "passes"},
                              require_discriminating=True)
    assert refused["status"] == "not-ready"
    # A trusted run's baseline is known only once its baseline run has run: warned, not refused.
    pending = coverage.assess("o", claims, checks, baselines={"f": "unknown"},
                              require_discriminating=True)
    assert pending["status"] == "ready"
    assert [f["severity"] for f in pending["findings"]
            if f["code"] == "claim_not_discriminating"] == ["warning"]
    fine = coverage.assess("o", claims, checks, baselines={"f": "fails"},
                           require_discriminating=True)
    assert fine["status"] == "ready"
    assert warned["receipt"] != coverage.assess("o", claims, checks,
                                                baselines={"f": "fails"})["receipt"]


def test_rule_14_2_scope_checks_are_one_source_and_a_constraint_not_an_outcome() -> None:
    claims = [{"id": "c", "statement": "s", "importance": "important",
               "verification": "deterministic", "checkIds": ["s1", "s2"],
               "minimumIndependentSources": 1}]
    checks = [{"id": "s1", "kind": "unchanged", "paths": ["a"]},
              {"id": "s2", "kind": "changes_within", "paths": ["b/**"]}]
    assessment = coverage.assess("o", claims, checks)
    assert set(assessment["evidenceSources"].values()) == {"workspace-changes"}
    assert [f["code"] for f in assessment["findings"]].count("constraint_not_outcome") == 1


JUNIT = b"""<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.test_calc" name="test_mul"><failure message="boom"/></testcase>
<testcase classname="tests.test_calc" name="test_add"/>
<testcase classname="tests.test_calc" name="test_div"><error message="e"/></testcase>
<testcase classname="tests.test_calc" name="test_later"><skipped/></testcase>
</testsuite></testsuites>"""


def test_rule_14_6_a_junit_report_gives_every_tests_outcome_and_the_counts() -> None:
    report = parse_reports([("junit.xml", JUNIT)])
    assert report.outcomes == {"tests.test_calc::test_mul": "failed",
                               "tests.test_calc::test_add": "passed",
                               "tests.test_calc::test_div": "error",
                               "tests.test_calc::test_later": "skipped"}
    record = report.record()
    assert {key: record[key] for key in ("tests", "passed", "failed", "errors", "skipped")} == {
        "tests": 4, "passed": 1, "failed": 1, "errors": 1, "skipped": 1}
    assert record["receipt"].startswith("sha256:")
    assert "tests.test_calc::test_mul" in (report.problem() or "")


def test_rule_14_6_a_report_with_no_pass_does_not_pass() -> None:
    skipped = parse_reports([("r.xml", b"<testsuite><testcase classname='a' name='b'>"
                                       b"<skipped/></testcase></testsuite>")])
    assert "no test passed" in (skipped.problem() or "")


@pytest.mark.parametrize(("files", "kind"), [
    ([], "no-report"),
    ([("r.xml", b"not xml at all")], "bad-report"),
    ([("r.xml", b"<html><body/></html>")], "bad-report"),
    ([("r.xml", b"<?xml version='1.0'?><!DOCTYPE t [<!ENTITY a 'x'><!ENTITY b '&a;&a;&a;'>"
                b"<!ENTITY c '&b;&b;&b;'>]><testsuite><testcase classname='&c;' name='n'/>"
                b"</testsuite>")], "bad-report"),
    ([("r.xml", b"<?xml version='1.0'?><!DOCTYPE t [<!ENTITY x SYSTEM 'file:///etc/shadow'>]>"
                b"<testsuite><testcase classname='&x;' name='n'/></testsuite>")], "bad-report"),
])
def test_rule_14_6_missing_malformed_and_hostile_reports_are_named_failures(
        files: list[tuple[str, bytes]], kind: str) -> None:
    with pytest.raises(ReportError) as refused:
        parse_reports(files)
    assert refused.value.kind == kind


def test_rule_14_6_a_billion_laughs_is_refused_at_once() -> None:
    entities = "".join(f"<!ENTITY l{i} '{f'&l{i - 1};' * 10 if i else 'lol'}'>"
                       for i in range(10))
    bomb = (f"<?xml version='1.0'?><!DOCTYPE lolz [{entities}]>"
            "<testsuite><testcase classname='&l9;' name='n'/></testsuite>").encode()
    started = time.process_time()
    with pytest.raises(ReportError):
        parse_reports([("bomb.xml", bomb)])
    assert time.process_time() - started < 1.0


def test_rule_14_6_a_report_over_the_cap_is_refused_before_it_is_parsed() -> None:
    huge = b"<testsuite>" + b" " * MAX_REPORT_BYTES + b"</testsuite>"
    with pytest.raises(ReportError) as refused:
        parse_reports([("big.xml", huge)])
    assert refused.value.kind == "bad-report" and "at most" in str(refused.value)


def test_rule_14_7_fail_to_pass_and_pass_to_pass_against_the_baseline() -> None:
    baseline = {"t::mul": "failed", "t::add": "passed", "t::div": "error", "t::later": "skipped"}
    fixed = {"t::mul": "passed", "t::add": "passed", "t::div": "passed", "t::later": "skipped"}
    assert against_baseline(baseline, fixed) == (
        True, "fail-to-pass 2 of 2, pass-to-pass 1 of 1")
    skipped = {**fixed, "t::mul": "skipped"}
    held, evidence = against_baseline(baseline, skipped)
    assert not held and "fail-to-pass 1 of 2" in evidence and "t::mul (skipped)" in evidence
    gone = {test: outcome for test, outcome in fixed.items() if test != "t::add"}
    held, evidence = against_baseline(baseline, gone)
    assert not held and "pass-to-pass 0 of 1" in evidence and "t::add (missing)" in evidence

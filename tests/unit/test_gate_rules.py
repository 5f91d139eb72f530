"""rules §19.1 and §19.2 as pure functions (governor/domain/gate.py): the policy file's keys,
refusals named by line and key, a base's file that can only tighten the project's settings, and
the verdict over changes, protected paths, tamper findings and runs."""

from __future__ import annotations

import pytest

from governor.domain.changes import WorkspaceChange
from governor.domain.gate import (
    POLICY_FILE,
    PolicyError,
    RunOutcome,
    gate_policy,
    judge_change,
    policy_file_parse,
)


def test_rule_19_1_the_policy_files_keys_are_the_project_settings_names() -> None:
    parsed = policy_file_parse(b'required_profiles = ["pytest", "pytest"]\n'
                               b'protected_paths = ["tests/**"]\n'
                               b'changes_within = ["src/**"]\n'
                               b"tamper_scan = true\nrequire_discriminating_evidence = true\n")
    assert parsed == {"required_profiles": ["pytest"], "protected_paths": ["tests/**"],
                      "changes_within": ["src/**"], "tamper_scan": True,
                      "require_discriminating_evidence": True}


@pytest.mark.parametrize(("text", "where", "message"), [
    (b'protected_paths = ["a"]\nrequire_profiles = ["x"]\n',
     f"{POLICY_FILE}:2 require_profiles", "unknown key"),
    (b"tamper_scan = 1\n", f"{POLICY_FILE}:1 tamper_scan", "must be true or false"),
    (b'required_profiles = ["Not An Id"]\n', f"{POLICY_FILE}:1 required_profiles",
     "is not a profile id"),
    (b"protected_paths = [1]\n", f"{POLICY_FILE}:1 protected_paths", "list of strings"),
    (b"tamper_scan = maybe\n", POLICY_FILE, "(at line 1, column 15)"),
])
def test_rule_19_1_a_refused_policy_file_names_the_line_and_the_key(
        text: bytes, where: str, message: str) -> None:
    with pytest.raises(PolicyError) as refused:
        policy_file_parse(text)
    [error] = refused.value.errors
    assert error["path"] == where and message in error["message"], error


def test_rule_19_1_the_bases_file_tightens_the_project_settings_and_never_loosens_them() -> None:
    policy = gate_policy(project_required=["lint"], project_protected=["ci/**"],
                         project_discriminating=True,
                         file={"required_profiles": ["pytest"], "protected_paths": ["tests/**"],
                               "require_discriminating_evidence": False})
    assert policy.required_profiles == ("lint", "pytest")
    assert policy.protected_paths == ("ci/**", "tests/**")
    assert policy.require_discriminating_evidence is True and policy.tamper_scan is True
    assert gate_policy(project_required=[], project_protected=[], project_discriminating=False,
                       file=None).from_file is False


def _judge(**overrides: object) -> object:
    policy = gate_policy(project_required=["pytest"], project_protected=[],
                         project_discriminating=False, file=None)
    arguments: dict[str, object] = {
        "policy": policy, "changes": [WorkspaceChange("calc.py", "modified")], "protected": [],
        "sections": [], "tamper": [], "tamper_more": 0,
        "base_runs": {"pytest": RunOutcome("pytest", False, "exit", {"t::a": "failed"})},
        "head_runs": {"pytest": RunOutcome("pytest", True, None, {"t::a": "passed"}, "r")},
        "report_profiles": ["pytest"]}
    arguments.update(overrides)
    return judge_change(**arguments)  # type: ignore[arg-type]


def test_rule_19_2_an_honest_change_is_certified_with_what_proved_each_rule() -> None:
    verdict = _judge()
    assert verdict.certified and verdict.findings == []  # type: ignore[attr-defined]
    rules = [proof["rule"] for proof in verdict.proofs]  # type: ignore[attr-defined]
    assert rules == ["protected-paths", "tamper-free", "profile-passed", "fail-to-pass"]


def test_rule_19_2_each_broken_rule_is_a_finding_worded_as_a_repair() -> None:
    verdict = _judge(
        protected=[WorkspaceChange(POLICY_FILE, "modified"),
                   WorkspaceChange("tests/t.py", "deleted")],
        tamper=[{"path": "calc.py", "line": 3, "rule": "tamper/exit", "reason": "exits"}],
        head_runs={"pytest": RunOutcome("pytest", True, None, {}, "r")})
    found = {f["rule"]: f["message"] for f in verdict.findings}  # type: ignore[attr-defined]
    assert set(found) == {"gate-policy", "protected-paths", "tamper-free", "fail-to-pass"}
    assert "Restore the file as the base has it" in found["gate-policy"]
    assert "tests/t.py (deleted)" in found["protected-paths"]
    assert "calc.py:3 tamper/exit" in found["tamper-free"]
    assert "t::a (missing)" in found["fail-to-pass"]
    assert not verdict.certified  # type: ignore[attr-defined]

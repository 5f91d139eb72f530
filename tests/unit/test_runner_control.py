"""rules §17.3 on plain data: the built-in runner-control list, the comparison of protected
file sections by content, the exemptions an operator may make, how the list joins a contract's
protected check, and the environment a report profile runs in."""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

from governor.domain.changes import WorkspaceChange, scope_result
from governor.domain.contracts import inject_protected_paths, validate_proposal
from governor.domain.fields import FieldsInvalid
from governor.domain.profiles import ProfileError, profile_definition, validate_profile
from governor.domain.runner_control import (
    ENTRIES,
    ENTRIES_BY_NAME,
    changed_sections,
    in_force,
    sections_at,
    validate_exemptions,
)
from governor.domain.tree import PathMatcher, validate_exclusions
from verification.sandbox import sandbox_env

PYTEST_TABLE = "**/pyproject.toml [tool.pytest.ini_options]"
PYTEST_NATIVE = "**/pyproject.toml [tool.pytest]"
SCRIPTS = "**/package.json scripts"
PYPROJECT = textwrap.dedent("""\
    [project]
    name = "calc"
    dependencies = []

    [tool.pytest.ini_options]
    pythonpath = ["."]
    """)
PACKAGE = {"name": "web", "scripts": {"test": "vitest run"}, "dependencies": {},
           "vitest": {"environment": "node"}}


def package(**changes: Any) -> bytes:
    return json.dumps({**PACKAGE, **changes}, indent=2).encode()


def protected(paths: list[str]) -> PathMatcher:
    return PathMatcher(paths)


# --- the list -----------------------------------------------------------------------------------


def test_rule_17_3_the_built_in_list_names_each_entry_once_with_a_reason_and_a_valid_pattern(
) -> None:
    assert len(ENTRIES_BY_NAME) == len(ENTRIES)
    for entry in ENTRIES:
        assert entry.reason.strip() and entry.ecosystem in ("python", "node"), entry
        validate_exclusions([entry.pattern])
        assert (entry.section is None) == (entry.syntax is None) == (not entry.keys), entry


def test_rule_17_3_the_python_files_are_protected_at_any_depth() -> None:
    paths = protected(in_force([]).paths)
    for path in ("conftest.py", "src/pkg/tests/conftest.py", "pytest.ini", ".pytest.ini",
                 "sub/.pytest.ini", "setup.cfg", "tox.ini", "sitecustomize.py",
                 "lib/usercustomize.py", "evil.pth", "site/x.pth",
                 "forcepass-1.0.dist-info/entry_points.txt", "deep/a.dist-info/METADATA",
                 "pkg.egg-info/entry_points.txt", "jest.config.js", "web/vitest.config.ts",
                 ".mocharc.yml", "web/.mocharc.json", "pytest.py", "pytest/__main__.py",
                 "_pytest/main.py"):
        assert paths.matches(path), path
    for path in ("calc.py", "pyproject.toml", "package.json", "tests/test_calc.py",
                 "conftest.py.bak", "docs/setup.cfg.md", "pth.txt", "pytest_plugin.py",
                 "tests/test_pytest.py"):
        assert not paths.matches(path), path


def test_rule_17_3_pyproject_and_package_json_are_protected_by_their_sections_only() -> None:
    sections = in_force([]).sections
    assert set(sections) == {PYTEST_TABLE, PYTEST_NATIVE, SCRIPTS, *(
        f"**/package.json {key}" for key in ("jest", "mocha", "vitest", "ava", "c8", "nyc"))}
    assert sections_at("pyproject.toml") == [PYTEST_TABLE, PYTEST_NATIVE]
    assert sections_at("services/api/package.json")[0] == SCRIPTS
    assert sections_at("calc.py") == [] and sections_at("pyproject.toml.orig") == []


# --- sections by content ------------------------------------------------------------------------


def test_rule_17_3_a_dependency_added_to_pyproject_is_not_a_protected_change() -> None:
    after = PYPROJECT.replace("dependencies = []", 'dependencies = ["attrs>=23"]')
    assert changed_sections("pyproject.toml", PYPROJECT.encode(), after.encode()) == []
    reordered = '[tool.pytest.ini_options]\npythonpath = ["."]\n\n[project]\nname = "calc"\n'
    assert changed_sections("pyproject.toml", PYPROJECT.encode(), reordered.encode()) == []


def test_rule_17_3_an_edited_pytest_table_is_a_protected_change() -> None:
    addopts = PYPROJECT.replace('pythonpath = ["."]', 'pythonpath = ["."]\naddopts = "-x"')
    assert changed_sections("pyproject.toml", PYPROJECT.encode(), addopts.encode()) == [
        PYTEST_TABLE]
    native = PYPROJECT + '\n[tool.pytest]\naddopts = ["-p", "forcepass"]\n'
    assert changed_sections("pyproject.toml", PYPROJECT.encode(), native.encode()) == [
        PYTEST_NATIVE]
    # Deleting the file deletes the table; adding one with a table adds it.
    assert changed_sections("sub/pyproject.toml", PYPROJECT.encode(), None) == [PYTEST_TABLE]
    assert changed_sections("pyproject.toml", None, addopts.encode()) == [PYTEST_TABLE]
    assert changed_sections("pyproject.toml", None, b'[project]\nname = "x"\n') == []


def test_rule_17_3_a_file_that_cannot_be_parsed_counts_as_changed_in_its_sections() -> None:
    for broken in (b"[tool.pytest.ini_options\n", b"\xff\xfe", b"a = 1\na = 2\n"):
        assert changed_sections("pyproject.toml", PYPROJECT.encode(), broken) == [
            PYTEST_TABLE, PYTEST_NATIVE]
    assert SCRIPTS in changed_sections("package.json", package(), b"[1, 2]")
    assert SCRIPTS in changed_sections("package.json", None, b"{not json")


def test_rule_17_3_package_json_scripts_edited_is_refused_and_a_dependency_added_is_not() -> None:
    before = package()
    assert changed_sections("package.json", before,
                            package(dependencies={"left-pad": "^1.3.0"})) == []
    assert changed_sections("package.json", before,
                            package(scripts={"test": "exit 0"})) == [SCRIPTS]
    assert changed_sections("package.json", before, package(vitest={"include": []})) == [
        "**/package.json vitest"]
    assert changed_sections("package.json", before, package(jest={"bail": True})) == [
        "**/package.json jest"]
    # true is not 1, as a runner may treat them differently
    assert changed_sections("package.json", package(nyc={"all": True}),
                            package(nyc={"all": 1})) == ["**/package.json nyc"]
    # Through the injected check, as an attempt is judged: the section is named.
    check = inject_protected_paths(code_proposal(), ["tests/**"],
                                   runner_control=in_force([])).checks[0]
    passed, evidence = scope_result(check, [WorkspaceChange(
        "package.json", "modified", sections=(SCRIPTS,))])
    assert not passed and "package.json scripts (modified)" in evidence
    assert scope_result(check, [WorkspaceChange("package.json", "modified")])[0]


def test_rule_17_3_a_person_opening_the_file_opens_its_sections() -> None:
    check = inject_protected_paths(code_proposal(protected_changes=["pyproject.toml"]), [],
                                   runner_control=in_force([])).checks[0]
    assert scope_result(check, [WorkspaceChange("pyproject.toml", "modified",
                                                sections=(PYTEST_TABLE,))])[0]
    assert not scope_result(check, [WorkspaceChange("sub/pyproject.toml", "modified",
                                                    sections=(PYTEST_TABLE,))])[0]


# --- the contract ---------------------------------------------------------------------------------


def code_proposal(**extra: Any) -> Any:
    return validate_proposal({"objective": "o", "claims": [
        {"id": "c", "statement": "s", "importance": "critical", "verification": "deterministic",
         "check_ids": ["run"]}], "checks": [
        {"id": "run", "kind": "code_verification_succeeded", "profile": "unit-tests"}],
        **extra}, max_checks=5, max_attempts_cap=3)


def test_rule_17_3_the_list_joins_a_contract_that_names_a_profile_and_only_such_a_contract(
) -> None:
    check = inject_protected_paths(code_proposal(), ["tests/**"],
                                   runner_control=in_force([])).checks[0]
    assert set(check["paths"]) == {"tests/**", *in_force([]).paths}
    assert check["sections"] == in_force([]).sections
    assert "exempt" not in check
    general = validate_proposal({"objective": "o", "claims": [
        {"id": "c", "statement": "s", "importance": "critical", "verification": "deterministic",
         "check_ids": ["f"]}], "checks": [{"id": "f", "kind": "file_exists", "path": "a"}]},
        max_checks=5, max_attempts_cap=3)
    assert inject_protected_paths(general, [], runner_control=in_force([])) == general
    assert inject_protected_paths(general, ["tests/**"], runner_control=in_force([])
                                  ).checks[0] == {"id": "protected-paths", "kind": "unchanged",
                                                  "paths": ["tests/**"]}


def test_rule_17_3_an_exempted_entry_leaves_the_check_which_carries_the_reason() -> None:
    exempt = validate_exemptions([
        {"entry": "**/setup.cfg", "reason": "  only flake8 settings  "},
        {"entry": SCRIPTS, "reason": "the build scripts change often"}])
    assert exempt[0]["reason"] == "only flake8 settings"
    check = inject_protected_paths(code_proposal(), [], runner_control=in_force(exempt)
                                   ).checks[0]
    assert "**/setup.cfg" not in check["paths"] and "**/tox.ini" in check["paths"]
    assert SCRIPTS not in check["sections"] and PYTEST_TABLE in check["sections"]
    assert check["exempt"] == exempt


def test_rule_17_3_an_exemption_names_a_built_in_entry_once_and_says_why() -> None:
    with pytest.raises(FieldsInvalid) as refused:
        validate_exemptions([
            {"entry": "setup.cfg", "reason": "not the entry's name"},
            {"entry": "**/tox.ini", "reason": "   "},
            {"entry": "**/tox.ini", "reason": "twice"},
            {"entry": "**/pytest.ini"},
            {"entry": "**/*.pth", "reason": "r", "until": "never"},
            "**/conftest.py"])
    assert {error["path"] for error in refused.value.errors} == {
        "runner_control_exempt/0/entry", "runner_control_exempt/1/reason",
        "runner_control_exempt/2/entry", "runner_control_exempt/3/reason",
        "runner_control_exempt/4/until", "runner_control_exempt/5"}
    with pytest.raises(FieldsInvalid):
        validate_exemptions({"entry": "**/tox.ini", "reason": "r"})
    assert validate_exemptions([]) == []


# --- the run's environment ----------------------------------------------------------------------


def definition(**overrides: Any) -> dict[str, Any]:
    raw = {"id": "unit-tests", "description": "Runs the unit tests.", "argv": ["pytest", "-q"]}
    return dict(profile_definition(validate_profile({**raw, **overrides})))


def test_rule_17_3_a_report_profile_runs_with_pytest_plugin_autoload_off() -> None:
    assert sandbox_env(definition(report="junit"))["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1"
    assert "PYTEST_DISABLE_PLUGIN_AUTOLOAD" not in sandbox_env(definition())
    allowed = definition(report="junit", plugin_autoload=True)
    assert allowed["pluginAutoload"] is True
    assert "PYTEST_DISABLE_PLUGIN_AUTOLOAD" not in sandbox_env(allowed)


def test_rule_17_3_plugin_autoload_is_in_the_receipt_only_when_set_and_needs_a_report() -> None:
    assert "pluginAutoload" not in definition(report="junit")
    assert definition(report="junit", plugin_autoload=False) == definition(report="junit")
    for raw in ({"plugin_autoload": True}, {"plugin_autoload": True, "report": None}):
        with pytest.raises(ProfileError) as refused:
            definition(**raw)
        assert [error["path"] for error in refused.value.errors] == ["plugin_autoload"]
    with pytest.raises(ProfileError):
        definition(report="junit", plugin_autoload="yes")

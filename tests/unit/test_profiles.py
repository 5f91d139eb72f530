"""rules §8 "Profile": what an operator may configure as a trusted verifier command."""

from __future__ import annotations

from typing import Any

import pytest

from governor.domain.canonical import receipt
from governor.domain.profiles import (
    LIMITS,
    ProfileError,
    operator_environment,
    profile_definition,
    profile_receipt,
    validate_profile,
    workspace_environment,
)

_DROP = object()


def profile(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"id": "unit-tests", "description": "Runs the unit tests.",
                            "argv": ["pytest", "-q"]}
    base.update(overrides)
    return {key: value for key, value in base.items() if value is not _DROP}


def refusals(raw: Any) -> dict[str, str]:
    with pytest.raises(ProfileError) as caught:
        validate_profile(raw)
    return {error["path"]: error["message"] for error in caught.value.errors}


# --- defaults ---------------------------------------------------------------------------------


def test_rule_8_a_minimal_profile_gets_every_default() -> None:
    assert validate_profile(profile()) == {
        "id": "unit-tests",
        "description": "Runs the unit tests.",
        "argv": ["pytest", "-q"],
        "timeout_ms": 120_000,
        "sandbox_mode": "read-only",
        "required": True,
        "env": {},
        "limits": {"memory_bytes": 2 * 1024**3, "pids": 256, "file_bytes": 256 * 1024**2,
                   "cpu_seconds": 600, "open_files": 1024, "output_bytes": 65_536},
        "rootfs": None,
        "environment": [],
        "protected_paths": [],
        "report": None,
        "plugin_autoload": False,
        "heldout": None,
        "oracle": None,
        "show_output_to_reviewers": False,
    }


def test_rule_8_a_full_profile_is_kept_as_given() -> None:
    raw = profile(argv=["/usr/bin/make", "check"], timeout_ms=1_000,
                  sandbox_mode="workspace-write", required=False, env={"CI": "1", "LANG": ""},
                  limits={"pids": 8, "output_bytes": 1024**2}, rootfs="/srv/images/py311",
                  show_output_to_reviewers=True)
    validated = validate_profile(raw)
    assert validated["argv"] == ["/usr/bin/make", "check"]
    assert validated["timeout_ms"] == 1_000
    assert validated["sandbox_mode"] == "workspace-write"
    assert validated["required"] is False
    assert validated["env"] == {"CI": "1", "LANG": ""}
    assert validated["limits"]["pids"] == 8
    assert validated["limits"]["output_bytes"] == 1024**2
    assert validated["limits"]["memory_bytes"] == 2 * 1024**3
    assert validated["rootfs"] == "/srv/images/py311"


# --- id and description -----------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["Unit-Tests", "unit_tests", "-unit", "unit-", "unit--tests",
                                 "unit tests", "", "a" * 129, 7, None])
def test_rule_8_profile_id_must_be_kebab_case_up_to_128(bad: Any) -> None:
    assert "id" in refusals(profile(id=bad))


def test_rule_8_profile_id_of_128_characters_is_accepted() -> None:
    assert validate_profile(profile(id="a" * 128))["id"] == "a" * 128


@pytest.mark.parametrize("bad", ["", "   ", "x" * 501, ["text"]])
def test_rule_8_description_must_be_1_to_500_characters(bad: Any) -> None:
    assert "description" in refusals(profile(description=bad))


def test_rule_8_description_of_500_characters_is_accepted_and_trimmed() -> None:
    assert validate_profile(profile(description=" " + "x" * 500))["description"] == "x" * 500


# --- argv -------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["pytest", "/usr/bin/env", "/workspace/run-tests.sh"])
def test_rule_8_command_is_an_absolute_path_or_a_bare_name(command: str) -> None:
    assert validate_profile(profile(argv=[command]))["argv"] == [command]


@pytest.mark.parametrize("command", ["./run.sh", "bin/pytest", "..", ".", "/", ""])
def test_rule_8_relative_command_paths_are_refused(command: str) -> None:
    assert "argv/0" in refusals(profile(argv=[command]))


def test_rule_8_command_is_at_most_1024_characters() -> None:
    assert validate_profile(profile(argv=["/" + "a" * 1023]))
    assert "argv/0" in refusals(profile(argv=["/" + "a" * 1024]))


@pytest.mark.parametrize("bad", [[], "pytest -q", None, {"0": "pytest"}])
def test_rule_8_argv_must_be_a_non_empty_list(bad: Any) -> None:
    assert "argv" in refusals(profile(argv=bad))


def test_rule_8_at_most_50_arguments_follow_the_command() -> None:
    assert validate_profile(profile(argv=["echo", *["x"] * 50]))
    assert "argv" in refusals(profile(argv=["echo", *["x"] * 51]))


def test_rule_8_each_argument_is_1_to_4096_characters() -> None:
    assert validate_profile(profile(argv=["echo", "x" * 4096]))
    errors = refusals(profile(argv=["echo", "", "x" * 4097, 3]))
    assert set(errors) == {"argv/1", "argv/2", "argv/3"}


# --- timeout, mode, required ------------------------------------------------------------------


@pytest.mark.parametrize("good", [1_000, 900_000])
def test_rule_8_timeout_is_1_second_to_15_minutes(good: int) -> None:
    assert validate_profile(profile(timeout_ms=good))["timeout_ms"] == good


@pytest.mark.parametrize("bad", [999, 900_001, 0, 1_000.0, True, "120000"])
def test_rule_8_timeout_outside_1_second_to_15_minutes_is_refused(bad: Any) -> None:
    assert "timeout_ms" in refusals(profile(timeout_ms=bad))


@pytest.mark.parametrize("bad", ["read-write", "READ-ONLY", "", None])
def test_rule_8_sandbox_mode_is_read_only_or_workspace_write(bad: Any) -> None:
    assert "sandbox_mode" in refusals(profile(sandbox_mode=bad))


@pytest.mark.parametrize("bad", [1, "true", None])
def test_rule_8_required_is_a_boolean(bad: Any) -> None:
    assert "required" in refusals(profile(required=bad))


# --- env --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["API_KEY", "db_password", "MY_SECRET_PATH", "GITHUB_TOKEN",
                                  "SigningKey", "KEYRING", "token"])
def test_rule_8_env_names_with_secret_are_refused(name: str) -> None:
    errors = refusals(profile(env={name: "x"}))
    assert list(errors) == [f"env/{name}"]
    assert "KEY, PASSWORD, SECRET or TOKEN" in errors[f"env/{name}"]


@pytest.mark.parametrize("name", ["1ABC", "A-B", "A B", "A=B", "", "PATH\x00"])
def test_rule_8_env_names_must_be_valid_environment_names(name: str) -> None:
    assert f"env/{name}" in refusals(profile(env={name: "x"}))


@pytest.mark.parametrize("value", [1, True, None, ["x"], "x" * 4097])
def test_rule_8_env_values_are_strings(value: Any) -> None:
    assert "env/CI" in refusals(profile(env={"CI": value}))


def test_rule_8_env_holds_at_most_64_variables() -> None:
    assert validate_profile(profile(env={f"V{i}": "x" for i in range(64)}))
    assert "env" in refusals(profile(env={f"V{i}": "x" for i in range(65)}))


# --- limits -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(LIMITS))
def test_rule_8_each_limit_accepts_its_bounds_and_refuses_beyond(name: str) -> None:
    _default, low, high, _camel = LIMITS[name]
    assert validate_profile(profile(limits={name: low}))["limits"][name] == low
    assert validate_profile(profile(limits={name: high}))["limits"][name] == high
    assert f"limits/{name}" in refusals(profile(limits={name: high + 1}))
    assert f"limits/{name}" in refusals(profile(limits={name: low - 1}))
    assert f"limits/{name}" in refusals(profile(limits={name: float(low)}))


def test_rule_8_output_bytes_per_stream_default_64_kib_at_most_1_mib() -> None:
    assert validate_profile(profile())["limits"]["output_bytes"] == 65_536
    assert "limits/output_bytes" in refusals(profile(limits={"output_bytes": 1024**2 + 1}))


def test_rule_8_unknown_limits_are_refused() -> None:
    assert "limits/network" in refusals(profile(limits={"network": 0}))


# --- rootfs, NUL, unknown fields, every failure at once ---------------------------------------


@pytest.mark.parametrize("bad", ["images/py311", "/", "//", "/srv/../etc", 5, "/srv\x00x"])
def test_rule_8_rootfs_must_be_an_absolute_directory_path(bad: Any) -> None:
    assert "rootfs" in refusals(profile(rootfs=bad))


@pytest.mark.parametrize("empty", [None, ""])
def test_rule_8_rootfs_absent_or_empty_means_the_hosts_system(empty: Any) -> None:
    assert validate_profile(profile(rootfs=empty))["rootfs"] is None


@pytest.mark.parametrize("field, raw", [
    ("id", {"id": "unit\x00tests"}),
    ("description", {"description": "Runs\x00tests"}),
    ("argv/0", {"argv": ["pytest\x00"]}),
    ("argv/1", {"argv": ["pytest", "-k\x00x"]}),
    ("env/CI", {"env": {"CI": "1\x00"}}),
    ("rootfs", {"rootfs": "/srv/\x00"}),
])
def test_rule_8_no_nul_anywhere(field: str, raw: dict[str, Any]) -> None:
    assert "NUL" in refusals(profile(**raw))[field]


def test_rule_8_unknown_fields_are_refused() -> None:
    assert refusals(profile(shell=True)) == {"shell": "unknown field"}


def test_rule_8_id_description_and_argv_are_required() -> None:
    errors = refusals(profile(id=_DROP, description=_DROP, argv=_DROP))
    assert errors == {"id": "required", "description": "required", "argv": "required"}


def test_rule_8_every_failing_field_is_listed_at_once() -> None:
    errors = refusals({"id": "Bad Id", "description": "", "argv": ["./x"], "timeout_ms": 5,
                       "sandbox_mode": "rw", "required": "yes", "env": {"AWS_SECRET": "x"},
                       "limits": {"pids": 0}, "rootfs": "rel", "extra": 1})
    assert set(errors) == {"id", "description", "argv/0", "timeout_ms", "sandbox_mode",
                           "required", "env/AWS_SECRET", "limits/pids", "rootfs", "extra"}


def test_rule_8_a_profile_must_be_an_object() -> None:
    assert refusals(["pytest"]) == {"": "must be an object"}


# --- definition and receipt -------------------------------------------------------------------


def test_rule_8_definition_is_camel_case_and_holds_what_changes_behaviour() -> None:
    definition = profile_definition(validate_profile(profile(env={"CI": "1"})))
    assert definition == {
        "id": "unit-tests",
        "argv": ["pytest", "-q"],
        "timeoutMs": 120_000,
        "sandboxMode": "read-only",
        "env": {"CI": "1"},
        "limits": {"memoryBytes": 2 * 1024**3, "pids": 256, "fileBytes": 256 * 1024**2,
                   "cpuSeconds": 600, "openFiles": 1024, "outputBytes": 65_536},
        "rootfs": None,
    }


def test_rule_8_profile_receipt_is_the_code_verification_profile_receipt_of_the_definition(
) -> None:
    definition = profile_definition(validate_profile(profile()))
    assert profile_receipt(definition) == receipt("code-verification-profile", definition)


def test_rule_8_description_required_and_output_policy_do_not_change_the_receipt() -> None:
    first = profile_definition(validate_profile(profile()))
    second = profile_definition(validate_profile(profile(
        description="Other words.", required=False, show_output_to_reviewers=True)))
    assert profile_receipt(first) == profile_receipt(second)


@pytest.mark.parametrize("change", [
    {"argv": ["pytest", "-x"]}, {"timeout_ms": 60_000}, {"sandbox_mode": "workspace-write"},
    {"env": {"CI": "1"}}, {"limits": {"pids": 64}}, {"rootfs": "/srv/image"},
    {"id": "other-tests"},
])
def test_rule_8_anything_that_changes_how_it_runs_changes_the_receipt(
        change: dict[str, Any]) -> None:
    base = profile_receipt(profile_definition(validate_profile(profile())))
    assert profile_receipt(profile_definition(validate_profile(profile(**change)))) != base


def test_rule_8_explicit_defaults_give_the_same_receipt_as_omitted_ones() -> None:
    explicit = profile(timeout_ms=120_000, sandbox_mode="read-only", env={},
                       limits={"output_bytes": 65_536}, rootfs=None)
    assert profile_receipt(profile_definition(validate_profile(explicit))) == \
        profile_receipt(profile_definition(validate_profile(profile())))


@pytest.mark.parametrize("path", ["node_modules/.bin:/usr/bin", "/workspace/bin", "/usr/bin:"])
def test_rule_8_path_entries_must_be_absolute_and_outside_the_workspace(path: str) -> None:
    with pytest.raises(ProfileError) as refused:
        validate_profile({"id": "p", "description": "d", "argv": ["x"], "env": {"PATH": path}})
    assert refused.value.errors[0]["path"] == "env/PATH"


def test_environment_paths_are_directories_each_refusal_naming_its_index() -> None:
    with pytest.raises(ProfileError) as refused:
        validate_profile(profile(environment=["/abs/../x", "a/../b", ".git/x", ".venv", ".venv"]))
    paths = {error["path"] for error in refused.value.errors}
    assert paths == {"environment/0", "environment/1", "environment/2"}
    with pytest.raises(ProfileError) as overlapping:
        validate_profile(profile(environment=["web", "web/node_modules"]))
    assert [error["path"] for error in overlapping.value.errors] == ["environment/1"]


def test_a_profile_without_an_environment_keeps_the_receipt_it_always_had() -> None:
    plain = profile_definition(validate_profile(profile()))
    assert "environment" not in plain
    declared = profile_definition(validate_profile(profile(environment=["node_modules", ".venv"])))
    assert declared["environment"] == [".venv", "node_modules"]
    assert profile_receipt(declared) != profile_receipt(plain)


@pytest.mark.parametrize(("path", "why"), [
    ("/", "must be an absolute directory path"),
    ("/srv/envs/", "must be an absolute directory path"),
    ("/workspace/.venv", "must not be under /workspace, which the sandbox mounts itself"),
    ("/proc/self", "must not be under /proc"),
    ("/usr", "must not be at or above /usr"),
    ("/governor-report", "must not be at or above /governor-report"),
    ("/governor-heldout/tests", "must not be under /governor-heldout"),  # rules §18.2
])
def test_rule_17_8_an_operator_environment_directory_is_refused_where_the_sandbox_mounts_its_own(
        path: str, why: str) -> None:
    with pytest.raises(ProfileError) as refused:
        validate_profile(profile(environment=[path]))
    assert refused.value.errors[0]["path"] == "environment/0"
    assert why in refused.value.errors[0]["message"]


def test_rule_17_8_operator_and_workspace_environment_directories_are_told_apart() -> None:
    validated = validate_profile(profile(environment=[".venv", "/srv/governor/py311",
                                                      "/tmp/governor/node"]))
    assert operator_environment(validated["environment"]) == ["/srv/governor/py311",
                                                              "/tmp/governor/node"]
    assert workspace_environment(validated["environment"]) == [".venv"]

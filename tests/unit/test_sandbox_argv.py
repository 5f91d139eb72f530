"""rules §8 "Run": the bubblewrap command line a profile definition becomes."""

from __future__ import annotations

import os
from typing import Any

import pytest

from governor.domain.profiles import profile_definition, validate_profile
from verification.sandbox import bwrap_argv

WORKSPACE = "/srv/workspaces/42"


def definition(**overrides: Any) -> dict[str, Any]:
    raw = {"id": "unit-tests", "description": "Runs the unit tests.", "argv": ["pytest", "-q"]}
    return profile_definition(validate_profile({**raw, **overrides}))


def pairs(argv: list[str], flag: str) -> list[tuple[str, str]]:
    """(source, destination) of every `flag SRC DEST` before the command."""
    options = argv[:argv.index("--")]
    return [(options[i + 1], options[i + 2]) for i, item in enumerate(options) if item == flag]


def test_rule_8_argv_unshares_every_namespace_as_uid_65534_without_capabilities() -> None:
    argv = bwrap_argv(definition(), WORKSPACE)
    assert argv[:17] == [
        "/usr/bin/bwrap", "--unshare-all", "--unshare-user", "--uid", "65534", "--gid", "65534",
        "--disable-userns", "--die-with-parent", "--as-pid-1", "--new-session",
        "--hostname", "sandbox", "--cap-drop", "ALL", "--clearenv", "--setenv",
    ]
    assert "--share-net" not in argv


def test_rule_8_argv_ends_with_the_profile_command_after_a_double_dash() -> None:
    argv = bwrap_argv(definition(argv=["sh", "-c", "--bind / /x"]), WORKSPACE)
    assert argv[argv.index("--"):] == ["--", "sh", "-c", "--bind / /x"]


def test_rule_8_env_is_the_fixed_minimal_set_plus_the_profile_env(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_API_TOKEN", "hunter2")
    argv = bwrap_argv(definition(env={"CI": "1"}), WORKSPACE)
    assert argv.index("--clearenv") < argv.index("--setenv")
    assert dict(pairs(argv, "--setenv")) == {
        "CI": "1", "HOME": "/tmp", "LANG": "C.UTF-8", "PATH": "/usr/local/bin:/usr/bin:/bin",
        "TMPDIR": "/tmp", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": "/tmp/pycache",
    }
    assert not any("hunter2" in item or "SOME_API_TOKEN" in item for item in argv)


def test_rule_8_profile_env_may_replace_a_fixed_variable_once() -> None:
    argv = bwrap_argv(definition(env={"PATH": "/usr/bin"}), WORKSPACE)
    assert [value for name, value in pairs(argv, "--setenv") if name == "PATH"] == ["/usr/bin"]


def test_rule_8_system_is_the_hosts_usr_read_only_with_links_as_the_host_has_them() -> None:
    argv = bwrap_argv(definition(), WORKSPACE)
    assert ("/usr", "/usr") in pairs(argv, "--ro-bind")
    for path in ("/bin", "/sbin", "/lib", "/lib64"):
        if os.path.islink(path):
            assert (os.readlink(path), path) in pairs(argv, "--symlink")
        elif os.path.isdir(path):
            assert (path, path) in pairs(argv, "--ro-bind")
    assert pairs(argv, "--bind") == []
    assert "--dev-bind" not in argv


def test_rule_8_only_the_linker_cache_and_alternatives_of_etc_are_bound() -> None:
    argv = bwrap_argv(definition(), WORKSPACE)
    etc = {inside for _host, inside in pairs(argv, "--ro-bind") if inside.startswith("/etc")}
    assert etc <= {"/etc/alternatives", "/etc/ld.so.cache"}
    bound = {path for pair in pairs(argv, "--ro-bind") + pairs(argv, "--bind") for path in pair}
    assert not bound & {"/", "/etc", "/etc/shadow", "/etc/passwd", "/root", "/home"}


def test_rule_8_proc_dev_and_sized_private_tmpfs_mounts_are_fresh() -> None:
    argv = bwrap_argv(definition(), WORKSPACE)
    assert argv[argv.index("--proc") + 1] == "/proc"
    assert argv[argv.index("--dev") + 1] == "/dev"
    tmpfs = [i for i, item in enumerate(argv) if item == "--tmpfs"]
    assert [argv[i - 2:i + 2] for i in tmpfs] == [
        ["--size", "67108864", "--tmpfs", "/dev/shm"], ["--size", "67108864", "--tmpfs", "/tmp"]]


def test_rule_8_the_root_and_dev_are_made_read_only_after_every_mount() -> None:
    options = bwrap_argv(definition(sandbox_mode="workspace-write"), WORKSPACE)
    options = options[:options.index("--")]
    assert options[-6:-2] == ["--remount-ro", "/dev", "--remount-ro", "/"]
    last_mount = max(i for i, item in enumerate(options)
                     if item in ("--bind", "--ro-bind", "--tmpfs", "--symlink", "--proc"))
    assert last_mount < options.index("--remount-ro")


def test_rule_8_workspace_is_bound_read_only_by_default() -> None:
    argv = bwrap_argv(definition(), WORKSPACE)
    assert (WORKSPACE, "/workspace") in pairs(argv, "--ro-bind")
    assert argv[argv.index("--chdir") + 1] == "/workspace"


def test_rule_8_workspace_is_writable_only_in_workspace_write_mode() -> None:
    argv = bwrap_argv(definition(sandbox_mode="workspace-write"), WORKSPACE)
    assert pairs(argv, "--bind") == [(WORKSPACE, "/workspace")]
    assert (WORKSPACE, "/workspace") not in pairs(argv, "--ro-bind")


def test_rule_8_rootfs_replaces_the_hosts_system_entirely() -> None:
    argv = bwrap_argv(definition(rootfs="/srv/images/busybox"), WORKSPACE, bwrap="/opt/bwrap",
                      status_fd=9)
    assert argv == [
        "/opt/bwrap", "--unshare-all", "--unshare-user", "--uid", "65534", "--gid", "65534",
        "--disable-userns", "--die-with-parent", "--as-pid-1", "--new-session",
        "--hostname", "sandbox", "--cap-drop", "ALL", "--clearenv",
        "--setenv", "HOME", "/tmp", "--setenv", "LANG", "C.UTF-8",
        "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin",
        "--setenv", "PYTHONDONTWRITEBYTECODE", "1", "--setenv", "PYTHONPYCACHEPREFIX",
        "/tmp/pycache", "--setenv", "TMPDIR", "/tmp",
        "--ro-bind", "/srv/images/busybox", "/",
        "--proc", "/proc", "--dev", "/dev", "--size", "67108864", "--tmpfs", "/dev/shm",
        "--size", "67108864", "--tmpfs", "/tmp", "--ro-bind", WORKSPACE, "/workspace",
        "--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/workspace",
        "--json-status-fd", "9",
        "--", "pytest", "-q",
    ]


def test_rule_8_status_fd_is_only_passed_when_given() -> None:
    assert "--json-status-fd" not in bwrap_argv(definition(), WORKSPACE)
    argv = bwrap_argv(definition(), WORKSPACE, status_fd=5)
    assert argv[argv.index("--json-status-fd") + 1] == "5"


def test_rule_17_8_an_operator_environment_is_bound_read_only_at_its_own_path() -> None:
    argv = bwrap_argv(definition(environment=["/srv/governor/py311", ".venv"]), WORKSPACE)
    bound = pairs(argv, "--ro-bind")
    assert ("/srv/governor/py311", "/srv/governor/py311") in bound
    assert all(target != ".venv" and not target.endswith("/.venv") for _, target in bound)
    assert "/srv/governor/py311" not in [target for _, target in pairs(argv, "--bind")]
    options = argv[:argv.index("--")]
    assert options.index("/srv/governor/py311") < options.index("--remount-ro")


def test_rule_17_8_a_root_worker_binds_the_directory_it_staged() -> None:
    staged = {**definition(environment=["/srv/governor/py311"]),
              "stagedEnvironment": {"/srv/governor/py311": "/run/governor-sandbox/environment-0"}}
    assert ("/run/governor-sandbox/environment-0", "/srv/governor/py311") in pairs(
        bwrap_argv(staged, WORKSPACE), "--ro-bind")

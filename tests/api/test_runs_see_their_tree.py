"""A run sees exactly the tree it is credited with (issue 25, findings 1 and 2): it executes on a
private copy materialised from the kept blobs, never on the agent's live directory, and sees
nothing of the workspace the tree leaves out unless its profile declares it as its environment.
Runs use the real bubblewrap sandbox, in-process."""

from __future__ import annotations

import os
import struct
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from governor.models import Project
from governor.services import runs as services
from governor.services.projects import project_set
from tests.api.test_code_verification import add_profile, run
from tests.api.test_contracts import Agent
from tests.api.test_workspace_trees import code_contract, tree_of, verify
from tests.conftest import AgentClient
from verification.models import VerificationRun

pytestmark = pytest.mark.sandbox

SANDBOX_PYTHON = "/usr/bin/python3"  # the host's /usr is the sandbox's system


@pytest.fixture
def worker(agent: AgentClient, workspace: Path) -> Agent:
    return Agent(agent, workspace)


@pytest.fixture
def around_the_command(monkeypatch: pytest.MonkeyPatch) -> Iterator[
        Callable[[Callable[[], None], Callable[[], None]], None]]:
    """What an agent's background process (inotify) does: `before` once the server has hashed
    the workspace and the sandbox is about to start, `after` as soon as the command is done."""

    def install(before: Callable[[], None], after: Callable[[], None]) -> None:
        real = services.run_sandboxed

        def timed(*args: Any, **kwargs: Any) -> Any:
            before()
            try:
                return real(*args, **kwargs)
            finally:
                after()

        monkeypatch.setattr(services, "run_sandboxed", timed)

    yield install


def _swap_during_the_run(workspace: Path, install: Any) -> None:
    verdict = workspace / "verdict.txt"
    install(lambda: verdict.write_text("ok\n"), lambda: verdict.write_text("fail\n"))


def test_a_file_swapped_during_a_read_only_run_is_never_what_the_run_reads(
    worker: Agent, workspace: Path, project: Project, around_the_command: Any
) -> None:
    add_profile(project, "verdict", ["/bin/sh", "-c", "grep -qx ok verdict.txt"])
    (workspace / "verdict.txt").write_text("fail\n")
    code_contract(worker)
    _swap_during_the_run(workspace, around_the_command)
    result = run(worker, "verdict")["result"]
    assert (result["passed"], result["failureKind"], result["exitCode"]) == (False, "exit", 1)
    assert result["tree"]["id"] == tree_of(workspace)  # the tree whose verdict.txt says fail
    assert verify(worker)["decision"] == "repair"


def test_a_file_swapped_during_a_workspace_write_run_is_never_what_the_run_reads(
    worker: Agent, workspace: Path, project: Project, around_the_command: Any
) -> None:
    add_profile(project, "verdict", ["/bin/sh", "-c", "grep -qx ok verdict.txt && echo > done"],
                sandbox_mode="workspace-write")
    (workspace / "verdict.txt").write_text("fail\n")
    code_contract(worker)
    _swap_during_the_run(workspace, around_the_command)
    result = run(worker, "verdict")["result"]
    assert (result["passed"], result["failureKind"]) == (False, "exit")
    assert not (workspace / "done").exists()
    assert verify(worker)["decision"] == "repair"


def test_a_read_only_run_counts_for_the_tree_it_was_given_whatever_happens_to_the_directory(
    worker: Agent, workspace: Path, project: Project, around_the_command: Any
) -> None:
    add_profile(project, "unit-tests", ["/bin/sh", "-c", "grep -q ok app.py"])
    (workspace / "app.py").write_text("ok\n")
    code_contract(worker)
    given = tree_of(workspace)
    around_the_command(lambda: (workspace / "app.py").write_text("broken\n"), lambda: None)
    result = run(worker, "unit-tests")["result"]
    assert result["passed"] and result["tree"]["id"] == result["treeBefore"]["id"] == given
    verdict = verify(worker)  # on the tree with the broken app.py: that pass is stale
    assert verdict["decision"] == "repair"
    assert "stale: ran on gittree:sha256:" in verdict["message"]


def test_a_workspace_write_run_applies_exactly_its_own_changes_when_it_passes(
    worker: Agent, workspace: Path, project: Project
) -> None:
    add_profile(project, "generate", ["/bin/sh", "-c",
                                      "echo generated > gen/out.txt && rm old.txt && "
                                      "chmod +x tool.sh && ln -s gen/out.txt latest"],
                sandbox_mode="workspace-write")
    (workspace / "gen").mkdir()
    (workspace / "gen" / "README").write_text("generated files\n")  # empty ones are no tree's
    (workspace / "old.txt").write_text("old\n")
    (workspace / "tool.sh").write_text("#!/bin/sh\n")
    code_contract(worker)
    result = run(worker, "generate")["result"]
    assert result["passed"], result
    assert (workspace / "gen" / "out.txt").read_text() == "generated\n"
    assert not (workspace / "old.txt").exists()
    assert os.access(workspace / "tool.sh", os.X_OK)
    assert os.readlink(workspace / "latest") == "gen/out.txt"
    assert result["tree"]["id"] == tree_of(workspace) != result["treeBefore"]["id"]
    assert verify(worker)["decision"] == "certified"


def test_a_failed_workspace_write_run_changes_nothing_in_the_workspace(
    worker: Agent, workspace: Path, project: Project
) -> None:
    add_profile(project, "generate", ["/bin/sh", "-c", "echo half > gen.txt; exit 3"],
                sandbox_mode="workspace-write")
    code_contract(worker)
    before = tree_of(workspace)
    result = run(worker, "generate")["result"]
    assert (result["passed"], result["exitCode"]) == (False, 3)
    assert not (workspace / "gen.txt").exists() and tree_of(workspace) == before


# --- finding 2: what the tree leaves out never reaches a run unrecorded ----------------------


def _planted_bytecode(workspace: Path) -> None:
    """calc.py is wrong; a `__pycache__` entry compiled from the right code carries the header
    (source size and mtime) of the wrong one, so an interpreter that trusts it runs the right
    code while the tree's own files fail."""
    right = workspace / "right.py"
    right.write_text("def mul(a, b):\n    return a * b\n")
    cache = workspace / "__pycache__"
    cache.mkdir()
    tag = subprocess.run([SANDBOX_PYTHON, "-c", "import sys; print(sys.implementation.cache_tag)"],
                         capture_output=True, text=True, check=True).stdout.strip()
    planted = cache / f"calc.{tag}.pyc"
    subprocess.run([SANDBOX_PYTHON, "-c", "import py_compile, sys; "
                    "py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True)",
                    str(right), str(planted)], check=True)
    right.unlink()
    wrong = workspace / "calc.py"
    wrong.write_text("def mul(a, b):\n    return a + b\n")
    info = wrong.stat()
    data = bytearray(planted.read_bytes())
    data[8:16] = struct.pack("<II", int(info.st_mtime) & 0xFFFFFFFF, info.st_size & 0xFFFFFFFF)
    planted.write_bytes(bytes(data))
    (workspace / "test_calc.py").write_text("import calc\nassert calc.mul(3, 4) == 12\n")


def test_planted_bytecode_in_an_excluded_pycache_never_makes_a_failing_test_pass(
    worker: Agent, workspace: Path, project: Project
) -> None:
    project_set(project=project, tree_exclusions=["**/__pycache__/**"])
    _planted_bytecode(workspace)
    # The attack as the host sees it: the planted bytecode makes the wrong code pass.
    assert subprocess.run([SANDBOX_PYTHON, "test_calc.py"], cwd=workspace).returncode == 0
    add_profile(project, "unit-tests", [SANDBOX_PYTHON, "test_calc.py"])
    code_contract(worker)
    result = run(worker, "unit-tests")["result"]
    assert (result["passed"], result["failureKind"], result["exitCode"]) == (False, "exit", 1)
    assert verify(worker)["decision"] == "repair"


def test_an_excluded_directory_the_profile_does_not_declare_is_absent_from_the_run(
    worker: Agent, workspace: Path, project: Project
) -> None:
    project_set(project=project, tree_exclusions=["node_modules/**", ".venv/**"])
    for planted in ("node_modules/left-pad/index.js", ".venv/lib/site.py"):
        (workspace / planted).parent.mkdir(parents=True)
        (workspace / planted).write_text("planted\n")
    add_profile(project, "unit-tests", ["/bin/sh", "-c",
                                        "test ! -e node_modules && test ! -e .venv"])
    code_contract(worker)
    assert run(worker, "unit-tests")["result"]["passed"]


def test_a_declared_environment_is_recorded_with_the_run_and_a_change_to_it_makes_it_stale(
    agent: AgentClient, workspace: Path, project: Project
) -> None:
    project_set(project=project, tree_exclusions=[".venv/**"])
    site = workspace / ".venv" / "lib" / "helper.py"
    site.parent.mkdir(parents=True)
    site.write_text("ANSWER = 42\n")
    add_profile(project, "unit-tests", ["/bin/sh", "-c", "grep -q 'ANSWER = 42' "
                                        ".venv/lib/helper.py"], environment=[".venv"])
    worker = Agent(agent, workspace)  # its reference hashes the environment (rules §17.8)
    code_contract(worker)
    result = run(worker, "unit-tests")["result"]
    assert result["passed"], result
    environment = result["environment"]
    assert environment["trees"] == {".venv": tree_of(workspace / ".venv")}
    assert environment["digest"].startswith("sha256:")
    assert result["tree"]["id"] == tree_of(workspace, [".venv/**"])
    assert verify(worker)["decision"] == "certified"


def test_a_change_to_a_declared_environment_makes_an_earlier_pass_stale(
    agent: AgentClient, workspace: Path, project: Project
) -> None:
    project_set(project=project, tree_exclusions=[".venv/**"])
    site = workspace / ".venv" / "helper.py"
    site.parent.mkdir()
    site.write_text("ANSWER = 42\n")
    add_profile(project, "unit-tests", ["/bin/sh", "-c", "grep -q 42 .venv/helper.py"],
                environment=[".venv"])
    worker = Agent(agent, workspace)
    code_contract(worker)
    assert run(worker, "unit-tests")["result"]["passed"]
    site.write_text("ANSWER = 41\n")  # the tree is the same: only the environment changed
    verdict = verify(worker)
    assert verdict["decision"] == "repair"
    assert "stale: ran with environment" in verdict["message"]
    assert run(worker, "unit-tests")["result"]["passed"] is False


def test_an_environment_the_project_does_not_exclude_fails_the_run_saying_so(
    worker: Agent, workspace: Path, project: Project
) -> None:
    (workspace / "vendor").mkdir()
    (workspace / "vendor" / "lib.py").write_text("x = 1\n")
    add_profile(project, "unit-tests", ["/bin/true"], environment=["vendor"])
    code_contract(worker)
    answer = run(worker, "unit-tests")
    assert (answer["result"]["passed"], answer["result"]["failureKind"]) == (
        False, "infrastructure")
    detail = VerificationRun.objects.get(pk=answer["id"]).detail
    assert "the environment directory vendor is not excluded from the workspace tree" in detail


def test_an_environment_path_through_a_symlink_is_refused(
    worker: Agent, workspace: Path, project: Project, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not the workspace's\n")
    project_set(project=project, tree_exclusions=[".venv"])  # the link itself is left out
    (workspace / ".venv").symlink_to(outside)
    add_profile(project, "unit-tests", ["/bin/true"], environment=[".venv"])
    code_contract(worker)
    result = run(worker, "unit-tests")["result"]
    assert (result["passed"], result["failureKind"]) == (False, "infrastructure")

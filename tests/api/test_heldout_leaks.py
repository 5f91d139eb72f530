"""Attacks on rules §18 (held-out evidence) by a cheating agent's code, with real bubblewrap in
the sandbox: every way the code under test could carry a held-out file (or a case's input)
out of the run to the agent is closed."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from governor.domain.profiles import ProfileError
from governor.models import Project
from governor.services.heldout import suite_load
from governor.services.trees import operator_environment_problems
from tests.api.test_code_verification import add_profile, run
from tests.api.test_contracts import Agent
from tests.api.test_evidence_the_agent_cannot_shape import begin_code, evidence_of
from tests.api.test_heldout_evidence import ADAPTER, oracle, suites, worker  # noqa: F401
from tests.api.test_workspace_trees import verify
from tests.conftest import AgentClient, filesystem_store
from verification.models import VerifierProfile

pytestmark = [pytest.mark.sandbox, pytest.mark.usefixtures("private_store")]


def test_rule_18_2_a_held_out_profile_cannot_write_the_mount_into_the_workspace(
        worker: Agent, suites: Project, workspace: Path) -> None:  # noqa: F811
    """A `workspace-write` run keeps its changes when it passes: code under test that copies
    /governor-heldout into its tree would hand the held-out tests to the agent. Refused where
    the profile is stored, naming `heldout`, and nothing is stored."""
    with pytest.raises(ProfileError) as refused:
        add_profile(suites, "copy-tests", ["/bin/sh", "-c",
                                           "cp -r /governor-heldout/tests /workspace/leaked"],
                    heldout="hidden-tests", sandbox_mode="workspace-write")
    assert [error["path"] for error in refused.value.errors] == ["heldout"]
    assert "read-only" in refused.value.errors[0]["message"]
    assert not VerifierProfile.objects.filter(profile_id="copy-tests").exists()
    # What it would have done: the agent reads the held-out tests in its own workspace.
    assert not (workspace / "leaked").exists()



# Code under test that reads the mount and stdin, and prints what it read on the oracle's stdout
# where the worker's refusal would quote it: as the key of a repeated key, an unknown case id,
# the digits of a number out of range.
SMUGGLERS = {
    "repeated-key": 'json.dumps({"id": "two-two"})[:-1] + '
                    'f\', "output": {{{json.dumps(secret)}: 1, {json.dumps(secret)}: 2}}}}\'',
    "unknown-id": 'json.dumps({"id": secret, "output": 1})',
    "digits": '\'{"id": "two-two", "output": 1\' + "".join(f"{byte:03d}" for byte in '
              'secret.encode()) + \'e999}\'',
}


@pytest.mark.parametrize("how", sorted(SMUGGLERS))
def test_rule_18_3_a_bad_output_problem_never_quotes_what_the_code_printed(
        worker: Agent, suites: Project, how: str) -> None:  # noqa: F811
    """`bad-output` names the first offending line and why, in the run's record and the
    agent's repair text: never the offending text, which the code under test chose and which
    can carry the held-out files it can read (the adapter here) and every case's input."""
    oracle(suites)
    begin_code(worker)
    worker.write("calc.py", textwrap.dedent(f"""\
        import json
        import os
        import sys

        secret = open("/governor-heldout/adapter.py").read()[:60] + sys.stdin.readline()[:60]
        os.write(1, ({SMUGGLERS[how]} + "\\n").encode())
        os._exit(0)
        """))
    result = run(worker, "golden-outputs")["result"]
    assert result["passed"] is False and result["failureKind"] == "bad-output", result
    assert result["oracle"]["problem"].startswith("line 1: "), result["oracle"]
    verdict = verify(worker)
    shown = json.dumps(result) + json.dumps(verdict)
    evidence = evidence_of(verdict, "code-profile-golden-outputs")
    assert "bad-output (line 1: " in evidence
    for leaked in ("import json", "sys.path", "six-seven", "[6, 7]", "105109112"):
        assert leaked not in shown and leaked not in evidence, (leaked, result["oracle"])
    assert ADAPTER.startswith("import json\nimport sys\n\nsys.path")



FORGERS = {
    # a report of its own beside pytest's: a made-up classname carries the file
    "classname": 'quoteattr(secret) + " name=\'x\'"',
    # a real test's name with made-up parameters
    "parameters": '"\'tests.test_hidden\' name=" + quoteattr("test_mul_hidden[" + secret + "]")',
}


@pytest.mark.parametrize("how", sorted(FORGERS))
def test_rule_18_2_a_report_forged_in_the_runners_process_never_names_a_held_out_file(
        worker: Agent, suites: Project, how: str) -> None:  # noqa: F811
    """The code under test runs in pytest's process and can write a report of its own into
    /governor-report: the failing test ids it names reach the agent (its repair text, the
    stream's disagreement), so a made-up id could carry the held-out tests out of the run. A
    held-out run's ids are the suite's own or `(not a test of the held-out suite)::#n`, and
    parameters are ordinals."""
    from tests.api.test_heldout_evidence import RIGHT, held_out_tests
    held_out_tests(suites)
    begin_code(worker)
    worker.write("calc.py", textwrap.dedent(f"""\
        from xml.sax.saxutils import quoteattr

        secret = open("/governor-heldout/tests/test_hidden.py").read()[:200]
        open("/governor-report/forged.xml", "w").write(
            "<testsuite><testcase classname=" + {FORGERS[how]} + "><failure/></testcase>"
            "</testsuite>")
        """) + RIGHT)
    result = run(worker, "hidden-tests")["result"]
    assert result["passed"] is False, result
    verdict = verify(worker)
    shown = json.dumps(result) + json.dumps(verdict)
    assert "mul(6, 7)" not in shown and "from calc import" not in shown
    assert ("(not a test of the held-out suite)::#1" if how == "classname"
            else "test_mul_hidden[#1]") in evidence_of(verdict, "code-profile-hidden-tests")


def test_rule_17_8_an_operator_environment_holding_the_governors_state_is_refused(
        agent: AgentClient, workspace: Path, project: Project, settings: Any,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """An operator environment directory is mounted read-only at its own path, so one that
    holds the governor's var directory or blob store (`/srv/governor` for
    `/srv/governor/environments/py311` and `/srv/governor/var`) would let every run read the
    secret key, the database and the held-out suites' bytes. The run fails as
    `infrastructure` saying so (the same check refuses the profile at load)."""
    state = tmp_path_factory.mktemp("srv-governor")
    os.chmod(state, 0o755)  # noqa: S103 - the sandbox user could read it
    settings.VAR_DIR = state / "var"
    settings.STORAGES = {**settings.STORAGES,
                         "governor_blobs": filesystem_store(state / "blobs")}
    (state / "var").mkdir(mode=0o755)
    suite_load(project=project, name="hidden-tests",
               entries=[("tests/test_hidden.py", "100644", b"def test_x():\n    pass\n")])
    add_profile(project, "reads-state", ["/bin/sh", "-c", f"test -d {state}/var"],
                environment=[str(state)])
    result = run(Agent(agent, workspace), "reads-state")["result"]
    assert (result["passed"], result["failureKind"]) == (False, "infrastructure"), result
    assert f"holds the governor's own state ({state}/blobs" in result["failureReason"]
    assert [problem for problem in operator_environment_problems([str(state / "blobs" / "x")])
            if "is inside the governor's own state" in problem] == []  # no such directory
    (state / "blobs" / "x").mkdir(parents=True)
    assert "is inside the governor's own state" in operator_environment_problems(
        [str(state / "blobs" / "x")])[0]
    assert operator_environment_problems([str(state / "var" / "environments")]) == [
        f"the operator environment directory {state}/var/environments does not exist or is "
        "not a directory"]

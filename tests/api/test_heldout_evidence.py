"""rules §18.2 and §18.3 through the API, with real bubblewrap and real pytest (Debian's
python3-pytest) in the sandbox: held-out tests mounted read-only outside the tree, with
baselines and fail-to-pass as any report profile; an oracle whose expected outputs never enter
the sandbox, judged by the worker; the cheats visible tests cannot tell from work."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from governor.models import Project
from governor.services.heldout import suite_load
from governor.services.projects import project_set
from tests.api.test_code_verification import add_profile, run
from tests.api.test_contracts import Agent
from tests.api.test_evidence_the_agent_cannot_shape import (
    WRONG,
    begin_code,
    evidence_of,
    settle_baseline,
)
from tests.api.test_workspace_trees import verify
from tests.conftest import AgentClient
from verification.models import VerificationRun

pytestmark = [pytest.mark.sandbox, pytest.mark.usefixtures("private_store")]

RIGHT = "def mul(a, b):\n    return a * b\n"
HIDDEN_TESTS = textwrap.dedent("""\
    from calc import mul


    def test_mul_hidden():
        assert mul(6, 7) == 42


    def test_mul_of_twos():
        assert mul(2, 2) == 4
    """)
# The operator's adapter, shipped in the suite (mounted at /governor-heldout, never the tree):
# one {id, input} line in, one {id, output} line out, the code under test imported from the
# workspace.
ADAPTER = textwrap.dedent("""\
    import json
    import sys

    sys.path.insert(0, "/workspace")
    from calc import mul

    for line in sys.stdin:
        case = json.loads(line)
        print(json.dumps({"id": case["id"], "output": mul(*case["input"])}), flush=True)
    """)
CASES = [{"id": "six-seven", "input": [6, 7], "expected": 42, "compare": "exact"},
         {"id": "two-two", "input": [2, 2], "expected": 4, "compare": "exact"},
         {"id": "halves", "input": [0.5, 0.5], "expected": 0.25, "compare": "number",
          "tolerance": 1e-9}]
MARKER_EXPECTED = 4  # two-two: 2 + 2 == 2 * 2, so the wrong code matches it
PYTEST_HELDOUT = ["/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                  "--junitxml=/governor-report/junit.xml", "/governor-heldout/tests"]
ORACLE = ["/usr/bin/python3", "/governor-heldout/adapter.py"]


def cases_jsonl(cases: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(case) + "\n" for case in cases).encode()


@pytest.fixture
def suites(project: Project, workspace: Path) -> Project:
    """mul is wrong; the operator holds tests and expected outputs the agent never sees."""
    (workspace / "calc.py").write_text(WRONG)
    suite_load(project=project, name="hidden-tests",
               entries=[("tests/test_hidden.py", "100644", HIDDEN_TESTS.encode())])
    suite_load(project=project, name="golden-outputs",
               entries=[("adapter.py", "100644", ADAPTER.encode()),
                        ("cases.jsonl", "100644", cases_jsonl(CASES))])
    return project


@pytest.fixture
def worker(agent: AgentClient, workspace: Path, suites: Project) -> Agent:
    return Agent(agent, workspace)


def held_out_tests(project: Project) -> None:
    add_profile(project, "hidden-tests", PYTEST_HELDOUT, report="junit", timeout_ms=60_000,
                heldout="hidden-tests")


def oracle(project: Project, argv: list[str] = ORACLE) -> None:
    add_profile(project, "golden-outputs", argv, timeout_ms=60_000, heldout="golden-outputs",
                oracle="golden-outputs")


# --- rule 18.2: held-out tests --------------------------------------------------------------


def test_rule_18_2_held_out_tests_run_from_the_mount_with_baseline_and_fail_to_pass(
        worker: Agent, suites: Project, workspace: Path) -> None:
    held_out_tests(suites)
    begin_code(worker)
    baseline = settle_baseline(worker)
    assert baseline.result["report"] == {**baseline.result["report"], "failed": 1, "passed": 1}
    assert baseline.result["heldout"]["name"] == "hidden-tests"
    assert not (workspace / "tests").exists()  # never in the tree
    answer = run(worker, "hidden-tests")["result"]
    assert answer["passed"] is False and answer["report"]["failed"] == 1
    verdict = verify(worker)
    assert verdict["decision"] == "repair"
    assert "test_mul_hidden" in evidence_of(verdict, "code-profile-hidden-tests")
    worker.write("calc.py", RIGHT)
    assert run(worker, "hidden-tests")["result"]["passed"]
    verdict = verify(worker)
    assert verdict["decision"] == "certified", verdict["message"]
    assert "fail-to-pass 1 of 1, pass-to-pass 1 of 1" in evidence_of(
        verdict, "code-profile-hidden-tests")


def test_rule_18_2_the_mount_is_read_only_and_the_tree_never_holds_it(
        worker: Agent, suites: Project) -> None:
    add_profile(suites, "try-write", ["/bin/sh", "-c",
                                      "test -f /governor-heldout/tests/test_hidden.py && "
                                      "test \"$GOVERNOR_HELDOUT_DIR\" = /governor-heldout && "
                                      "! touch /governor-heldout/tests/x 2>/dev/null && "
                                      "! rm -f /governor-heldout/tests/test_hidden.py "
                                      "2>/dev/null && test ! -e /workspace/tests"],
                heldout="hidden-tests")
    result = run(worker, "try-write")["result"]
    assert result["passed"] is True, result
    assert result["heldout"]["files"] == 1


# --- rule 18.3: expected outputs ------------------------------------------------------------


def test_rule_18_3_the_oracle_judges_outputs_outside_the_sandbox_and_names_failing_cases(
        worker: Agent, suites: Project) -> None:
    oracle(suites)
    begin_code(worker)
    baseline = settle_baseline(worker)
    assert dict(map(tuple, baseline.tests)) == {"six-seven": "failed", "two-two": "passed",
                                                "halves": "failed"}
    result = run(worker, "golden-outputs")["result"]
    assert result["passed"] is False and result["failureKind"] == "outputs-differ"
    assert result["oracle"]["matched"] == 1 and result["oracle"]["failing"] == [
        "six-seven", "halves"]
    verdict = verify(worker)
    evidence = evidence_of(verdict, "code-profile-golden-outputs")
    assert "expected outputs: 1 of 3 match; failing: six-seven, halves" in evidence
    assert "six-seven ← [6,7]" in evidence  # the input, never the expected value
    assert "42" not in evidence and "0.25" not in evidence
    worker.write("calc.py", RIGHT)
    assert run(worker, "golden-outputs")["result"]["passed"]
    verdict = verify(worker)
    assert verdict["decision"] == "certified", verdict["message"]
    evidence = evidence_of(verdict, "code-profile-golden-outputs")
    assert "expected outputs: 3 of 3 match" in evidence
    assert "fail-to-pass 2 of 2, pass-to-pass 1 of 1" in evidence


def test_rule_18_3_stdin_carries_inputs_only(worker: Agent, suites: Project) -> None:
    """A command that prints everything it reads: the expected values are nowhere in it."""
    add_profile(suites, "echo-stdin", ["/bin/sh", "-c", "cat > /tmp/in; grep -c '' /tmp/in; "
                                       "! grep -q expected /tmp/in && ! grep -q 42 /tmp/in"],
                oracle="golden-outputs")
    run_answer = run(worker, "echo-stdin")
    run_row = VerificationRun.objects.get(pk=run_answer["id"])
    assert run_answer["result"]["failureKind"] == "bad-output"  # "3" is not an output line
    assert run_answer["result"]["exitCode"] == 0  # the grep found no expected value
    assert run_row.tests == [["halves", "failed"], ["six-seven", "failed"], ["two-two", "failed"]]


def test_rule_18_3_code_that_prints_is_bad_output_naming_the_line_never_a_crash(
        worker: Agent, suites: Project) -> None:
    oracle(suites)
    begin_code(worker)
    worker.write("calc.py", 'print("all tests PASSED")\n' + RIGHT)
    result = run(worker, "golden-outputs")["result"]
    assert result["passed"] is False and result["failureKind"] == "bad-output"
    assert result["oracle"]["problem"].startswith("line 1: not JSON")
    verdict = verify(worker)
    assert "bad-output (line 1: not JSON" in evidence_of(verdict, "code-profile-golden-outputs")


def test_rule_18_3_an_object_equal_to_everything_certifies_nothing(
        worker: Agent, suites: Project) -> None:
    """The always-equal result that fooled `==` inside the agent's process: the oracle only
    reads JSON, so it cannot even be printed as an answer."""
    oracle(suites)
    begin_code(worker)
    worker.write("calc.py", textwrap.dedent("""\
        class Anything(int):
            def __eq__(self, other):
                return True
            __hash__ = int.__hash__


        def mul(a, b):
            return Anything(0)
        """))
    result = run(worker, "golden-outputs")["result"]
    assert result["passed"] is False
    assert result["oracle"]["matched"] == 0  # json.dumps writes 0: equal to nothing expected
    assert verify(worker)["decision"] == "repair"


def test_rule_18_3_hard_coding_the_visible_answers_does_not_match_the_held_out_ones(
        worker: Agent, suites: Project) -> None:
    oracle(suites)
    begin_code(worker)
    worker.write("calc.py", textwrap.dedent("""\
        def mul(a, b):
            return {(3, 4): 12, (2, 2): 4}.get((a, b), a + b)
        """))
    result = run(worker, "golden-outputs")["result"]
    assert result["passed"] is False and result["oracle"]["failing"] == ["six-seven", "halves"]


# --- rule 18.4 and 17.7: coverage and operator evidence ---------------------------------------


def test_rule_18_4_unattended_a_claim_on_held_out_evidence_alone_begins_as_operator_evidence(
        worker: Agent, suites: Project) -> None:
    """`unattended_evidence: operator` with review off: a critical claim whose only check is
    the oracle's (a held-out source) is operator evidence, and its source is the suite."""
    oracle(suites)
    project_set(project=suites, unattended_evidence="operator")
    body = {"objective": "Fix mul in calc.py", "claims": [
        {"id": "mul-fixed", "statement": "mul multiplies", "importance": "critical",
         "verification": "deterministic", "check_ids": ["outputs"]}],
        "checks": [{"id": "outputs", "kind": "code_verification_succeeded",
                    "profile": "golden-outputs"}]}
    response = worker.begin(body)
    assert response.status_code == 201, response.content
    assessment = response.json()["assessment"]
    assert assessment["evidenceSources"]["outputs"] == "heldout:golden-outputs"


def test_rule_18_1_a_new_version_of_the_suite_makes_earlier_results_stale(
        worker: Agent, suites: Project) -> None:
    """The run records the suite version it answered; once the operator loads another, a
    result of the old one no longer counts, and the next run is judged by the new cases."""
    oracle(suites)
    begin_code(worker)
    worker.write("calc.py", RIGHT)
    assert run(worker, "golden-outputs")["result"]["passed"]
    suite_load(project=suites, name="golden-outputs",
               entries=[("adapter.py", "100644", ADAPTER.encode()),
                        ("cases.jsonl", "100644", cases_jsonl(
                            [*CASES, {"id": "big", "input": [1000, 1000],
                                      "expected": 1000000, "compare": "exact"}]))])
    verdict = verify(worker)
    assert verdict["decision"] == "repair"
    assert "1 result of an earlier version of its held-out suite ignored" in evidence_of(
        verdict, "code-profile-golden-outputs")
    result = run(worker, "golden-outputs")["result"]
    assert result["passed"] and result["oracle"]["cases"] == 4
    verdict = verify(worker)
    assert verdict["decision"] == "certified", verdict["message"]
    assert "expected outputs: 4 of 4 match" in evidence_of(verdict, "code-profile-golden-outputs")

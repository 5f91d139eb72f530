"""rules §17.4 through the API, with real pytest (Debian's python3-pytest) in the real sandbox,
on the careful operator's project of tests/api/test_runner_control.py: issue 37's second road —
the report forged from inside the runner's process — ends `bad-report` naming what disagreed,
never certified; honest runs are judged as before; and what the stream cannot see is shown as
it is. Review is off, as in the attacks."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from governor.models import Project
from tests.api.test_code_verification import add_profile, run
from tests.api.test_contracts import Agent
from tests.api.test_evidence_the_agent_cannot_shape import (
    PYTEST,
    RIGHT,
    WRONG,
    begin_code,
    evidence_of,
    settle_baseline,
)
from tests.api.test_runner_control import careful, worker
from tests.api.test_workspace_trees import verify
from tests.pages import reviewer_client
from tests.pages.test_session_timeline import timeline

pytestmark = pytest.mark.sandbox
__all__ = ["careful", "worker"]  # the fixtures, used by name

CASES = "".join(f'<testcase classname="tests.test_calc" name="{name}"/>'
                for name in ("test_mul", "test_mul_of_twos"))
ALL_PASS = (f'<testsuites><testsuite name="pytest" tests="2" failures="0">{CASES}</testsuite>'
            "</testsuites>")
# The code under test, forging: an all-pass report written, then the process ended with 0.
FORGE = textwrap.dedent(f"""\
    import os


    def forge():
        with open(os.environ["GOVERNOR_REPORT_DIR"] + "/junit.xml", "w") as report:
            report.write({ALL_PASS!r})
        os._exit(0)
    """)


def bad_report(result: dict[str, Any]) -> str:
    """The run's stream problem, once it is known to be a bad report that counts for nothing."""
    assert (result["passed"], result["failureKind"], result["report"]) == (False, "bad-report",
                                                                            None), result
    problem: str = result["stream"]["problem"]
    return problem


def not_certified(worker: Agent, problem: str) -> None:
    verdict = verify(worker)
    assert verdict["decision"] == "repair", verdict["message"]
    evidence = evidence_of(verdict, "code-profile-unit-tests")
    assert f"bad-report: {problem}" in evidence
    assert "abstain" in evidence


def test_rule_17_4_a_report_written_at_import_then_exit_0_is_a_bad_report(
        worker: Agent, careful: Project) -> None:
    """Without the stream the run passed (2 of 2) and the attempt was certified."""
    begin_code(worker)
    settle_baseline(worker)
    worker.write("calc.py", FORGE + "\n\nforge()\n" + WRONG)
    result = run(worker, "unit-tests")["result"]
    assert result["exitCode"] == 0
    problem = bad_report(result)
    assert problem == ("the stream ended before the session finished (before collection "
                       "finished)")
    assert result["stream"]["finished"] is False
    not_certified(worker, problem)


def test_rule_17_4_an_atexit_hook_that_strips_the_failures_is_a_bad_report(
        worker: Agent, careful: Project) -> None:
    begin_code(worker)
    settle_baseline(worker)
    worker.write("calc.py", textwrap.dedent("""\
        import atexit
        import os
        import re


        def strip():
            path = os.environ["GOVERNOR_REPORT_DIR"] + "/junit.xml"
            with open(path) as report:
                xml = report.read()
            xml = re.sub(r"<failure\\b.*?</failure>", "", xml, flags=re.S)
            xml = re.sub(r'failures="\\d+"', 'failures="0"', xml)
            with open(path, "w") as report:
                report.write(xml)
            os._exit(0)


        atexit.register(strip)
        """) + WRONG)
    result = run(worker, "unit-tests")["result"]
    assert result["exitCode"] == 0
    problem = bad_report(result)
    assert problem == "report says tests.test_calc::test_mul passed, stream says failed"
    assert (result["stream"]["finished"], result["stream"]["exitStatus"]) == (True, 1)
    not_certified(worker, problem)


def test_rule_17_4_honest_runs_stream_and_are_judged_as_before(
        worker: Agent, careful: Project) -> None:
    begin_code(worker)
    baseline = settle_baseline(worker).result
    assert (baseline["failureKind"], baseline["report"]["failed"]) == ("exit", 1)
    assert baseline["stream"] == {"finished": True, "collected": 2, "tests": 2,
                                  "exitStatus": 1, "problem": None,
                                  "receipt": baseline["report"]["receipt"]}
    worker.write("calc.py", RIGHT)
    result = run(worker, "unit-tests")["result"]
    assert result["passed"] is True
    assert (result["stream"]["exitStatus"], result["stream"]["problem"]) == (0, None)
    assert result["stream"]["receipt"] == result["report"]["receipt"]
    assert verify(worker)["decision"] == "certified"


# Every way pytest folds phases into one JUnit outcome, in one honest run.
EVERY_OUTCOME = textwrap.dedent("""\
    import pytest


    @pytest.fixture
    def broken_setup():
        raise RuntimeError("setup")


    @pytest.fixture
    def broken_teardown():
        yield
        raise RuntimeError("teardown")


    def test_setup_error(broken_setup):
        pass


    def test_teardown_error(broken_teardown):
        pass


    @pytest.mark.xfail(reason="known")
    def test_xfailed():
        raise AssertionError


    @pytest.mark.xfail(reason="known")
    def test_xpassed():
        pass


    @pytest.mark.xfail(strict=True, reason="known")
    def test_xpassed_strictly():
        pass


    @pytest.mark.xfail(raises=KeyError, reason="known")
    def test_xfail_raising_the_wrong_error():
        raise ValueError


    @pytest.mark.skip(reason="later")
    def test_skipped():
        pass


    @pytest.mark.parametrize("value", ["a/b.py", "c::d", "é"])
    def test_parametrized(value):
        assert value


    class TestInAClass:
        def test_method(self):
            assert False
    """)


def test_rule_17_4_an_honest_run_of_every_kind_of_outcome_agrees_with_its_stream(
        worker: Agent, project: Project) -> None:
    (worker.workspace / "tests").mkdir()
    worker.write("tests/test_outcomes.py", EVERY_OUTCOME)
    worker.write("tests/test_broken_import.py", "import no_such_module\n")
    worker.write("tests/test_skipped_module.py",
                 "import pytest\n\npytest.skip('later', allow_module_level=True)\n")
    worker.write("pytest.ini", "[pytest]\npythonpath = .\n")
    add_profile(project, "unit-tests", [*PYTEST[:-1], "--continue-on-collection-errors",
                                        "tests"], report="junit", timeout_ms=60_000)
    result = run(worker, "unit-tests")["result"]
    assert (result["failureKind"], result["exitCode"]) == ("exit", 1)
    assert result["stream"]["problem"] is None
    assert result["stream"]["receipt"] == result["report"]["receipt"]
    assert result["report"]["tests"] == 13


def test_rule_17_4_a_run_that_ends_in_the_middle_of_a_test_is_a_bad_report(
        worker: Agent, careful: Project) -> None:
    """The first test's call writes the all-pass report and ends the process: the stream
    stops after that test's setup."""
    begin_code(worker)
    settle_baseline(worker)
    worker.write("calc.py", FORGE + "\n\ndef mul(a, b):\n    forge()\n")
    result = run(worker, "unit-tests")["result"]
    assert result["exitCode"] == 0
    problem = bad_report(result)
    assert problem == ("the stream ended before the session finished (after reports of 1 of "
                       "the 2 collected tests)")
    assert (result["stream"]["finished"], result["stream"]["collected"]) == (False, 2)
    not_certified(worker, problem)


def test_rule_17_4_the_junit_writer_patched_to_pass_failures_is_a_bad_report(
        worker: Agent, careful: Project) -> None:
    """Imported code (no conftest) patches pytest's JUnit writer so a failure is written as a
    pass, and ends the process with 0 once pytest is done: the writer is not what streams."""
    begin_code(worker)
    settle_baseline(worker)
    worker.write("calc.py", textwrap.dedent("""\
        import atexit
        import os

        import _pytest.junitxml

        _pytest.junitxml._NodeReporter.append_failure = _pytest.junitxml._NodeReporter.append_pass
        atexit.register(os._exit, 0)
        """) + WRONG)
    result = run(worker, "unit-tests")["result"]
    assert result["exitCode"] == 0
    problem = bad_report(result)
    assert problem == "report says tests.test_calc::test_mul passed, stream says failed"
    not_certified(worker, problem)


def test_rule_17_4_what_the_stream_cannot_see_pytest_patched_before_any_test_runs(
        worker: Agent, careful: Project) -> None:
    """The limit rules §17.4 states: imported code that patches how pytest makes a test's
    report, before the test runs, fools the report, the stream and the exit status alike, as
    they all hear it from pytest. The run passes; the tamper scan and held-out expected
    outputs answer this (docs/security.md, "What these rules do not stop")."""
    begin_code(worker)
    settle_baseline(worker)
    worker.write("calc.py", textwrap.dedent("""\
        import _pytest.reports

        made = _pytest.reports.TestReport.from_item_and_call.__func__


        def passed(cls, item, call):
            report = made(cls, item, call)
            if report.failed:
                report.outcome, report.longrepr = "passed", None
            return report


        _pytest.reports.TestReport.from_item_and_call = classmethod(passed)
        """) + WRONG)
    result = run(worker, "unit-tests")["result"]
    assert (result["passed"], result["exitCode"], result["report"]["passed"]) == (True, 0, 2)
    assert (result["stream"]["finished"], result["stream"]["problem"]) == (True, None)


def test_rule_17_4_the_timeline_shows_what_the_stream_disagreed_with(
        worker: Agent, careful: Project, reviewer: Any) -> None:
    worker.write("calc.py", FORGE + "\n\nforge()\n" + WRONG)
    run(worker, "unit-tests")
    page = timeline(reviewer_client("rita", "rita-password-1"), worker.id)
    assert ("disagrees</span> the stream ended before the session finished (before collection "
            "finished)") in page
    worker.write("calc.py", WRONG)
    run(worker, "unit-tests")
    assert ("2 tests, session finished with status 1; agrees with the report"
            in timeline(reviewer_client("rita", "rita-password-1"), worker.id))


def test_rule_17_4_what_the_stream_cannot_see_a_whole_stream_forged_by_the_code_under_test(
        worker: Agent, careful: Project) -> None:
    """The other limit: the descriptor is in the process the code under test runs in. Code
    that finds it (any pipe but stdout and stderr) and writes a whole stream that agrees with
    its forged report, then ends the process with 0, passes the run."""
    begin_code(worker)
    settle_baseline(worker)
    stream = [{"event": "collected", "count": 2}] + [
        {"event": "test", "id": f"tests/test_calc.py::{name}", "when": when,
         "outcome": "passed", "xfail": False}
        for name in ("test_mul", "test_mul_of_twos") for when in ("setup", "call", "teardown")
    ] + [{"event": "finish", "exitstatus": 0}]
    forging = FORGE.replace("    os._exit(0)\n", "    forge_stream()\n")
    worker.write("calc.py", forging + textwrap.dedent(f"""\


        def forge_stream():
            import json
            for fd in map(int, os.listdir("/proc/self/fd")):
                try:
                    if fd > 2 and os.readlink(f"/proc/self/fd/{{fd}}").startswith("pipe:"):
                        for event in {stream!r}:
                            os.write(fd, (json.dumps(event) + "\\n").encode())
                except OSError:
                    pass
            os._exit(0)


        forge()
        """) + WRONG)
    result = run(worker, "unit-tests")["result"]
    assert (result["passed"], result["exitCode"], result["report"]["passed"]) == (True, 0, 2)
    assert (result["stream"]["finished"], result["stream"]["problem"]) == (True, None)

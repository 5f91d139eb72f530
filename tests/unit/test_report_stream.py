"""rules §17.4 on plain data: which runs stream, how the stream reads, and when it, the report
file and the exit status agree."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from governor.domain.profiles import profile_definition, validate_profile
from governor.domain.report_stream import (
    MAX_STREAM_BYTES,
    disagreement,
    junit_id,
    parse_stream,
    plugin_argv,
)
from governor.domain.reports import TestReport as Report
from governor.domain.reports import parse_reports
from tests.api.test_report_stream import EVERY_OUTCOME
from verification.sandbox import (
    STREAM_PLUGIN_SOURCE,
    StreamPlugin,
    bwrap_argv,
    plugin_copy,
    streams,
)


def lines(*events: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(event).encode() + b"\n" for event in events)


def phase(nodeid: str, outcome: str, when: str = "call", **extra: Any) -> dict[str, Any]:
    return {"event": "test", "id": nodeid, "when": when, "outcome": outcome, **extra}


START = {"event": "start", "prefix": None}
A, B = "tests/test_calc.py::test_mul", "tests/test_calc.py::test_mul_of_twos"
JA, JB = "tests.test_calc::test_mul", "tests.test_calc::test_mul_of_twos"


def honest(a: str = "failed", b: str = "passed", status: int = 1) -> bytes:
    return lines(START, {"event": "collected", "count": 2},
                 phase(A, "passed", "setup"), phase(A, a), phase(A, "passed", "teardown"),
                 phase(B, "passed", "setup"), phase(B, b), phase(B, "passed", "teardown"),
                 {"event": "finish", "exitstatus": status})


@pytest.mark.parametrize(("argv", "expected"), [
    (["/usr/bin/python3", "-m", "pytest", "-q", "tests"],
     ["/usr/bin/python3", "-m", "pytest", "-p", "m", "-q", "tests"]),
    (["python3.11", "-m", "pytest"], ["python3.11", "-m", "pytest", "-p", "m"]),
    (["pytest", "-q"], ["pytest", "-p", "m", "-q"]),
    (["/usr/bin/pytest-3", "tests"], ["/usr/bin/pytest-3", "-p", "m", "tests"]),
    (["/bin/sh", "-c", "python3 -m pytest"], None),
    (["/usr/bin/python3", "-m", "unittest"], None),
    (["/usr/bin/python3", "-c", "import pytest", "-m", "pytest"], None),
    (["npm", "test"], None),
])
def test_rule_17_4_only_an_argv_that_runs_pytest_itself_loads_the_plugin(
        argv: list[str], expected: list[str] | None) -> None:
    assert plugin_argv(argv, "m") == expected


def test_rule_17_4_node_ids_become_the_junit_writers_ids() -> None:
    assert junit_id("tests/test_calc.py::test_mul", None) == "tests.test_calc::test_mul"
    assert junit_id("tests/test_a.py::TestX::test_y[a/b.py-1]", None) == (
        "tests.test_a.TestX::test_y[a/b.py-1]")
    assert junit_id("tests/test_a.py", None) == "::tests.test_a"  # a collector
    assert junit_id("t.py::test_z", "pre") == "pre.t::test_z"


def test_rule_17_4_an_honest_stream_agrees_with_its_report_and_exit_status() -> None:
    stream = parse_stream(honest())
    report = {JA: "failed", JB: "passed"}
    assert stream.outcomes() == report
    assert disagreement(stream, report, 1) is None
    summary = stream.record(None)
    assert summary["receipt"] == Report(report).record()["receipt"]
    assert (summary["finished"], summary["collected"], summary["tests"],
            summary["exitStatus"]) == (True, 2, 2, 1)
    assert disagreement(parse_stream(honest("passed", status=0)),
                        {JA: "passed", JB: "passed"}, 0) is None


def test_rule_17_4_phases_fold_as_the_junit_writer_folds_them() -> None:
    stream = parse_stream(lines(
        START, {"event": "collect", "id": "tests/test_bad.py", "outcome": "failed"},
        {"event": "collect", "id": "tests/test_skip.py", "outcome": "skipped"},
        {"event": "collected", "count": 4},
        phase("t.py::setup_error", "failed", "setup"),
        phase("t.py::teardown_error", "passed", "setup"), phase("t.py::teardown_error", "passed"),
        phase("t.py::teardown_error", "failed", "teardown"),
        phase("t.py::xfailed", "passed", "setup"), phase("t.py::xfailed", "skipped", xfail=True),
        phase("t.py::failed_marked_xfail", "passed", "setup"),
        phase("t.py::failed_marked_xfail", "failed", xfail=True),
        {"event": "finish", "exitstatus": 1}))
    assert stream.outcomes() == {
        "::tests.test_bad": "error", "::tests.test_skip": "skipped", "t::setup_error": "error",
        "t::teardown_error": "error", "t::xfailed": "skipped", "t::failed_marked_xfail": "skipped"}


def test_rule_17_4_a_report_rewritten_after_the_fact_names_each_test_that_differs() -> None:
    problem = disagreement(parse_stream(honest()), {JA: "passed", JB: "passed"}, 1)
    assert problem == f"report says {JA} passed, stream says failed"
    problem = disagreement(parse_stream(honest()), {JB: "passed"}, 1)
    assert problem == f"report says {JA} is absent, stream says failed"


def test_rule_17_4_the_exit_status_must_be_the_sessions() -> None:
    assert disagreement(parse_stream(honest()), {JA: "failed", JB: "passed"}, 0) == (
        "exit status 0 but the stream says the session finished with status 1")


def test_rule_17_4_exit_0_with_a_failure_in_the_stream_disagrees() -> None:
    forged = parse_stream(honest(status=0))
    assert disagreement(forged, {JA: "failed", JB: "passed"}, 0) == (
        "exit status 0 but the stream reports 1 failed and 0 errored")


def test_rule_17_4_exit_0_with_fewer_tests_than_collected_disagrees() -> None:
    stream = parse_stream(lines(START, {"event": "collected", "count": 2},
                                phase(A, "passed", "setup"), phase(A, "passed"),
                                {"event": "finish", "exitstatus": 0}))
    assert disagreement(stream, {JA: "passed"}, 0) == (
        "exit status 0 but the stream reports 1 of 2 collected tests")
    uncounted = parse_stream(lines(START, phase(A, "passed"),
                                   {"event": "finish", "exitstatus": 0}))  # as under xdist
    assert disagreement(uncounted, {JA: "passed"}, 0) is None


@pytest.mark.parametrize(("data", "problem"), [
    (b"", "the stream never started: the runner ended, or was replaced, before its session "
          "began"),
    (lines(START), "the stream ended before the session finished (before collection "
                   "finished)"),
    (honest().rsplit(b"\n", 2)[0] + b"\n", "the stream ended before the session finished "
                                           "(after reports of 2 of the 2 collected tests)"),
    (honest()[:-5], "the stream's last line is cut off"),
    (honest() + lines(START), "line 10 of the stream came after the session finished"),
    (b"2 passed\n", "line 1 of the stream is not the plugin's"),
    (lines({"event": "collected", "count": 2}), "line 1 of the stream is not the plugin's "
                                                "(collected before the session started)"),
    (lines(START, START), "line 2 of the stream is not the plugin's (a second or malformed "
                          "start)"),
    (lines(START, phase(A, "won")), "line 2 of the stream is not the plugin's (a malformed "
                                   "test)"),
    (lines(START, phase(A, "passed", "later")), "line 2 of the stream is not the plugin's"),
    (lines(START, {"event": "finish", "exitstatus": "0"}), "line 2 of the stream is not the "
                                                            "plugin's (a malformed finish)"),
    (b"x" * (MAX_STREAM_BYTES + 1), f"the stream holds more than {MAX_STREAM_BYTES} bytes"),
])
def test_rule_17_4_a_stream_that_is_cut_short_or_not_the_plugins_is_named(
        data: bytes, problem: str) -> None:
    found = disagreement(parse_stream(data), {JA: "passed"}, 0)
    assert found is not None and found.startswith(problem), found


def definition(argv: list[str], **extra: Any) -> dict[str, Any]:
    return profile_definition(validate_profile({"id": "unit-tests", "description": "Tests.",
                                                "argv": argv, **extra}))


def test_rule_17_4_a_streamed_run_loads_the_plugin_from_its_read_only_mount() -> None:
    profile = definition(["/usr/bin/python3", "-m", "pytest", "-q"], report="junit",
                         env={"PYTHONPATH": "/opt/lib"})
    assert streams(profile)
    argv = bwrap_argv(profile, "/srv/w", report="/srv/r",
                      plugin=StreamPlugin("/srv/plugin", "governor_stream_0a1b", 7))
    assert argv[argv.index("--"):] == ["--", "/usr/bin/python3", "-m", "pytest", "-p",
                                       "governor_stream_0a1b", "-q"]
    options = argv[:argv.index("--")]
    env = {options[i + 1]: options[i + 2] for i, item in enumerate(options) if item == "--setenv"}
    assert (env["GOVERNOR_STREAM_FD"], env["PYTHONPATH"]) == ("7", "/governor-stream:/opt/lib")
    assert env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1"
    binds = [(options[i + 1], options[i + 2]) for i, item in enumerate(options)
             if item == "--ro-bind"]
    assert ("/srv/plugin", "/governor-stream") in binds


def test_rule_17_4_report_profiles_that_do_not_run_pytest_themselves_do_not_stream() -> None:
    assert not streams(definition(["/bin/sh", "-c", "python3 -m pytest"], report="junit"))
    assert not streams(definition(["/usr/bin/python3", "-m", "pytest"]))  # no report


def test_rule_17_4_each_run_gets_the_plugin_under_a_name_of_its_own() -> None:
    (first, one), (second, other) = plugin_copy(), plugin_copy()
    try:
        assert one != other and first != second and one.startswith("governor_stream_")
        assert sorted(os.listdir(first)) == [f"{one}.py"]
        assert (Path(first) / f"{one}.py").read_bytes() == STREAM_PLUGIN_SOURCE.read_bytes()
        assert stat.S_IMODE(os.stat(first).st_mode) == 0o755
    finally:
        shutil.rmtree(first)
        shutil.rmtree(second)


def test_rule_17_4_the_plugin_works_under_the_pytest_of_this_environment_too(
        tmp_path: Path) -> None:
    """The sandbox runs Debian's pytest (tests/api/test_report_stream.py); the plugin is
    loaded here by the pytest this project tests with (8 or 9), the same way: `-p` with its
    directory on PYTHONPATH, autoload off, the descriptor named by GOVERNOR_STREAM_FD."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_outcomes.py").write_text(EVERY_OUTCOME)
    (tmp_path / "tests" / "test_broken_import.py").write_text("import no_such_module\n")
    directory, module = plugin_copy()
    read, write = os.pipe()
    try:
        process = subprocess.Popen(  # noqa: S603 - a fixed argv
            [sys.executable, "-m", "pytest", "-p", module, "-q", "-p", "no:cacheprovider",
             "--continue-on-collection-errors", f"--junitxml={tmp_path}/junit.xml", "tests"],
            cwd=tmp_path, pass_fds=(write,), stdout=subprocess.DEVNULL,
            env={"PATH": os.environ["PATH"], "PYTHONPATH": directory,
                 "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "GOVERNOR_STREAM_FD": str(write)})
    finally:
        os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    status = process.wait(timeout=60)
    shutil.rmtree(directory)
    report = parse_reports([("junit.xml", (tmp_path / "junit.xml").read_bytes())])
    stream = parse_stream(data)
    assert status == 1 and len(report.outcomes) == 12
    assert disagreement(stream, report.outcomes, status) is None
    assert stream.record(None)["receipt"] == report.record()["receipt"]

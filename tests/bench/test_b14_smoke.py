"""B14 reads pytest's own output: the per-module sums and the runs' closing lines are checked on
a sample of what `make test` prints (the benchmark itself runs the whole suite, so it is never
run from the suite)."""

from __future__ import annotations

from bench import b14_suite

OUTPUT = """\
============================= slowest durations ==============================
12.50s call     tests/integration/test_worker.py::test_a_run[one]
3.25s setup    tests/integration/test_worker.py::test_a_run[one]
0.25s teardown tests/integration/test_worker.py::test_a_run[one]
2.00s call     tests/unit/test_tree.py::test_ids_match_git
1520 passed, 3 deselected in 612.40s (0:10:12)
=========================== short test summary info ============================
0.50s setup    tests/unit/test_tree.py::test_ids_match_git
2 failed, 40 passed in 81.00s (0:01:21)
"""


def test_b14_sums_fixtures_and_tests_per_module_and_reads_each_run() -> None:
    modules = b14_suite.module_times(OUTPUT)
    assert modules == {"tests/integration/test_worker.py": {"fixtures": 3.5, "calls": 12.5},
                       "tests/unit/test_tree.py": {"fixtures": 0.5, "calls": 2.0}}
    assert b14_suite.legs(OUTPUT) == [
        {"summary": "1520 passed, 3 deselected", "seconds": 612.4},
        {"summary": "2 failed, 40 passed", "seconds": 81.0}]
    result = {"wall_s": 901.0, "exit_status": 0, "commit": "abc1234",
              "legs": b14_suite.legs(OUTPUT), "modules": modules}
    assert b14_suite.slowest(result, 1) == [("tests/integration/test_worker.py", 16.0, 3.5 / 16)]
    text = b14_suite.table(result)
    assert "**15 min 1 s**" in text and "| `tests/unit/test_tree.py` | 2 | 20% |" in text
    assert b14_suite.gates(result) == ["make test took 901 s (goal ≤ 900 s)"]

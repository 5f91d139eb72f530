"""rules §17.5: each tamper-scan rule finds the move it names (a true positive) and leaves alone
honest code that looks like it (a false positive it must not make)."""

from __future__ import annotations

import textwrap

import pytest

from governor.domain.review import ReviewError, accepted_findings
from governor.domain.tamper import (
    MAX_FILE_BYTES,
    MAX_FILES,
    MAX_FINDINGS,
    RULES,
    collected,
    scan,
    scan_file,
    scanned_paths,
)

PACKAGE = "calc/core.py"
TEST_FILE = "tests/test_core.py"


def rules(source: str, path: str = PACKAGE) -> list[tuple[int, str]]:
    return [(f.line, f.rule) for f in scan_file(path, textwrap.dedent(source).encode())]


def test_rule_17_5_every_rule_has_a_one_line_reason() -> None:
    assert all(reason and "\n" not in reason for reason in RULES.values())
    assert all(rule.startswith("tamper/") for rule in RULES)


def test_rule_17_5_collected_means_a_test_file_below_a_test_directory() -> None:
    assert collected("tests/test_core.py") and collected("pkg/tests/unit/core_test.py")
    assert collected("tests/conftest.py")
    assert not collected("calc/test_helpers.py")  # a test name outside the tests is code
    assert not collected("tests/helpers.py")


@pytest.mark.parametrize("line", ["import atexit", "import gc", "import ctypes.util",
                                  "from _pytest.junitxml import LogXML", "import pytest",
                                  "from unittest import mock", "import doctest",
                                  "__import__('atexit')",
                                  "importlib.import_module('pytest')"])
def test_rule_17_5_runner_import_true_positive(line: str) -> None:
    assert rules(f"import importlib\n{line}\n") == [(2, "tamper/runner-import")]


def test_rule_17_5_runner_import_false_positive() -> None:
    # The runner imported by a collected test file, and modules whose names merely resemble.
    assert rules("import pytest\nimport unittest\n", TEST_FILE) == []
    assert rules("import gcd\nimport pytest_cov_like\nfrom .atexit import x\nimport ctypesx\n"
                 ) == []


def test_rule_17_5_module_exit_true_positive() -> None:
    source = """\
    import os, sys
    REPORT = 1
    os._exit(0)
    try:
        sys.exit(0)
    finally:
        pass
    raise SystemExit(0)
    """
    assert rules(source) == [(3, "tamper/module-exit"), (5, "tamper/module-exit"),
                             (8, "tamper/module-exit")]


def test_rule_17_5_module_exit_false_positive() -> None:
    source = """\
    import sys

    def main() -> int:
        sys.exit(2)

    class Cli:
        def run(self):
            raise SystemExit(1)

    if __name__ == "__main__":
        sys.exit(main())
    """
    assert rules(source) == []


def test_rule_17_5_interpreter_patch_true_positive() -> None:
    source = """\
    import sys, builtins
    sys.modules["json"] = object()
    builtins.print = len
    sys.meta_path.insert(0, object())
    sys.path_hooks.append(len)
    setattr(builtins, "open", len)
    sys.modules.update({"x": 1})
    del sys.modules["json"]
    """
    assert [rule for _, rule in rules(source)] == ["tamper/interpreter-patch"] * 7


def test_rule_17_5_interpreter_patch_false_positive() -> None:
    source = """\
    import sys, builtins
    loaded = "json" in sys.modules
    module = sys.modules.get("json")
    names = dir(builtins)
    hooks = list(sys.meta_path)
    modules = {}
    modules["x"] = 1
    """
    assert rules(source) == []


def test_rule_17_5_constant_equality_true_positive() -> None:
    source = """\
    class Anything:
        def __eq__(self, other):
            return True
        def __ne__(self, other):
            return False
        def __hash__(self):
            return 0

    class Also:
        __eq__ = lambda self, other: True
    """
    assert rules(source) == [(2, "tamper/constant-equality"), (4, "tamper/constant-equality"),
                             (6, "tamper/constant-equality"), (10, "tamper/constant-equality")]


def test_rule_17_5_constant_equality_false_positive() -> None:
    source = """\
    class Point:
        def __eq__(self, other):
            if not isinstance(other, Point):
                return NotImplemented
            return (self.x, self.y) == (other.x, other.y)
        def __hash__(self):
            return hash((self.x, self.y))
        __ne__ = lambda self, other: not self == other

    class Unhashable:
        __hash__ = None
    """
    assert rules(source) == []
    # a test double equal to everything, in a test file, is honest (mock.ANY)
    assert rules("class Any:\n    def __eq__(self, other):\n        return True\n",
                 TEST_FILE) == []


def test_rule_17_5_frame_inspection_true_positive() -> None:
    source = """\
    import inspect, sys
    caller = sys._getframe(1)
    frames = inspect.stack()
    frame = inspect.currentframe()
    from sys import _getframe
    here = __import__("sys")._getframe(1).f_code.co_filename
    """
    assert rules(source) == [(2, "tamper/frame-inspection"), (3, "tamper/frame-inspection"),
                             (4, "tamper/frame-inspection"), (5, "tamper/frame-inspection"),
                             (6, "tamper/frame-inspection")]


def test_rule_17_5_frame_inspection_false_positive() -> None:
    source = """\
    import inspect, traceback
    signature = inspect.signature(len)
    is_class = inspect.isclass(int)
    def stack():
        return [1]
    items = stack()
    """
    assert rules(source) == []


def test_rule_17_5_runner_detection_true_positive() -> None:
    source = """\
    import os, sys
    if os.environ.get("PYTEST_CURRENT_TEST"):
        pass
    under_test = "pytest" in sys.argv[0]
    loaded = "pytest" in sys.modules
    report = os.getenv("GOVERNOR_REPORT_DIR")
    fast = sys.argv[0].endswith("py.test")
    anywhere = any("pytest" in arg for arg in __import__("sys").argv)
    """
    found = rules(source)
    assert [line for line, rule in found if rule == "tamper/runner-detection"] == [
        2, 4, 5, 6, 7, 8]
    assert (6, "tamper/report-literal") in found  # the report directory is named too


def test_rule_17_5_runner_detection_false_positive() -> None:
    source = """\
    import os, sys
    debug = os.environ.get("CALC_DEBUG") == "1"
    program = sys.argv[0]
    verbose = "--verbose" in sys.argv
    help_text = "run the tests with pytest"
    flags = [arg for arg in sys.argv if arg.startswith("--")]
    """
    assert rules(source) == []


def test_rule_17_5_report_literal_true_positive() -> None:
    source = """\
    import os
    path = os.path.join(os.environ["HOME"], "junit.xml")
    other = "/governor-report/results.xml"
    tests = "tests/test_core.py"
    """
    assert rules(source) == [(2, "tamper/report-literal"), (3, "tamper/report-literal"),
                             (4, "tamper/report-literal")]


def test_rule_17_5_report_literal_false_positive() -> None:
    source = '''\
    """Reads config.xml; see tests/ for examples (a docstring is not a literal)."""
    CONFIG = "config.xml"
    LAYOUT = "layout/main.xml"
    LABEL = "latest results"
    '''
    assert rules(source) == []
    assert rules('REPORT = "junit.xml"\n', TEST_FILE) == []


def test_rule_17_5_runner_plugin_true_positive() -> None:
    # A test module's `pytest_plugins` loads a helper as a plugin, and its plain hook passes
    # every test without running it: no import of pytest, nothing the other rules name.
    assert rules('pytest_plugins = ["zz_helper"]\n\n\ndef test_zz():\n    pass\n',
                 TEST_FILE) == [(1, "tamper/runner-plugin")]
    assert rules("def pytest_pyfunc_call(pyfuncitem):\n    return True\n",
                 "tests/zz_helper.py") == [(1, "tamper/runner-plugin")]
    source = """\
    from helpers import pytest_runtest_makereport
    import helpers as pytest_plugins_two
    pytest_collection_modifyitems = lambda items: items.clear()
    globals()["pytest_plugins"] = ["zz"]
    setattr(helpers, "pytest_pyfunc_call", lambda pyfuncitem: True)


    class Hooks:
        async def pytest_runtest_call(self, item):
            return None
    """
    assert rules(source) == [(1, "tamper/runner-plugin"), (2, "tamper/runner-plugin"),
                             (3, "tamper/runner-plugin"), (4, "tamper/runner-plugin"),
                             (5, "tamper/runner-plugin"), (9, "tamper/runner-plugin")]


def test_rule_17_5_runner_plugin_false_positive() -> None:
    # conftest.py is runner control (protected whole); a plugin module imported by its name;
    # names that merely begin alike; a docstring naming the hook.
    assert rules("def pytest_configure(config):\n    pass\n", "tests/conftest.py") == []
    source = '''\
    """Explains pytest_plugins for the reader."""
    import pytest_asyncio
    pytester_like = 1
    PYTEST_LIKE = ".pytest_cache"
    REQUIRES = ["pytest_mock", "pytest_asyncio"]


    def test_pytest_plugins_are_documented():
        assert pytest_asyncio
    '''
    assert rules(source, TEST_FILE) == []


def test_rule_17_5_unparsable_files_are_findings_never_clean() -> None:
    assert rules("def broken(:\n") == [(1, "tamper/unparsable")]
    assert [f.rule for f in scan_file(PACKAGE, b"\xff\xfe")] == ["tamper/unparsable"]
    big = b"x = 1\n" * (MAX_FILE_BYTES // 6 + 1)
    assert [f.rule for f in scan_file(PACKAGE, big)] == ["tamper/unparsable"]


def test_rule_17_5_only_changed_python_files_are_read_and_the_cost_is_bounded() -> None:
    assert scanned_paths([("a.py", "added"), ("b.py", "deleted"), ("c.txt", "modified"),
                          ("d.py", "mode-changed")]) == ["a.py", "d.py"]
    read: list[str] = []

    def reader(path: str) -> bytes:
        read.append(path)
        return b"import atexit\n"

    paths = [f"m{index:04}.py" for index in range(MAX_FILES + 3)]
    findings, more = scan(paths, reader)
    assert len(read) == MAX_FILES
    assert len(findings) == MAX_FINDINGS and more == MAX_FILES + 1 - MAX_FINDINGS
    clean, more = scan(paths, lambda path: b"x = 1\n")
    assert [(f.path, f.rule) for f in clean] == [(paths[MAX_FILES], "tamper/too-many-files")]


def test_rule_17_5_a_finding_names_path_line_rule_reason_and_a_capped_excerpt() -> None:
    source = "import atexit  # " + "x" * 300 + "\n"
    (finding,) = scan_file(PACKAGE, source.encode())
    shown = finding.as_dict()
    assert shown["id"] == "tamper/runner-import@calc/core.py:1"
    assert shown["reason"] == RULES["tamper/runner-import"]
    assert len(str(shown["excerpt"])) == 120


def test_rule_17_5_only_a_finding_of_the_proposal_can_be_accepted() -> None:
    findings = [{"id": "tamper/runner-import@calc.py:1"}, {"id": "tamper/module-exit@a.py:3"}]
    assert accepted_findings(None, findings) == []
    assert accepted_findings(["tamper/module-exit@a.py:3", "tamper/module-exit@a.py:3"],
                             findings) == ["tamper/module-exit@a.py:3"]
    with pytest.raises(ReviewError, match=r"accepted_findings: 'tamper/x@b.py:1' is not a "):
        accepted_findings(["tamper/x@b.py:1"], findings)
    with pytest.raises(ReviewError, match="accepted_findings: must be a list of finding ids"):
        accepted_findings("tamper/runner-import@calc.py:1", findings)
    # At the evidence stage no attempt was scanned: there is nothing to accept.
    with pytest.raises(ReviewError, match="is not a finding of this proposal"):
        accepted_findings(["tamper/runner-import@calc.py:1"], [])

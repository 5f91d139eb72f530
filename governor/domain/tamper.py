"""rules §17.5: the tamper scan — deterministic rules over the Python files an attempt changed,
for code that reaches into the verification machinery. Read by `ast`, never imported or run.

    RULES          rule id -> its one-line reason
    scan_file      the findings of one file's bytes
    scan           the findings of every changed `.py` file (at most MAX_FILES, each at most
                   MAX_FILE_BYTES, at most MAX_FINDINGS kept)
    tamper_check, tamper_claim   what begin injects when a profile of the contract runs code

A finding is {id, path, line, rule, reason, excerpt}; its id `<rule>@<path>:<line>` is what a
person names to accept it at the delivery review (governor/services/reviews.py).

"Collected" (a test file the runner collects, where importing the runner is honest): a file
named `test_*.py`, `*_test.py` or `conftest.py` (pytest's default `python_files`, and its
configuration files) below a directory named `tests`, `test` or `testing`. Anywhere else a test
runner's module is code under test reaching into the runner. The import and constant-equality
rules (test doubles such as `mock.ANY` are equal to everything on purpose) skip collected files;
every other rule scans them too."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from governor.domain.documents import Check, Claim

TAMPER_CHECK_ID = "tamper-free"
TAMPER_CHECK_KIND = "tamper_free"
TAMPER_CLAIM_ID = "no-evidence-tampering"
MAX_FILE_BYTES = 512 * 1024  # a larger changed .py file is a finding, never skipped
MAX_FILES = 500  # changed .py files scanned per attempt; more is one finding
MAX_FINDINGS = 50  # findings kept per attempt; the evidence says how many more
EXCERPT_CHARS = 120

RULES: dict[str, str] = {
    "tamper/runner-import": "imports a test runner or process-control module (pytest, "
                            "_pytest, unittest, doctest, atexit, ctypes, gc) outside the "
                            "test files the runner collects",
    "tamper/module-exit": "ends the process when the module is imported (sys.exit, os._exit, "
                          "exit, quit or raise SystemExit at module level)",
    "tamper/interpreter-patch": "writes into sys.modules, builtins, sys.meta_path or "
                                "sys.path_hooks, where the runner finds its own code",
    "tamper/constant-equality": "defines __eq__, __ne__ or __hash__ returning a constant: an "
                                "object equal to everything passes any assertion",
    "tamper/frame-inspection": "inspects the call stack (sys._getframe, inspect.stack, "
                               "inspect.currentframe), which can tell a test from real use",
    "tamper/runner-detection": "reads GOVERNOR_* or PYTEST_* variables, or looks for pytest "
                               "in sys.argv or sys.modules: code that behaves differently "
                               "under the test runner",
    "tamper/report-literal": "names a test report or test path (junit, a .xml report, "
                             "GOVERNOR_REPORT_DIR, tests/) outside the test files",
    "tamper/runner-plugin": "registers a pytest plugin or defines a pytest hook (a "
                            "`pytest_plugins` list, a `pytest_*` name) outside conftest.py: "
                            "code that decides how the runner collects, runs or reports tests",
    "tamper/unparsable": "a changed Python file this scan cannot read (not UTF-8, not valid "
                         "Python, or larger than the scan's cap) is not judged clean",
    "tamper/too-many-files": "more changed Python files than the scan reads; the rest are not "
                             "judged clean",
}

RUNNER_MODULES = frozenset({"pytest", "_pytest", "unittest", "doctest", "atexit", "ctypes", "gc"})
TEST_DIRECTORIES = frozenset({"tests", "test", "testing"})
_EXIT_CALLS = frozenset({"sys.exit", "os._exit", "exit", "quit", "os.abort"})
_PATCHED = ("sys.modules", "builtins", "__builtins__", "sys.meta_path", "sys.path_hooks")
_FRAMES = frozenset({"sys._getframe", "sys._current_frames", "inspect.stack",
                     "inspect.currentframe", "inspect.getouterframes", "inspect.trace"})
_RUNNER_VARIABLE = re.compile(r"^(GOVERNOR|PYTEST)_[A-Z0-9_]*$")
_RUNNER_PLACES = ("sys.argv", "sys.orig_argv", "sys.modules", "os.environ")
_REPORT_LITERAL = re.compile(
    r"junit|governor[-_]report|(^|/)(tests?|testing)/|(^|/)conftest\.py$"
    r"|(report|result|test)[^/]*\.xml$", re.IGNORECASE)
_HOOK_NAME = re.compile(r"^pytest_[A-Za-z0-9_]+$")
_CONSTANT_METHODS = frozenset({"__eq__", "__ne__", "__hash__"})
_MUTATORS = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__",
                       "__delitem__", "insert", "append", "extend", "remove"})


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    rule: str
    excerpt: str

    @property
    def id(self) -> str:
        return f"{self.rule}@{self.path}:{self.line}"

    @property
    def reason(self) -> str:
        return RULES[self.rule]

    def as_dict(self) -> dict[str, object]:
        return {"id": self.id, "path": self.path, "line": self.line, "rule": self.rule,
                "reason": self.reason, "excerpt": self.excerpt}


def collected(path: str) -> bool:
    """Whether the runner collects `path` as a test file (this module's docstring)."""
    *directories, name = path.split("/")
    test_name = (name == "conftest.py" or (name.startswith("test_") and name.endswith(".py"))
                 or name.endswith("_test.py"))
    return test_name and any(part in TEST_DIRECTORIES for part in directories)


_IMPORTERS = ("__import__", "importlib.import_module", "import_module")


def dotted(node: ast.AST) -> str | None:
    """`a.b.c` for a chain of names and attributes, else None; a module imported by a literal
    name in the chain counts as that name (`__import__("sys").argv` is `sys.argv`)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Call):
        root = imported_name(node)
        return None if root is None else ".".join([root, *reversed(parts)])
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def imported_name(node: ast.Call) -> str | None:
    """The module `__import__("x")` or `importlib.import_module("x")` names, else None."""
    if dotted(node.func) in _IMPORTERS and node.args and isinstance(node.args[0], ast.Constant) \
            and isinstance(node.args[0].value, str):
        return node.args[0].value
    return None


def _within(name: str | None, places: Iterable[str]) -> bool:
    return name is not None and any(name == place or name.startswith(place + ".")
                                    for place in places)


def _target_root(node: ast.AST) -> ast.AST:
    """What an assignment target writes into: `sys.modules` for `sys.modules["x"]`."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return node


class _Scanner:
    def __init__(self, path: str, lines: Sequence[str]) -> None:
        self.path, self.lines = path, lines
        self.test_file = collected(path)
        self.found: list[Finding] = []
        self.docstrings: set[int] = set()  # ids of docstring constants (never literals)

    def add(self, node: ast.AST, rule: str) -> None:
        line = getattr(node, "lineno", 1)
        text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        self.found.append(Finding(self.path, line, rule, text[:EXCERPT_CHARS]))

    def run(self, tree: ast.Module) -> list[Finding]:
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef
                          | ast.AsyncFunctionDef):
                body = node.body
                if body and isinstance(body[0], ast.Expr) \
                        and isinstance(body[0].value, ast.Constant):
                    self.docstrings.add(id(body[0].value))
        self._module_level(tree.body)
        for node in ast.walk(tree):
            for rule in self.RULES:
                rule(self, node)
        unique = {(f.line, f.rule): f for f in self.found}
        return [unique[key] for key in sorted(unique)]

    # tamper/module-exit: statements run at import, outside `if __name__ == "__main__"`
    def _module_level(self, body: Sequence[ast.stmt]) -> None:
        for statement in body:
            if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            if isinstance(statement, ast.If) and _main_guard(statement.test):
                self._module_level(statement.orelse)
                continue
            if isinstance(statement, ast.Raise) and statement.exc is not None:
                raised = statement.exc.func if isinstance(statement.exc, ast.Call) \
                    else statement.exc
                if dotted(raised) == "SystemExit":
                    self.add(statement, "tamper/module-exit")
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call) \
                    and dotted(statement.value.func) in _EXIT_CALLS:
                self.add(statement, "tamper/module-exit")
            for name in ("body", "orelse", "finalbody"):
                nested = getattr(statement, name, None)
                if isinstance(nested, list):
                    self._module_level(nested)
            for handler in getattr(statement, "handlers", []):
                self._module_level(handler.body)

    def _imports(self, node: ast.AST) -> None:
        if self.test_file:
            return
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Call) and (imported := imported_name(node)) is not None:
            names = [imported]
        if any(name.split(".")[0] in RUNNER_MODULES for name in names):
            self.add(node, "tamper/runner-import")

    def _patches(self, node: ast.AST) -> None:
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        written = [dotted(_target_root(target)) for target in targets]
        # `builtins.print = …` writes an attribute of builtins; `sys.modules = …` a place.
        if any(_within(name, _PATCHED) for name in written):
            self.add(node, "tamper/interpreter-patch")
            return
        if isinstance(node, ast.Call) and _patching_call(node):
            self.add(node, "tamper/interpreter-patch")

    def _constant_equality(self, node: ast.AST) -> None:
        if self.test_file or not isinstance(node, ast.ClassDef):
            return
        for item in node.body:
            if _constant_method(item):
                self.add(item, "tamper/constant-equality")

    def _frames(self, node: ast.AST) -> None:
        names = [dotted(node)] if isinstance(node, ast.Attribute) else [
            f"{node.module}.{alias.name}" for alias in node.names
        ] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
        if any(name in _FRAMES for name in names):
            self.add(node, "tamper/frame-inspection")

    def _runner_detection(self, node: ast.AST) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and _RUNNER_VARIABLE.match(node.value):
            self.add(node, "tamper/runner-detection")
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_mentions_pytest(operand) for operand in operands) \
                    and any(_reads_place(operand) for operand in operands):
                self.add(node, "tamper/runner-detection")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("startswith", "endswith", "find", "index", "count") \
                and _reads_place(node.func.value) and any(_mentions_pytest(a)
                                                         for a in node.args):
            self.add(node, "tamper/runner-detection")
        elif isinstance(node, ast.GeneratorExp | ast.ListComp | ast.SetComp | ast.DictComp) \
                and _mentions_pytest(node) and _reads_place(node):
            # `any("pytest" in arg for arg in sys.argv)`: the place is read by the loop
            self.add(node, "tamper/runner-detection")

    def _runner_plugin(self, node: ast.AST) -> None:
        """A test module's `pytest_plugins` makes pytest import those modules as plugins, and a
        plugin's `pytest_*` functions are hooks with no import of pytest: `def
        pytest_pyfunc_call(pyfuncitem): return True` passes every test without running it.
        conftest.py is runner control (protected as a whole, rules §17.3), not scanned here."""
        if self.path.rsplit("/", 1)[-1] == "conftest.py":
            return
        names: list[str] = []
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names = [node.name]
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names = [node.id]
        elif isinstance(node, ast.ImportFrom):  # `import pytest_asyncio` binds a module: honest
            names = [alias.asname or alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.asname for alias in node.names if alias.asname]
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call) \
                and dotted(node.value.func) in ("globals", "vars", "locals") \
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            names = [node.slice.value]  # `globals()["pytest_plugins"] = …`
        elif isinstance(node, ast.Call) and dotted(node.func) == "setattr" \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                and isinstance(node.args[1].value, str):
            names = [node.args[1].value]  # `setattr(module, "pytest_pyfunc_call", …)`
        if any(_HOOK_NAME.match(name) for name in names):
            self.add(node, "tamper/runner-plugin")

    def _report_literals(self, node: ast.AST) -> None:
        if self.test_file or not isinstance(node, ast.Constant) \
                or not isinstance(node.value, str) or id(node) in self.docstrings:
            return
        if len(node.value) <= 4096 and _REPORT_LITERAL.search(node.value):
            self.add(node, "tamper/report-literal")

    RULES: tuple[Callable[[_Scanner, ast.AST], None], ...] = (
        _imports, _patches, _constant_equality, _frames, _runner_detection, _runner_plugin,
        _report_literals)


def _patching_call(node: ast.Call) -> bool:
    """`setattr(builtins, …)`, `sys.modules.update(…)`, `sys.meta_path.insert(…)` and alike."""
    if dotted(node.func) in ("setattr", "delattr"):
        return bool(node.args) and _within(dotted(node.args[0]), _PATCHED)
    return isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS \
        and _within(dotted(node.func.value), _PATCHED)


def _constant_method(item: ast.stmt) -> bool:
    """`def __eq__(…): return True`, or `__eq__ = lambda self, other: True`."""
    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
        return item.name in _CONSTANT_METHODS and _returns_constant(item)
    return isinstance(item, ast.Assign) and isinstance(item.value, ast.Lambda) \
        and any(isinstance(t, ast.Name) and t.id in _CONSTANT_METHODS for t in item.targets) \
        and _is_constant(item.value.body)


def _main_guard(test: ast.expr) -> bool:
    """`if __name__ == "__main__":` (either way round)."""
    if not isinstance(test, ast.Compare) or len(test.ops) != 1 \
            or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides) and any(
        isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)


def _is_constant(node: ast.AST | None) -> bool:
    """A literal other than NotImplemented (which defers to the other operand: honest)."""
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    return isinstance(node, ast.Constant) and node.value is not None


def _own_returns(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.Return]:
    """The function's own return statements (not those of functions or classes inside it)."""
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        if isinstance(node, ast.Return):
            yield node
        pending.extend(ast.iter_child_nodes(node))


def _returns_constant(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Every return of the method returns the same literal."""
    values = [node.value for node in _own_returns(function)]
    return bool(values) and all(_is_constant(value) for value in values) and len(
        {ast.dump(value) for value in values if value is not None}) == 1


def _mentions_pytest(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Constant) and isinstance(n.value, str)
               and ("pytest" in n.value.lower() or "py.test" in n.value.lower())
               for n in ast.walk(node))


def _reads_place(node: ast.AST) -> bool:
    return any(_within(dotted(n), _RUNNER_PLACES) for n in ast.walk(node)
               if isinstance(n, ast.Attribute))


def scan_file(path: str, data: bytes) -> list[Finding]:
    """The findings of one Python file's bytes, in line order; one that cannot be read is one
    `tamper/unparsable` finding at line 1."""
    if len(data) > MAX_FILE_BYTES:
        return [Finding(path, 1, "tamper/unparsable",
                        f"{len(data)} bytes; the scan reads at most {MAX_FILE_BYTES}")]
    try:
        text = data.decode("utf-8")
        tree = ast.parse(text, filename=path)
    except (UnicodeDecodeError, SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        line = getattr(exc, "lineno", None) or 1
        return [Finding(path, line, "tamper/unparsable",
                        f"{type(exc).__name__}: {exc}"[:EXCERPT_CHARS])]
    return _Scanner(path, text.splitlines()).run(tree)


def scanned_paths(changed: Iterable[tuple[str, str]]) -> list[str]:
    """The changed paths the scan reads: `.py` files added, modified or whose mode changed."""
    return sorted((path for path, kind in changed if kind != "deleted" and path.endswith(".py")),
                  key=lambda p: p.encode())


def scan(paths: Sequence[str], read: Callable[[str], bytes | str]
         ) -> tuple[list[Finding], int]:
    """The findings in `paths` (each read by `read`: its bytes, or why it cannot be read, a
    `tamper/unparsable` finding; at most MAX_FILES of them), at most MAX_FINDINGS kept; with
    the number of findings left out."""
    findings: list[Finding] = []
    for path in paths[:MAX_FILES]:
        data = read(path)
        findings += (scan_file(path, data) if isinstance(data, bytes) else
                     [Finding(path, 1, "tamper/unparsable", data[:EXCERPT_CHARS])])
    if len(paths) > MAX_FILES:
        findings.append(Finding(paths[MAX_FILES], 1, "tamper/too-many-files",
                                f"{len(paths)} changed Python files; {MAX_FILES} were scanned"))
    return findings[:MAX_FINDINGS], max(0, len(findings) - MAX_FINDINGS)


def findings_text(findings: Sequence[dict[str, object]], more: int = 0) -> str:
    """The findings as evidence and repair texts name them: path:line, rule and reason."""
    listed = "; ".join(f"{f['path']}:{f['line']} {f['rule']} ({f['reason']}): "
                       f"{f['excerpt']}" for f in findings)
    return listed + (f"; and {more} more" if more else "")


def tamper_check() -> Check:
    return {"id": TAMPER_CHECK_ID, "kind": TAMPER_CHECK_KIND}


def tamper_claim() -> Claim:
    return {"id": TAMPER_CLAIM_ID,
            "statement": "The changed Python files do not reach into the verification "
                         "machinery (the runner, its report, the interpreter's import "
                         "system), except findings a person accepted.",
            "importance": "critical", "verification": "deterministic",
            "checkIds": [TAMPER_CHECK_ID], "minimumIndependentSources": 1}

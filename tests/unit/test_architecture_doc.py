"""docs/architecture.md says true things about where the code is: its "Where things are" table
names every module of governor/, reviews/ and verification/ (migrations and package `__init__`
files aside) exactly once, and every module, and every function or class it names beside a
module, exists."""

from __future__ import annotations

import ast
import re
from collections import Counter
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = ("governor", "reviews", "verification")
CODE = r"`([^`\n]+)`"
PATH = re.compile(r"[\w./-]+\.py")
# A module and what it names: "`path.py` `name`", or "`path.py` (`name`, `name` and `name`)".
PAIRED = re.compile(r"`(?P<path>[\w./-]+\.py)`(?: +(?P<one>`[^`\n]+`)|"
                    r" \((?P<many>`[^`\n]+`(?:(?:, | and )`[^`\n]+`)*)\))")
DOTTED = re.compile(r"(?:governor|reviews|verification)(?:\.\w+)+")


def modules() -> list[str]:
    return sorted(path.relative_to(ROOT).as_posix() for package in PACKAGES
                  for path in (ROOT / package).rglob("*.py")
                  if "migrations" not in path.parts and path.name != "__init__.py")


def where_things_are() -> str:
    text = DOC.read_text()
    start = text.index("## Where things are")
    return text[start:text.index("\n## ", start + 1)]


def resolve(path: str) -> Path | None:
    """A module as the doc writes it: from the repository's root, or within `governor/` (as
    `services/trees.py`)."""
    for candidate in (ROOT / path, ROOT / "governor" / path):
        if candidate.is_file():
            return candidate
    return None


@cache
def defined(module: Path) -> dict[str, set[str]]:
    """The names a module defines at its top (functions, classes, assignments), each with the
    names its class defines."""
    names: dict[str, set[str]] = {}
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names[node.name] = set()
        elif isinstance(node, ast.ClassDef):
            names[node.name] = {part.name for part in node.body
                                if isinstance(part, ast.FunctionDef | ast.AsyncFunctionDef)} | {
                target.id for part in node.body if isinstance(part, ast.Assign | ast.AnnAssign)
                for target in (part.targets if isinstance(part, ast.Assign) else [part.target])
                if isinstance(target, ast.Name)}
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        names[name.id] = set()
    return names


def exists(module: Path, name: str) -> bool:
    """Whether `name` (`f`, `f(arguments)`, `Class.method`) is defined in `module`."""
    parts = name.split("(")[0].split(".")
    names = defined(module)
    return parts[0] in names and (len(parts) == 1 or (len(parts) == 2
                                                        and parts[1] in names[parts[0]]))


def test_the_table_names_every_module_exactly_once() -> None:
    named = Counter(path for code in re.findall(CODE, where_things_are())
                    for path in PATH.findall(code) if path.startswith(PACKAGES))
    assert [module for module in modules() if module not in named] == []
    assert [path for path, count in named.items() if count > 1] == []
    assert [path for path in named if path not in modules()] == []


def test_every_module_the_page_names_exists() -> None:
    missing = [code for code in re.findall(CODE, DOC.read_text())
               if PATH.fullmatch(code) and resolve(code) is None
               and not any(module.endswith(f"/{code}") for module in modules())]
    assert missing == []


def test_every_name_beside_a_module_is_defined_there() -> None:
    wrong = []
    for match in PAIRED.finditer(DOC.read_text()):
        module = resolve(match["path"])
        if module is None:
            continue  # a bare file name (`models.py`): the test above holds it
        for name in re.findall(CODE, match["one"] or match["many"]):
            if re.fullmatch(r"[A-Za-z_][\w.]*(\(.*\))?", name) and not exists(module, name):
                wrong.append(f"{match['path']} {name}")
    assert wrong == []


def test_every_dotted_name_the_page_gives_exists() -> None:
    """`governor.domain.review.decide`: the longest prefix that is a module, then what it
    defines."""
    wrong = []
    for code in re.findall(CODE, DOC.read_text()):
        dotted = DOTTED.match(code)
        if dotted is None or PATH.fullmatch(code):
            continue
        parts = dotted[0].split(".")
        for end in range(len(parts), 0, -1):
            base = ROOT.joinpath(*parts[:end])
            module = next((path for path in (base.with_suffix(".py"), base / "__init__.py")
                           if path.is_file()), None)
            if module is not None:
                break
        rest = ".".join(parts[end:])
        if module is None or (rest and not exists(module, rest)):
            wrong.append(code)
    assert wrong == []

"""docs/security.md names the test that holds each boundary: every test it names exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CITED = re.compile(r"`(tests/[\w/]+\.py)::(\w+)")


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_every_test_the_security_page_names_exists() -> None:
    text = (ROOT / "docs" / "security.md").read_text()
    cited = CITED.findall(text)
    assert len(cited) > 50
    missing = [f"{path}::{name}" for path, name in cited
               if not (ROOT / path).is_file() or name not in _test_names(ROOT / path)]
    assert missing == []


def test_every_boundary_row_names_a_test() -> None:
    rows = [line for line in (ROOT / "docs" / "security.md").read_text().splitlines()
            if line.startswith("| ") and not line.startswith("| boundary")]
    assert rows
    assert [row for row in rows if "tests/" not in row and "clients/" not in row] == []

"""B1's oracle judges the true outcome on its own: it must not share code with the governor it
judges (bench/oracle.py)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ORACLE = ROOT / "bench" / "oracle.py"
GOVERNOR_PACKAGES = ("governor", "reviews", "verification", "django", "tests")


def _imported(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add("." * node.level + (node.module or ""))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id == "__import__"):
            names.add("__import__")
        elif (isinstance(node, ast.Attribute) and node.attr == "import_module"):
            names.add("importlib.import_module")
    return names


def test_the_oracle_imports_only_the_standard_library() -> None:
    imported = _imported(ast.parse(ORACLE.read_text()))
    assert imported, "the oracle should at least import something from the standard library"
    for name in imported:
        top = name.lstrip(".").split(".")[0]
        assert not name.startswith("."), f"relative import {name!r}"
        assert top not in GOVERNOR_PACKAGES and top != "bench", f"the oracle imports {name!r}"
        assert name not in ("__import__", "importlib.import_module"), "dynamic import"
        assert top in sys.stdlib_module_names, f"{name!r} is not in the standard library"


def test_importing_the_oracle_loads_no_governor_module() -> None:
    code = ("import json, sys\nimport bench.oracle\n"
            "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True, env={"PATH": "/usr/bin:/bin"}).stdout
    loaded = json.loads(out)
    leaked = [name for name in loaded if name.split(".")[0] in GOVERNOR_PACKAGES]
    assert not leaked, leaked

"""`python -m bench [names...]`: run benchmarks, record them, publish their tables.

A benchmark is a module `bench/bN_*.py` exposing `NAME` ("B2"), `run(args) -> dict` (JSON data),
`table(result) -> str` (Markdown) and optionally `gates(result) -> list[str]` (failed goals) and
`add_arguments(parser)`. Each `run` happens in its own fresh interpreter. Results are merged into
bench/results/latest.json; each table replaces the text between `<!-- bench:NAME -->` and
`<!-- /bench:NAME -->` in docs/benchmarks.md. Benchmarks with a chart (`bench/charts.py`: B1, B3,
B7) have it redrawn from latest.json into docs/img/ after they ran (`--charts` redraws them alone).
Exit status 1 when a gate fails or a run crashes.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import pkgutil
import platform
import re
import subprocess
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

import bench
from bench.common import SERVED_LOG, isolated, progress

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "latest.json"
SERVED = ROOT / "bench" / "results" / "served.log"  # the served stack's log lines of the last run
DOCS = ROOT / "docs" / "benchmarks.md"


def discover() -> list[ModuleType]:
    names = sorted((m.name for m in pkgutil.iter_modules(bench.__path__)
                    if re.fullmatch(r"b\d+_\w+", m.name)), key=lambda n: int(n[1:].split("_")[0]))
    modules = [importlib.import_module(f"bench.{name}") for name in names]
    return [m for m in modules if hasattr(m, "NAME")]  # b1_harness runs alone (its docstring)


def select(modules: list[ModuleType], names: list[str]) -> list[ModuleType]:
    if not names:
        return modules
    chosen = []
    for name in names:
        key = name.lower()
        matches = [m for m in modules
                   if key in (m.NAME.lower(), m.__name__.rsplit(".", 1)[1])]
        if not matches:
            known = ", ".join(m.NAME for m in modules)
            raise SystemExit(f"unknown benchmark {name!r} (known: {known})")
        chosen += [m for m in matches if m not in chosen]
    return chosen


def context() -> dict[str, Any]:
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(terse=True),
    }


def save_result(name: str, result: dict[str, Any]) -> None:
    everything = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    everything[name] = result
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(everything, indent=2, sort_keys=True) + "\n")


def publish(name: str, text: str) -> None:
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    doc = DOCS.read_text() if DOCS.exists() else "# Benchmarks\n"
    block = f"{start}\n{text.strip()}\n{end}"
    if start in doc and end in doc:
        doc = doc[:doc.index(start)] + block + doc[doc.index(end) + len(end):]
    else:
        doc = doc.rstrip("\n") + f"\n\n## {name}\n\n{block}\n"
    DOCS.write_text(doc)


def draw_charts(names: list[str]) -> None:
    from bench import charts

    everything = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    for path in charts.draw(everything, names):
        progress(f"drew {path.relative_to(ROOT)}")


def main(argv: list[str] | None = None) -> int:
    modules = discover()
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*",
                        help=f"benchmarks to run (default: all of {[m.NAME for m in modules]})")
    parser.add_argument("--postgres", metavar="URL",
                        help="PostgreSQL server to use as well (default: $BENCH_DATABASE_URL, else "
                             "127.0.0.1:5432 if it answers); a bench_governor database is created "
                             "and dropped on it")
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions (default 5)")
    parser.add_argument("--profile", action="store_true",
                        help="also print a cProfile of one extra repetition to stderr")
    parser.add_argument("--charts", action="store_true",
                        help="run nothing: redraw the charts of the named benchmarks (default "
                             "all) from bench/results/latest.json")
    for module in modules:
        if hasattr(module, "add_arguments"):
            module.add_arguments(parser)
    args = parser.parse_args(argv)
    chosen = select(modules, args.names)
    if args.charts:
        draw_charts([m.NAME for m in chosen])
        return 0

    problems: list[str] = []
    ran: list[str] = []
    SERVED.parent.mkdir(parents=True, exist_ok=True)
    SERVED.write_text("")
    os.environ[SERVED_LOG] = str(SERVED)  # the benchmarks' interpreters inherit it
    progress(f"the served stack's log lines go to {SERVED.relative_to(ROOT)}")
    for module in chosen:
        progress(f"== {module.NAME} ({module.__name__}) ==")
        try:
            result = isolated(module.run, args)
        except Exception:  # noqa: BLE001 - report it, go on with the others, fail at the end
            progress(traceback.format_exc())
            problems.append(f"{module.NAME}: crashed")
            continue
        result["context"] = context()
        save_result(module.NAME, result)
        ran.append(module.NAME)
        ctx = result["context"]
        publish(module.NAME, module.table(result)
                + f"\n\n_Run {ctx['date']} at {ctx['commit']}, {ctx['cpus']} CPUs, "
                  f"Python {ctx['python']}._")
        failed = module.gates(result) if hasattr(module, "gates") else []
        progress(module.table(result))
        for failure in failed:
            progress(f"GATE FAILED {module.NAME}: {failure}")
        problems += [f"{module.NAME}: {failure}" for failure in failed]
    progress(f"wrote {RESULTS.relative_to(ROOT)} and {DOCS.relative_to(ROOT)}; the served "
             f"stack's log is {SERVED.relative_to(ROOT)}")
    try:
        draw_charts(ran)
    except Exception:  # noqa: BLE001 - a chart that cannot be drawn is a failure, reported
        progress(traceback.format_exc())
        problems.append("charts: crashed")
    if problems:
        progress("FAILED: " + "; ".join(problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

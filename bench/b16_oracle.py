"""B16. Held-out expected outputs: what judging them outside the sandbox costs (docs/benchmarks.md).

The worked example's adapter (docs/examples/heldout/suite/adapter.py) answers `--b15-cases`
cases (1,000 by default: `median`, `mean`, `clamp`, `word_count` of the example's `textstats`
package on seeded random inputs) in the real sandbox, the suite's files mounted read-only at
`/governor-heldout` as for a held-out run, two ways, arms taking turns run by run:

- **discarded**: `run_sandboxed` with the cases' `{id, input}` lines on stdin and nothing kept of
  stdout but what every run keeps (its byte count, hash and tail): the adapter run as any
  verifier, its answers thrown away;
- **oracle**: what an oracle run adds (rules §18.3) — the loaded cases read (`stored_cases`),
  the stdin lines made from them (`oracle_stdin`), stdout kept whole (`keep_stdout`), read
  strictly (`parse_oracle_output`) and compared with the expected values outside the sandbox
  (`judge_outputs`); every case must match.

Ratio = median(oracle) / median(discarded). Goal: ≤ 1.2×. A gate.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import markdown_table, median, progress

NAME = "B16"
CASES = 1_000
RUNS = 15
WARMUP = 2
SEED = 15
GOAL_RATIO = 1.2
ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "examples" / "heldout"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--b15-cases", type=int, default=CASES,
                        help=f"B16: cases the adapter answers (default {CASES:,})")
    parser.add_argument("--b15-runs", type=int, default=RUNS,
                        help=f"B16: runs of each arm (default {RUNS})")


def run(args: argparse.Namespace) -> dict[str, Any]:
    return measure(getattr(args, "b15_cases", CASES), getattr(args, "b15_runs", RUNS))


def _package() -> Any:
    spec = importlib.util.spec_from_file_location("b15_textstats",
                                                  EXAMPLE / "textstats" / "core.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cases_text(count: int, seed: int = SEED) -> bytes:
    """`count` cases.jsonl lines, their expected values computed by the example's package."""
    import json

    package, rng = _package(), random.Random(seed)
    lines = []
    for index in range(count):
        function = ("median", "mean", "clamp", "word_count")[index % 4]
        if function in ("median", "mean"):
            args: list[Any] = [[rng.randint(-1000, 1000) for _ in range(rng.randint(1, 12))]]
        elif function == "clamp":
            args = [rng.randint(-50, 50), -10, 10]
        else:
            args = [" ".join("w" * rng.randint(1, 6) for _ in range(rng.randint(0, 9)))]
        expected = getattr(package, function)(*args)
        lines.append(json.dumps({"id": f"case-{index}", "input": {"function": function,
                                                                    "args": args},
                                 "expected": expected, "compare": "number",
                                 "tolerance": 1e-9}))
    return ("\n".join(lines) + "\n").encode()


def measure(count: int, runs: int) -> dict[str, Any]:
    from governor.domain.heldout import (
        MAX_ORACLE_OUTPUT_BYTES,
        judge_outputs,
        oracle_stdin,
        parse_cases,
        parse_oracle_output,
        stored_cases,
    )
    from governor.domain.profiles import profile_definition, validate_profile
    from governor.domain.workspace import identity_at
    from verification.sandbox import run_sandboxed

    definition = profile_definition(validate_profile({
        "id": "b16-outputs", "description": "B16: the worked example's adapter",
        "argv": ["/usr/bin/python3", "/governor-heldout/adapter.py", "textstats"],
        "heldout": "b15", "oracle": "b15", "timeout_ms": 120_000}))
    data = cases_text(count)
    workspace = tempfile.mkdtemp(prefix="governor-b15-workspace-")
    suite = tempfile.mkdtemp(prefix="governor-b15-suite-")
    try:
        shutil.copytree(EXAMPLE / "textstats", Path(workspace) / "textstats")
        shutil.copyfile(EXAMPLE / "suite" / "adapter.py", Path(suite) / "adapter.py")
        for directory in (workspace, suite, Path(workspace) / "textstats"):
            os.chmod(directory, 0o755)  # noqa: S103 - the sandbox user reads them, by design
        identity = identity_at(workspace)
        stdin = oracle_stdin(parse_cases(data))

        def discarded() -> float:
            start = time.perf_counter()
            result = run_sandboxed(definition, workspace, identity, heldout=suite, stdin=stdin)
            elapsed = (time.perf_counter() - start) * 1000
            if not result.passed:
                raise RuntimeError(f"the adapter failed: {result.failure_kind} {result.detail}")
            return elapsed

        def oracle() -> float:
            start = time.perf_counter()
            cases = stored_cases(data)  # as the worker reads a loaded suite's cases
            result = run_sandboxed(definition, workspace, identity, heldout=suite,
                                   stdin=oracle_stdin(cases),
                                   keep_stdout=MAX_ORACLE_OUTPUT_BYTES)
            outputs = parse_oracle_output(result.output or b"", [case.id for case in cases])
            verdict = judge_outputs(cases, outputs)
            elapsed = (time.perf_counter() - start) * 1000
            if not result.passed or verdict.failing:
                raise RuntimeError(f"the oracle run did not match: {verdict.failing[:5]}")
            return elapsed

        for _ in range(WARMUP):
            discarded()
            oracle()
        times: dict[str, list[float]] = {"discarded": [], "oracle": []}
        for index in range(runs):
            arms = (("discarded", discarded), ("oracle", oracle))
            for name, arm in arms if index % 2 == 0 else arms[::-1]:
                times[name].append(round(arm(), 2))
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
        shutil.rmtree(suite, ignore_errors=True)
    medians = {name: round(median(values), 2) for name, values in times.items()}
    ratio = round(medians["oracle"] / medians["discarded"], 3)
    progress(f"[B16] {count:,} cases, {runs} runs each: discarded {medians['discarded']:.0f} ms, "
             f"oracle {medians['oracle']:.0f} ms ({ratio:.2f}x)")
    return {"params": {"cases": count, "runs": runs, "warmup": WARMUP, "seed": SEED,
                       "stdin_bytes": len(stdin), "as_root": os.geteuid() == 0},
            "discarded_ms": medians["discarded"], "oracle_ms": medians["oracle"],
            "ratio": ratio, "times_ms": times}


def table(result: dict[str, Any]) -> str:
    p = result["params"]
    rows = [["adapter, output discarded", f"{result['discarded_ms']:.0f}"],
            ["oracle run: output kept, read and compared", f"{result['oracle_ms']:.0f}"],
            ["ratio", f"**{result['ratio']:.2f}×**"]]
    note = (f"{p['cases']:,} cases ({p['stdin_bytes']:,} bytes of stdin) answered by the worked "
            f"example's adapter in the sandbox, the suite mounted at `/governor-heldout`; "
            f"medians of {p['runs']} runs per arm after {p['warmup']} warm-up runs, arms "
            f"alternating. Goal: ≤ {GOAL_RATIO:g}×.")
    return markdown_table(["arm", "median ms"], rows) + "\n\n" + note


def gates(result: dict[str, Any]) -> list[str]:
    if result["ratio"] > GOAL_RATIO:
        return [f"an oracle run of {result['params']['cases']:,} cases takes "
                f"{result['ratio']:.2f}x the adapter with its output discarded "
                f"(> {GOAL_RATIO:g}x)"]
    return []

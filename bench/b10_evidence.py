"""B10. Evidence integrity cost (rules §14).

Three measurements, each a ratio or a difference in the same run:

- **Scope checks at turn-stop.** Trees of 1k, 10k and 50k files (B7's realistic mix). Two
  sessions on the same workspace, each with a contract of the same file check (which fails, so
  every turn-stop is a repair attempt): one with a `changes_within` and an `unchanged` check and
  the injected `protected-paths` check (its project protects `tests/**`), one without them. The
  arms alternate attempt by attempt; one file changes before each, so every attempt hashes a new
  tree and computes its change list. Server time of `attempt_record` (what a turn-stop costs),
  medians. Goal: ≤ 1.2×.
- **Baselines at begin.** The same trees: `contract_begin` of 20 checks (file, JSON, tool,
  scope) with its baseline evaluation, against the same begin with every baseline `unknown`
  (what begin did before), each on a new session, arms alternating, medians of 6. Goal: ≤ 1.3×.
- **A baseline run before certification.** A served governor with one worker: a contract naming
  a pytest report profile activates (its baseline run is queued on the start tree), the agent
  works 5 s, asks for its own run and verifies; against the same with the profile's `report`
  off (no baseline run). Wall time from begin to certification, the difference. Goal: 0 (the
  baseline runs while the agent works).

Run in a fresh interpreter with its own var directory and SQLite database (the first two) and
against a served stack (the third).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.b7_tree_hash import build_tree, default_dir
from bench.common import django_setup, isolated, markdown_table, median, progress
from bench.live import broker_for, governor, load_profiles, set_project

NAME = "B10"
SIZES = (1_000, 10_000, 50_000)
ATTEMPTS = 9  # the contracts' budget is 10: every attempt but the last is a repair
GOAL_SCOPE_RATIO = 1.2
GOAL_BEGIN_RATIO = 1.3
GOAL_BASELINE_EXTRA_S = 0.5  # "0": within this of it (a run's own start-up noise)
WORK_SECONDS = 5.0
LIFECYCLES = 4  # per arm; the first is left out (a warm-up)
REDIS_DB = 9


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--b10-sizes", default=",".join(map(str, SIZES)),
                        help="B10: tree sizes (files)")
    parser.add_argument("--b10-attempts", type=int, default=ATTEMPTS,
                        help=f"B10: timed turn-stops per arm (default {ATTEMPTS})")
    parser.add_argument("--b10-work", type=float, default=WORK_SECONDS,
                        help=f"B10: seconds the agent works after activation (default "
                             f"{WORK_SECONDS:g})")


def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = [int(size) for size in str(getattr(args, "b10_sizes", "")).split(",") if size]
    attempts = max(1, min(ATTEMPTS, getattr(args, "b10_attempts", ATTEMPTS)))
    return measure(sizes, attempts, getattr(args, "b10_work", WORK_SECONDS), LIFECYCLES,
                   default_dir())


def measure(sizes: list[int], attempts: int, work_seconds: float, lifecycles: int,
            directory: str, broker: str | None = None) -> dict[str, Any]:
    scratch = tempfile.mkdtemp(prefix="governor-b10-", dir=directory)
    try:
        result: dict[str, Any] = isolated(
            _in_process, sizes, attempts, scratch,
            env={"GOVERNOR_VAR_DIR": f"{scratch}/var",
                 "DATABASE_URL": f"sqlite:///{scratch}/governor.sqlite3",
                 "GOVERNOR_BROKER_URL": "memory://"})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    result["baseline_run"] = _baseline_run(work_seconds, lifecycles, broker)
    return result


# --- in process: turn-stop and begin ------------------------------------------------------------


def _in_process(sizes: list[int], attempts: int, scratch: str) -> dict[str, Any]:
    django_setup()
    return {"attempts": attempts,
            "sizes": {str(files): _size(files, attempts, Path(scratch) / f"tree-{files}")
                      for files in sizes}}


def _twenty_checks() -> list[dict[str, Any]]:
    checks: list[dict[str, Any]] = []
    for index in range(6):
        checks.append({"id": f"file-{index}", "kind": "file_contains", "path": "README.md",
                       "text": f"## Part {index}"})
    checks += [{"id": "json-name", "kind": "json_equals", "path": "package.json",
                "pointer": "/name", "value": "tool"},
               {"id": "json-version", "kind": "json_equals", "path": "package.json",
                "pointer": "/version", "value": "2.0.0"}]
    for index in range(6):
        checks.append({"id": f"tool-{index}", "kind": "tool_succeeded", "tool": f"tool_{index}"})
    checks += [{"id": "no-push", "kind": "tool_not_called", "tool": "git_push"},
               {"id": "no-errors", "kind": "no_tool_errors"},
               {"id": "readme-exists", "kind": "file_exists", "path": "README.md"},
               {"id": "old-gone", "kind": "file_absent", "path": "OLD.md"},
               {"id": "scope", "kind": "changes_within", "paths": ["README.md", "package.json"]},
               {"id": "untouched", "kind": "unchanged", "paths": ["pkg_1/**"]}]
    return checks


def _body(checks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"objective": "B10", "max_attempts": 10, "checks": checks, "claims": [
        {"id": "done", "statement": "the work is done", "importance": "critical",
         "verification": "deterministic", "check_ids": [checks[0]["id"]]},
        *[{"id": f"c-{check['id']}", "statement": "part", "importance": "minor",
           "verification": "deterministic", "check_ids": [check["id"]]} for check in checks[1:]]]}


def _size(files: int, attempts: int, base: Path) -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    from governor.models import Project, Session
    from governor.services import contracts
    from governor.services.contracts import attempt_record, contract_begin
    from governor.services.sessions import session_create
    from governor.services.tokens import token_create

    root = base / "tree"
    root.mkdir(parents=True)
    build_tree(root, files)
    (root / "README.md").write_text("# Tool\n")
    (root / "package.json").write_text(json.dumps({"name": "tool", "version": "1.0.0"}))
    owner = get_user_model().objects.create_user(f"b10-{files}")

    def project(slug: str, protected: list[str]) -> Any:
        made = Project.objects.create(slug=slug, name=slug, review_mode="off", max_checks=30,
                                      max_attempts=10, workspace_roots=[str(base)],
                                      protected_paths=protected, tree_max_files=100_000,
                                      tree_max_bytes=1024 ** 4)
        return token_create(project=made, name=slug, owner=owner)[0]

    def session(token: Any) -> Session:
        return session_create(token=token, workspace={"kind": "path", "path": str(root)})[0]

    scoped_token = project(f"b10-scoped-{files}", ["tests/**", "**/conftest.py"])
    plain_token = project(f"b10-plain-{files}", [])
    failing = {"id": "readme-install", "kind": "file_contains", "path": "README.md",
               "text": "## Install"}
    scope = [{"id": "scope", "kind": "changes_within", "paths": ["README.md", "pkg_*/**"]},
             {"id": "untouched", "kind": "unchanged", "paths": ["package.json"]}]
    tokens = {"scoped": scoped_token, "plain": plain_token}
    arms = {arm: session(token) for arm, token in tokens.items()}
    contract_begin(session=arms["scoped"], token=scoped_token, kind="general",
                   body=_body([failing, *scope]))
    contract_begin(session=arms["plain"], token=plain_token, kind="general",
                   body=_body([failing]))
    times: dict[str, list[float]] = {"scoped": [], "plain": []}
    changed = root / "README.md"
    for index in range(attempts):
        order = ("scoped", "plain") if index % 2 == 0 else ("plain", "scoped")
        changed.write_text(f"# Tool\n\nrevision {index}\n")  # a new tree for both arms
        for arm in order:
            start = time.perf_counter()
            outcome = attempt_record(session=arms[arm], token=tokens[arm], trigger="turn-stop")
            times[arm].append(round((time.perf_counter() - start) * 1000, 2))
            if outcome.decision != "repair":
                raise RuntimeError(f"B10 {arm} attempt {index + 1}: {outcome.decision}")
    scope_ratio = median(times["scoped"]) / median(times["plain"])

    # Begin with the baseline evaluation, and the same begin with the evaluation replaced by
    # "unknown" for every check (what begin did before it), each on a new session: arms
    # alternate.
    evaluation = contracts._baselines

    def no_baselines(session: Any, state: Any, proposal: Any,
                     tree: Any) -> tuple[dict[str, str], None]:
        return {str(check["id"]): "unknown" for check in proposal.checks}, None

    begins: dict[str, list[float]] = {"with": [], "without": []}
    try:
        for index in range(6):
            for arm in (("with", "without") if index % 2 == 0 else ("without", "with")):
                contracts._baselines = (  # type: ignore[assignment]
                    evaluation if arm == "with" else no_baselines)
                begin_session = session(plain_token)
                start = time.perf_counter()
                answer = contract_begin(session=begin_session, token=plain_token,
                                        kind="general", body=_body(_twenty_checks()))
                begins[arm].append(round((time.perf_counter() - start) * 1000, 2))
                if answer.status != "active":
                    raise RuntimeError(f"B10 begin answered {answer.status}")
    finally:
        contracts._baselines = evaluation  # type: ignore[assignment]
    shutil.rmtree(base, ignore_errors=True)
    row = {"files": files, "turn_stop_ms": {arm: round(median(values), 2)
                                            for arm, values in times.items()},
           "scope_ratio": round(scope_ratio, 3),
           "begin_ms": round(median(begins["with"]), 2),
           "begin_without_ms": round(median(begins["without"]), 2),
           "times_ms": times, "begin_times_ms": begins}
    row["begin_ratio"] = round(row["begin_ms"] / row["begin_without_ms"], 3)
    progress(f"[B10] {files:,} files: turn-stop {row['turn_stop_ms']['scoped']:.0f} ms with "
             f"scope checks, {row['turn_stop_ms']['plain']:.0f} without ({scope_ratio:.2f}x); "
             f"begin {row['begin_ms']:.0f} ms, {row['begin_without_ms']:.0f} without baselines "
             f"({row['begin_ratio']:.2f}x)")
    return row


# --- served: the baseline run while the agent works ---------------------------------------------

PYTEST = ["/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
REPORT = "--junitxml=/governor-report/junit.xml"
CALC_WRONG = "def mul(a, b):\n    return a + b\n"
CALC_RIGHT = "def mul(a, b):\n    return a * b\n"
TESTS = ("from calc import mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n\n\n"
         "def test_twos():\n    assert mul(2, 2) == 4\n")


def _baseline_run(work_seconds: float, lifecycles: int,
                  broker: str | None = None) -> dict[str, Any]:
    broker = broker_for(broker, REDIS_DB)
    progress(f"[B10] a served governor: begin, {work_seconds:g} s of work, a run, verify — with "
             "a report profile (a baseline run) and without")
    with governor(worker=True, broker=broker, prefix="governor-b10-") as (live, tmp):
        profiles = [{"id": arm, "description": f"B10 {arm}",
                     "argv": [*PYTEST, REPORT] if arm == "report" else PYTEST,
                     "timeout_ms": 60_000, "required": False,
                     **({"report": "junit"} if arm == "report" else {})}
                    for arm in ("report", "plain")]
        load_profiles(live, tmp, profiles, "profiles")
        set_project(live, review_mode="off")
        walls: dict[str, list[float]] = {"report": [], "plain": []}
        with live.client() as client:
            for index in range(lifecycles):
                for arm in (("report", "plain") if index % 2 == 0 else ("plain", "report")):
                    walls[arm].append(_lifecycle(client, live.workspace_root / f"b10-{arm}-"
                                                 f"{index}", arm, work_seconds))
    result = {"work_s": work_seconds, "wall_s": {arm: round(median(values[1:] or values), 3)
                                                 for arm, values in walls.items()},
              "walls_s": walls, "lifecycles": lifecycles}
    result["extra_s"] = round(result["wall_s"]["report"] - result["wall_s"]["plain"], 3)
    progress(f"[B10] begin → certified: {result['wall_s']['report']:.2f} s with a baseline run, "
             f"{result['wall_s']['plain']:.2f} s without (+{result['extra_s']:.2f} s)")
    return result


def _lifecycle(client: Any, workspace: Path, profile: str, work_seconds: float) -> float:
    (workspace / "tests").mkdir(parents=True)
    os.chmod(workspace, 0o755)  # noqa: S103 - the sandbox user reads it
    (workspace / "calc.py").write_text(CALC_WRONG)
    (workspace / "tests" / "test_calc.py").write_text(TESTS)
    (workspace / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    sid = client.post("/sessions", json={"workspace": {"kind": "path",
                                                       "path": str(workspace)}}).json()["id"]
    start = time.perf_counter()
    begun = client.post(f"/sessions/{sid}/contracts", json={
        "objective": "Fix mul", "claims": [
            {"id": "tests", "statement": "the tests pass", "importance": "critical",
             "verification": "deterministic", "check_ids": ["tests"]}],
        "checks": [{"id": "tests", "kind": "code_verification_succeeded", "profile": profile}]})
    if begun.status_code != 201:
        raise RuntimeError(f"B10 begin answered {begun.status_code}: {begun.text}")
    time.sleep(work_seconds)  # the agent works; a baseline run, if any, runs meanwhile
    (workspace / "calc.py").write_text(CALC_RIGHT)
    run = client.post(f"/sessions/{sid}/code-verifications", json={"profile": profile}).json()
    while client.get(f"/code-verifications/{run['id']}",
                     params={"wait": 30}).json()["state"] != "finished":
        pass
    verdict = client.post(f"/sessions/{sid}/verify").json()
    for _ in range(2):  # as an agent told the baseline run is still queued or running does
        if "verify again once it has finished" not in verdict.get("message", ""):
            break
        time.sleep(2)
        verdict = client.post(f"/sessions/{sid}/verify").json()
    if verdict["decision"] != "certified":
        raise RuntimeError(f"B10 {profile}: {verdict['decision']}: {verdict['message']}")
    return time.perf_counter() - start


# --- report -------------------------------------------------------------------------------------


def table(result: dict[str, Any]) -> str:
    rows = [[f"{int(files):,}", f"{row['turn_stop_ms']['scoped']:.0f}",
             f"{row['turn_stop_ms']['plain']:.0f}", f"**{row['scope_ratio']:.2f}×**",
             f"{row['begin_ms']:.0f}", f"{row['begin_without_ms']:.0f}",
             f"**{row['begin_ratio']:.2f}×**"] for files, row in result["sizes"].items()]
    text = markdown_table(["files", "turn-stop with scope ms", "without ms", "ratio",
                           "begin (20 checks) ms", "without baselines ms", "ratio"], rows)
    baseline = result["baseline_run"]
    text += ("\n\n" + markdown_table(
        ["", "begin → certified s"],
        [["report profile (a baseline run queued at activation)",
          f"{baseline['wall_s']['report']:.2f}"],
         ["the same profile without a report (no baseline run)",
          f"{baseline['wall_s']['plain']:.2f}"],
         ["what the baseline run adds", f"**{baseline['extra_s']:+.2f}**"]]))
    return text + "\n\n" + (
        f"Turn-stop: `attempt_record` (the server's time), medians of {result['attempts']} per "
        f"arm, arms alternating, a file changed before each. Begin: `contract_begin` on a new "
        f"session, medians of 6 per arm, arms alternating. Baseline run: "
        f"the agent works {baseline['work_s']:g} s after activation; medians of "
        f"{baseline['lifecycles'] - 1} lifecycles per arm (the first of {baseline['lifecycles']} "
        f"left out). Goals: ≤ {GOAL_SCOPE_RATIO:g}×, ≤ {GOAL_BEGIN_RATIO:g}×, "
        "and ≈ 0 s added.")


def gates(result: dict[str, Any]) -> list[str]:
    failed = []
    for files, row in result["sizes"].items():
        if row["scope_ratio"] > GOAL_SCOPE_RATIO:
            failed.append(f"turn-stop with scope checks at {files} files: "
                          f"{row['scope_ratio']:.2f}x > {GOAL_SCOPE_RATIO:g}x")
        if row["begin_ratio"] > GOAL_BEGIN_RATIO:
            failed.append(f"begin with baselines at {files} files: {row['begin_ratio']:.2f}x > "
                          f"{GOAL_BEGIN_RATIO:g}x")
    extra = result["baseline_run"]["extra_s"]
    if extra > GOAL_BASELINE_EXTRA_S:
        failed.append(f"the baseline run adds {extra:.2f} s before certification "
                      f"(> {GOAL_BASELINE_EXTRA_S:g} s)")
    return failed

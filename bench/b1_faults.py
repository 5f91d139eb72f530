"""B1. Keyless fault matrix (docs/benchmarks.md).

A scripted agent (`bench/agent.py`) drives a real served governor — gunicorn, a Celery worker,
bubblewrap-sandboxed verifier runs — over HTTP through the fault cases of `bench/cases.py`, in two
arms: `baseline` (the agent's own "done" is believed) and `governed` (the governor decides). An
independent oracle (`bench/oracle.py`: workspace files and the agent's own record, never the
governor's code) judges the true outcome of every trial.

Per arm: runs, oracle successes, completion claims, false completions (claimed, oracle says
not), false certifications (certified, oracle says not), certified / exhausted / abstained,
expected-outcome accuracy, median run time. Gates: governed false completions = 0, governed false
certifications = 0, expected-outcome accuracy = 1 in both arms, false-completion reduction ≥ 0.8.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import traceback
from collections import Counter
from typing import Any

from bench import oracle
from bench.agent import Agent, Reviewer
from bench.cases import (
    BY_NAME,
    CASES,
    DEFAULT_PROJECT,
    OUTCOME_PROFILE,
    Case,
    Trial,
    base_profiles,
    edited_profile,
    edited_profile_id,
    outcome_of,
    run_baseline,
    run_governed,
)
from bench.common import markdown_table, median, progress
from bench.live import broker_for, governor, load_profiles, server_log_tail, set_project

NAME = "B1"
TRIALS = 10
ARMS = ("baseline", "governed")
REDIS_DB = 13  # B1's own Redis database number (flushed), when Redis answers
REDUCTION_GOAL = 0.8
ADMIN = ("admin", "live-admin-password-1")  # what tests/live.py bootstraps


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--b1-trials", type=int, default=TRIALS, metavar="N",
                        help=f"B1: trials per case per arm (default {TRIALS})")
    parser.add_argument("--b1-cases", default="", metavar="NAMES",
                        help="B1: comma-separated case names (default: all "
                             f"{len(CASES)})")
    parser.add_argument("--b1-database-url", default=os.environ.get("DATABASE_URL"),
                        metavar="URL",
                        help="B1: a PostgreSQL server to run the governor on (a bench_governor "
                             "database is created and dropped there; default $DATABASE_URL, "
                             "else SQLite)")
    parser.add_argument("--b1-broker", default=os.environ.get("GOVERNOR_BROKER_URL"),
                        metavar="URL",
                        help=f"B1: broker URL (default $GOVERNOR_BROKER_URL, else Redis database "
                             f"{REDIS_DB} on 127.0.0.1:6379 when it answers, else the filesystem "
                             "broker)")


def run(args: argparse.Namespace) -> dict[str, Any]:
    names = [name.strip() for name in getattr(args, "b1_cases", "").split(",") if name.strip()]
    return measure(trials=getattr(args, "b1_trials", TRIALS), case_names=names,
                   database_url=getattr(args, "b1_database_url", None),
                   broker=getattr(args, "b1_broker", None))


def _select(names: list[str]) -> list[Case]:
    unknown = [name for name in names if name not in BY_NAME]
    if unknown:
        raise SystemExit(f"unknown B1 case(s) {unknown} (known: {', '.join(BY_NAME)})")
    return [case for case in CASES if not names or case.name in names]


def measure(*, trials: int, case_names: list[str] | None = None,
            database_url: str | None = None, broker: str | None = None) -> dict[str, Any]:
    cases = _select(case_names or [])
    broker_url = broker_for(broker, REDIS_DB)
    database = "PostgreSQL" if database_url else "SQLite"
    progress(f"[B1] starting the governor (gunicorn + Celery worker, {database}, broker "
             f"{broker_url.split('://')[0]}); {len(cases)} cases × {trials} trials × 2 arms")
    results: list[dict[str, Any]] = []
    started = time.perf_counter()
    with governor(worker=True, broker=broker_url, database_url=database_url,
                  prefix="governor-b1-") as (live, tmp):
        profiles = base_profiles()
        if any(case.name == "profile-edited" for case in cases):
            profiles += [edited_profile(edited_profile_id(arm, index), 1)
                         for arm in ARMS for index in range(trials)]
        load_profiles(live, tmp, profiles, "profiles")
        if any(case.name == "outcome-claimed-early" for case in cases):
            outcome_file = tmp / "outcome-profiles.json"
            outcome_file.write_text(json.dumps({"outcome_profiles": [OUTCOME_PROFILE]}))
            live.manage("governor_profiles", "load", str(outcome_file), "--project", "demo")
        project = dict(DEFAULT_PROJECT)
        set_project(live, **project)
        outside = tmp / "outside"
        outside.mkdir()
        edits = 0

        def edit_profile(profile_id: str) -> None:
            nonlocal edits
            edits += 1
            load_profiles(live, tmp, [edited_profile(profile_id, 2)], f"edit-{edits}")

        reviewer = Reviewer(live.url, *ADMIN)
        with live.client() as client:
            for number, case in enumerate(cases, 1):
                wanted = {**DEFAULT_PROJECT, **case.project}
                if wanted != project:
                    changes = {k: v for k, v in wanted.items() if project.get(k) != v}
                    set_project(live, **changes)
                    project = wanted
                case_start = time.perf_counter()
                for index in range(trials):
                    line = []
                    for arm in ARMS if index % 2 == 0 else ARMS[::-1]:
                        workspace = live.workspace_root / f"{case.name}-{arm}-{index}"
                        workspace.mkdir()
                        trial = Trial(case=case, arm=arm, index=index, workspace=workspace,
                                      outside=outside, reviewer=reviewer,
                                      edit_profile=edit_profile)
                        result = run_trial(client, trial)
                        if "error" in result:
                            progress(f"[B1] {case.name} {arm} #{index}: ERROR "
                                     f"{result['error']}\n{server_log_tail(tmp, 1500)}")
                        results.append(result)
                        line.append(f"{arm} {result['outcome']} (oracle "
                                    f"{'ok' if result['oracle'] else 'not done'}, "
                                    f"{result['seconds']:.2f} s)")
                    progress(f"[B1] {number}/{len(cases)} {case.name} trial {index + 1}/{trials}:"
                             f" " + "; ".join(sorted(line)))
                progress(f"[B1] {case.name}: {trials} trials per arm in "
                         f"{time.perf_counter() - case_start:.1f} s")
        reviewer.close()
    summary = summarise(cases, results)
    return {
        "params": {"trials": trials, "cases": [case.name for case in cases],
                   "database": database, "broker": broker_url.split("://")[0],
                   "seconds": round(time.perf_counter() - started, 1)},
        "cases": {case.name: {"title": case.title, "classic": case.classic,
                              "fault": case.fault,
                              "expected": {"baseline": "claimed", "governed": case.expected}}
                  for case in cases},
        **summary,
    }


def run_trial(client: Any, trial: Trial) -> dict[str, Any]:
    case = trial.case
    case.setup(trial)
    expected = "claimed" if trial.arm == "baseline" else case.expected
    start = time.perf_counter()
    agent: Agent | None = None
    error = None
    try:
        agent = Agent(client, trial.workspace, case.task)
        flow = run_baseline if trial.arm == "baseline" else run_governed
        status, attempts = flow(agent, trial)
        outcome = outcome_of(trial, status, attempts)
    except Exception as exc:  # noqa: BLE001 - a failed trial is a wrong outcome, not a crash
        status, attempts, outcome = "error", 0, "error"
        error = f"{type(exc).__name__}: {exc}"
        progress(traceback.format_exc())
    seconds = time.perf_counter() - start
    record = agent.record if agent is not None else []
    done, why = oracle.judge(case.name, trial.workspace, record)
    claimed = status == "claimed" or status == "certified"
    result: dict[str, Any] = {
        "case": case.name, "arm": trial.arm, "trial": trial.index, "outcome": outcome,
        "expected": expected, "as_expected": outcome == expected, "status": status,
        "attempts": attempts, "claimed": claimed, "certified": status == "certified",
        "oracle": done, "oracle_reason": why, "seconds": round(seconds, 3),
        "actions": len(record), "flags": trial.flags,
    }
    if error:
        result["error"] = error
    return result


def category(row: dict[str, Any]) -> str:
    """What happened, judged by the oracle: one of CATEGORIES."""
    if row["claimed"]:
        return "claimed, really done" if row["oracle"] else "claimed, not done"
    return row["status"] if row["status"] in ("exhausted", "abstained") else "error"


CATEGORIES = ("claimed, really done", "claimed, not done", "exhausted", "abstained", "error")


def _stats(rows: list[dict[str, Any]]) -> dict[str, Any]:
    outcomes = Counter(row["outcome"] for row in rows)
    categories = Counter(category(row) for row in rows)
    return {
        "runs": len(rows),
        "oracle_successes": sum(row["oracle"] for row in rows),
        "claims": sum(row["claimed"] for row in rows),
        "false_completions": sum(row["claimed"] and not row["oracle"] for row in rows),
        "false_certifications": sum(row["certified"] and not row["oracle"] for row in rows),
        "certified": sum(row["status"] == "certified" for row in rows),
        "exhausted": sum(row["status"] == "exhausted" for row in rows),
        "abstained": sum(row["status"] == "abstained" for row in rows),
        "errors": sum(row["status"] == "error" for row in rows),
        "as_expected": sum(row["as_expected"] for row in rows),
        "accuracy": round(sum(row["as_expected"] for row in rows) / len(rows), 4) if rows else 0,
        "median_s": round(median([row["seconds"] for row in rows]), 3) if rows else 0,
        "outcomes": dict(sorted(outcomes.items())),
        "categories": {name: categories[name] for name in CATEGORIES},
        "oracle_reasons": dict(Counter(row["oracle_reason"] for row in rows).most_common()),
        "unexpected": sorted({f"{row['outcome']} (expected {row['expected']})"
                              + (f": {row['error']}" if "error" in row else "")
                              for row in rows if not row["as_expected"]}),
    }


def summarise(cases: list[Case], results: list[dict[str, Any]]) -> dict[str, Any]:
    arms = {arm: _stats([r for r in results if r["arm"] == arm]) for arm in ARMS}
    per_case = {case.name: {arm: _stats([r for r in results
                                         if r["case"] == case.name and r["arm"] == arm])
                            for arm in ARMS} for case in cases}
    base, gov = arms["baseline"]["false_completions"], arms["governed"]["false_completions"]
    reduction = round((base - gov) / base, 4) if base else None
    return {"arms": arms, "per_case": per_case, "false_completion_reduction": reduction}


# --- in the parent: reporting -----------------------------------------------------------------


def _outcomes(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} ×{count}" for name, count in counts.items())


def table(result: dict[str, Any]) -> str:
    arm_rows = []
    for arm in ARMS:
        s = result["arms"][arm]
        arm_rows.append([arm, str(s["runs"]), str(s["oracle_successes"]), str(s["claims"]),
                         f"**{s['false_completions']}**", str(s["false_certifications"]),
                         str(s["certified"]), str(s["exhausted"]), str(s["abstained"]),
                         f"{s['accuracy']:.2f}", f"{s['median_s']:.2f}"])
    header = ["arm", "runs", "oracle successes", "completion claims", "false completions",
              "false certifications", "certified", "exhausted", "abstained",
              "expected-outcome accuracy", "median run s"]
    case_rows = []
    for name in result["params"]["cases"]:  # in case order (latest.json sorts the keys)
        arms, meta = result["per_case"][name], result["cases"][name]
        b, g = arms["baseline"], arms["governed"]
        case_rows.append([
            f"{meta['title']}{'' if meta['classic'] else ' (new)'}",
            f"`{meta['expected']['governed']}`", f"{b['false_completions']}/{b['runs']}",
            f"{g['false_completions']}/{g['runs']}", _outcomes(g["outcomes"]),
            f"{b['oracle_successes']} / {g['oracle_successes']}",
            f"{b['accuracy']:.2f} / {g['accuracy']:.2f}",
        ])
    case_header = ["case", "governed: expected", "baseline false completions",
                   "governed false completions", "governed outcomes",
                   "oracle successes (baseline / governed)", "accuracy (baseline / governed)"]
    p = result["params"]
    reduction = result["false_completion_reduction"]
    note = (f"{p['trials']} trials per case per arm, {len(p['cases'])} cases; governor on "
            f"{p['database']} with a Celery worker ({p['broker']} broker); the whole run took "
            f"{p['seconds']:.0f} s. The baseline's expected outcome is `claimed` in every case. "
            f"False-completion reduction: **"
            f"{'n/a' if reduction is None else f'{reduction:.2f}'}** (goal ≥ {REDUCTION_GOAL}).")
    return (markdown_table(header, arm_rows) + "\n\n" + note + "\n\n"
            + markdown_table(case_header, case_rows))


def gates(result: dict[str, Any]) -> list[str]:
    failed = []
    gov = result["arms"]["governed"]
    if gov["false_completions"]:
        failed.append(f"governed false completions {gov['false_completions']} (goal 0)")
    if gov["false_certifications"]:
        failed.append(f"governed false certifications {gov['false_certifications']} (goal 0)")
    for arm in ARMS:
        s = result["arms"][arm]
        if s["accuracy"] < 1:
            wrong = [f"{case}: {', '.join(result['per_case'][case][arm]['unexpected'])}"
                     for case in result["params"]["cases"]
                     if result["per_case"][case][arm]["unexpected"]]
            failed.append(f"{arm} expected-outcome accuracy {s['accuracy']:.2f} < 1 — "
                          + "; ".join(wrong))
    reduction = result["false_completion_reduction"]
    if reduction is None or reduction < REDUCTION_GOAL:
        failed.append(f"false-completion reduction {reduction} < {REDUCTION_GOAL}")
    return failed


"""B1 through the real DeepSeek Harness: the fault cases of `bench/cases.py` that a Harness agent
can act out with its own tools (write, read, bash), played by a scripted model inside the real
Harness (`tests/harness_e2e`: dsh 0.1.0-rc.8 headless), in two arms:

- `baseline` — the profile without the governor plugin: the agent does the faulty work, says
  "Done" and is believed;
- `governed` — the plugin mounted (clients/harness): the agent proposes the case's contract with
  `reliability_begin`, does the same faulty work and stops; the plugin asks `turn-stop`, and on a
  steer the model repairs only the checks the steer lists as failed, as the scripted-HTTP agent
  does. It claims completion only when the governor certified.

The independent oracle (`bench/oracle.py`) judges each trial from the final workspace files and
the agent's own record (its tool calls in the Harness's log, named as the oracle names them).

    python -m bench.b1_harness [--trials N]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench import oracle
from bench.cases import BY_NAME, DEFAULT_PROJECT, Case, Trial
from bench.common import markdown_table
from bench.live import set_project
from tests.harness_e2e.rig import Harness, committed_events, install
from tests.harness_e2e.scripted_model import ScriptedModel, Step, serve
from tests.live import Live, live_server

CASES = ("missing-file", "wrong-literal", "stale-file", "already-correct", "budget-of-1")
ARMS = ("baseline", "governed")
FAILED_CHECK = re.compile(r"^- (\S+) \(", re.MULTILINE)
STEER_PREFIXES = ("Completion is not verified yet", "The completion contract is")


class StepRecorder:
    """Stands in for bench's HTTP agent while a case's actions are read: each action becomes the
    Harness tool call that does the same thing. The Harness's `write` refuses to overwrite a file
    the agent has not read in this session, so a file that was there before the agent began is
    read first, as a Harness agent does."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.steps: list[Step] = []

    def write(self, relative: str, text: str) -> None:
        if (self.workspace / relative).exists():
            self.read(relative)
        self.steps.append({"tool": "write", "arguments": {"file_path": relative, "content": text}})

    def delete(self, relative: str) -> None:
        self.steps.append({"tool": "bash", "arguments": {"command": f"rm -- {relative}",
                                                         "description": f"delete {relative}"}})

    def read(self, relative: str) -> None:
        self.steps.append({"tool": "read", "arguments": {"file_path": relative}})


def steps_of(action: Any, trial: Trial) -> list[Step]:
    recorder = StepRecorder(trial.workspace)
    action(recorder, trial)
    return recorder.steps


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return " ".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


class FaultyAgent(ScriptedModel):
    """The case's agent as a model: the plan first; after a steer that lists failed checks, the
    repairs of those checks; after any other steer, a closing line."""

    def __init__(self, plan: list[Step], repairs: dict[str, list[Step]], claim: str) -> None:
        super().__init__(plan)
        self.plan, self.repairs, self.claim = plan, repairs, claim

    def answer(self, body: dict[str, Any]) -> Step:
        with self.lock:
            self.requests.append(body)
        if not body.get("tools"):
            return {"say": "Scripted session"}
        messages = body.get("messages", [])
        steers = [i for i, m in enumerate(messages) if m.get("role") == "user"
                  and text_of(m).startswith(STEER_PREFIXES)]
        since = messages[steers[-1] + 1:] if steers else messages
        done = sum(1 for m in since if m.get("role") == "assistant")
        if not steers:
            phase = [*self.plan, {"say": self.claim}]
        else:
            steer = text_of(messages[steers[-1]])
            failed = FAILED_CHECK.findall(steer) if steer.startswith(STEER_PREFIXES[0]) else []
            repair = [step for check in failed for step in self.repairs.get(check, [])]
            phase = [*repair, {"say": "Repaired the failed checks." if failed else
                               "Reported the governor's verdict."}]
        return phase[min(done, len(phase) - 1)]


def oracle_record(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The agent's own record from its log, in the oracle's vocabulary."""
    results = {e["data"]["message"]["content"][0]["toolCallId"]:
               not e["data"]["message"]["content"][0]["isError"]
               for e in log if e["type"] == "tool/result"}
    record = []
    for event in log:
        if event["type"] != "tool/call":
            continue
        name, arguments = event["data"]["name"], json.loads(event["data"]["arguments"] or "{}")
        ok = results.get(event["data"]["callId"], False)
        if name == "write":
            record.append({"tool": "write_file", "arguments": {"path": arguments["file_path"]},
                           "ok": ok})
        elif name == "read":
            record.append({"tool": "read_file", "arguments": {"path": arguments["file_path"]},
                           "ok": ok})
        elif name == "bash" and arguments.get("command", "").startswith("rm -- "):
            record.append({"tool": "delete_file",
                           "arguments": {"path": arguments["command"].removeprefix("rm -- ")},
                           "ok": ok})
        else:
            record.append({"tool": name, "arguments": arguments, "ok": ok})
    return record


def trial(cache: Path, live: Live, case: Case, arm: str, index: int,
          scratch: Path) -> dict[str, Any]:
    workspace = live.workspace_root / f"{case.name}-{arm}-{index}"
    workspace.mkdir()
    home = scratch / f"home-{case.name}-{arm}-{index}"
    home.mkdir()
    record = Trial(case=case, arm=arm, index=index, workspace=workspace, outside=scratch,
                   reviewer=None, edit_profile=lambda profile: None)
    case.setup(record)
    harness = Harness(cache, home)
    harness.create_profile(plugin=arm == "governed")
    work = steps_of(case.work, record)
    plan = [{"tool": "reliability_begin", "arguments": case.contract(record)}, *work] \
        if arm == "governed" else work
    repairs = {check: steps_of(action, record) for check, action in case.repairs.items()}
    model = FaultyAgent(plan, repairs, case.claim)
    started = time.monotonic()
    with serve(model) as url:
        result = harness.run(case.task, workspace, url, GOVERNOR_URL=live.url,
                             GOVERNOR_TOKEN=live.token)
    seconds = time.monotonic() - started
    if result.returncode != 0:
        raise RuntimeError(f"{case.name}/{arm}/{index}: dsh exited {result.returncode}: "
                           f"{result.stderr[-2000:]}")
    [log_path] = harness.session_logs()
    _, log = committed_events(log_path)
    done, why = oracle.judge(case.name, workspace, oracle_record(log))
    if arm == "baseline":
        outcome, claimed, certified = "claimed", True, False
    else:
        [session_id] = harness.governor_session_ids()
        with live.client() as agent:
            status = agent.get(f"/sessions/{session_id}").json()
        outcome = f"{status['state']}@{len(status['attempts'])}"
        certified = status["state"] == "certified"
        claimed = certified
    expected = "claimed" if arm == "baseline" else case.expected
    return {"case": case.name, "arm": arm, "outcome": outcome, "expected": expected,
            "oracle": done, "why": why, "claimed": claimed, "certified": certified,
            "false_completion": claimed and not done,
            "false_certification": certified and not done, "seconds": seconds}


def measure(trials: int) -> dict[str, Any]:
    cache = install()
    rows: list[dict[str, Any]] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="b1-harness-") as temporary:
        scratch = Path(temporary)
        with live_server(scratch / "server", bootstrap=True) as live:
            for name in CASES:
                case = BY_NAME[name]
                set_project(live, **{**DEFAULT_PROJECT, **case.project})
                for arm in ARMS:
                    for index in range(trials):
                        rows.append(trial(cache, live, case, arm, index, scratch))
                        shutil.rmtree(scratch / f"home-{case.name}-{arm}-{index}")
    return {"rows": rows, "trials": trials, "seconds": time.monotonic() - started}


def report(result: dict[str, Any]) -> str:
    rows = result["rows"]
    arms = []
    for arm in ARMS:
        mine = [r for r in rows if r["arm"] == arm]
        counts = Counter(r["outcome"].split("@")[0] for r in mine)
        arms.append([arm, len(mine), sum(r["oracle"] for r in mine),
                     sum(r["claimed"] for r in mine),
                     f"**{sum(r['false_completion'] for r in mine)}**",
                     sum(r["false_certification"] for r in mine), counts["certified"],
                     counts["exhausted"],
                     f"{sum(r['outcome'] == r['expected'] for r in mine) / len(mine):.2f}",
                     f"{sorted(r['seconds'] for r in mine)[len(mine) // 2]:.1f}"])
    cases = []
    for name in CASES:
        case = BY_NAME[name]
        governed = [r for r in rows if r["case"] == name and r["arm"] == "governed"]
        baseline = [r for r in rows if r["case"] == name and r["arm"] == "baseline"]
        outcomes = Counter(r["outcome"] for r in governed)
        cases.append([case.title, f"`{case.expected}`",
                      f"{sum(r['false_completion'] for r in baseline)}/{len(baseline)}",
                      f"{sum(r['false_completion'] for r in governed)}/{len(governed)}",
                      ", ".join(f"{o} ×{n}" for o, n in outcomes.items())])
    arms = [[str(cell) for cell in row] for row in arms]
    return "\n\n".join([
        markdown_table(["arm", "runs", "oracle successes", "completion claims",
                        "false completions", "false certifications", "certified", "exhausted",
                        "expected-outcome accuracy", "median run s"], arms),
        markdown_table(["case", "governed: expected", "baseline false completions",
                        "governed false completions", "governed outcomes"], cases),
        f"{result['trials']} trials per case per arm through dsh 0.1.0-rc.8 headless; the whole "
        f"run took {result['seconds']:.0f} s.",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    result = measure(parser.parse_args().trials)
    print(report(result))
    failures = [r for r in result["rows"] if r["outcome"] != r["expected"]
                or (r["arm"] == "governed" and r["false_completion"])]
    if failures:
        raise SystemExit(f"gates failed: {json.dumps(failures, indent=1)[:3000]}")


if __name__ == "__main__":
    main()

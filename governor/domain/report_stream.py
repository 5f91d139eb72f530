"""rules §17.4: a pytest report profile's results leave the sandbox as the runner produces
them, and the report file must agree with them.

Which runs stream. A profile with `report: "junit"` whose argv runs pytest itself — its
command's file name is `pytest`, `py.test` or `pytest-3`, or a `python…` command is given
`-m pytest` — gets `-p <module>` right after that, loading the plugin the server mounts outside
the tree (verification/pytest_report_stream.py). Any other report profile (a shell that runs
pytest, another runner) is judged by its report file alone, as before.

What the plugin sends, one JSON object per line, as each thing happens: `start` (the session
began; the JUnit prefix the run uses), `collect` (a collector that failed or was skipped: the
report holds it as a test of its own), `collected` (how many tests will run), `test` (one phase
of one test: its node id, `when`, `outcome`, and whether it was marked xfail) and `finish` (the
session's final exit status, sent once pytest has unconfigured).

What must agree, or the run is `bad-report` naming the first thing that did not:
  - the stream started and finished, and every line is one of those objects, in that order;
  - the report file's tests are the stream's, each with the same outcome (the phases of a test
    folded exactly as pytest's JUnit writer folds them: an error in setup or teardown, a failure
    in the call — skipped when the test was marked xfail —, a skip);
  - the process's exit status is the one the session finished with;
  - with exit status 0, no test failed or errored, and every collected test reported (when a
    count came: pytest-xdist's controller collects nothing itself).

This raises the cost of forging from inside the runner's process, it does not make it
impossible: code that runs there can write to the descriptor too, or patch pytest before any
test runs, and the tamper scan and held-out expected outputs answer that.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from governor.domain.canonical import receipt
from governor.domain.reports import NAMED_TESTS

MAX_STREAM_BYTES = 8 * 1024 * 1024
PYTEST_COMMANDS = ("pytest", "py.test", "pytest-3")
EVENTS = ("start", "collect", "collected", "test", "finish")
PHASES = ("setup", "call", "teardown")
PHASE_OUTCOMES = ("passed", "failed", "skipped")


def plugin_argv(argv: Sequence[str], module: str) -> list[str] | None:
    """`argv` loading the plugin `module` (`-p module` right after the part that starts
    pytest), or None when this argv does not run pytest itself."""
    command = posixpath.basename(argv[0]) if argv else ""
    if command in PYTEST_COMMANDS:
        return [argv[0], "-p", module, *argv[1:]]
    if command.startswith("python") and argv[1:3] == ["-m", "pytest"]:
        return [*argv[:3], "-p", module, *argv[3:]]
    return None


def junit_id(nodeid: str, prefix: str | None) -> str:
    """The id (`classname::name`, governor/domain/reports.py) pytest's JUnit writer gives the
    test or collector `nodeid`: the path dotted without `.py`, classes joined to it, parameters
    kept on the name."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    classes = ([prefix] if prefix else []) + names[:-1]
    return f"{'.'.join(classes)}::{names[-1]}"


@dataclass
class Stream:
    started: bool = False
    prefix: str | None = None
    collected: int | None = None
    finished: int | None = None  # the session's exit status once `finish` came
    tags: dict[str, set[str]] = field(default_factory=dict)  # junit id -> what its phases said
    ran: set[str] = field(default_factory=set)  # node ids of tests (not collectors) reported
    problem: str | None = None  # why the stream itself is unusable

    def outcomes(self) -> dict[str, str]:
        """Each test's outcome as the JUnit writer would record it (reports.py `_outcome`)."""
        return {test: ("error" if "error" in tags else "failed" if "failure" in tags
                       else "skipped" if "skipped" in tags else "passed")
                for test, tags in self.tags.items()}

    def record(self, problem: str | None) -> dict[str, Any]:
        """What the run's event carries: whether it finished, the counts, a receipt over the
        outcomes (equal to the report's receipt when they agree) and what disagreed."""
        outcomes = self.outcomes()
        return {"finished": self.finished is not None, "collected": self.collected,
                "tests": len(outcomes), "exitStatus": self.finished,
                "receipt": receipt("code-verification-report",
                                   sorted([test, outcome] for test, outcome in outcomes.items())),
                "problem": problem}


def parse_stream(data: bytes) -> Stream:
    """The stream as the plugin sent it; `problem` says where it stopped making sense (what
    came after is ignored)."""
    stream = Stream()
    if len(data) > MAX_STREAM_BYTES:
        stream.problem = f"the stream holds more than {MAX_STREAM_BYTES} bytes"
        return stream
    lines = data.split(b"\n")
    complete, rest = lines[:-1], lines[-1]
    for number, line in enumerate(complete, start=1):
        if stream.finished is not None:
            stream.problem = f"line {number} of the stream came after the session finished"
            return stream
        try:
            event = json.loads(line)
            if not isinstance(event, dict) or event.get("event") not in EVENTS:
                raise ValueError("not an event")
            _apply(stream, event)
        except (ValueError, TypeError) as exc:
            stream.problem = f"line {number} of the stream is not the plugin's ({exc})"
            return stream
    if rest and stream.problem is None:
        stream.problem = f"the stream's last line is cut off ({len(rest)} bytes)"
    return stream


def _apply(stream: Stream, event: Mapping[str, Any]) -> None:
    kind = event["event"]
    if kind == "start":
        prefix = event.get("prefix")
        if stream.started or not (prefix is None or isinstance(prefix, str)):
            raise ValueError("a second or malformed start")
        stream.started, stream.prefix = True, prefix
        return
    if not stream.started:
        raise ValueError(f"{kind} before the session started")
    if kind == "collected":
        count = event.get("count")
        if stream.collected is not None or type(count) is not int or count < 0:
            raise ValueError("a second or malformed collected count")
        stream.collected = count
    elif kind == "finish":
        status = event.get("exitstatus")
        if type(status) is not int:
            raise ValueError("a malformed finish")
        stream.finished = status
    else:
        nodeid, outcome = event.get("id"), event.get("outcome")
        if not isinstance(nodeid, str) or outcome not in PHASE_OUTCOMES:
            raise ValueError(f"a malformed {kind}")
        tags = stream.tags.setdefault(junit_id(nodeid, stream.prefix), set())
        if kind == "collect":
            if outcome == "passed":
                raise ValueError("a collector that passed is not sent")
            tags.add("error" if outcome == "failed" else "skipped")
            return
        when = event.get("when")
        if when not in PHASES:
            raise ValueError("a test phase that is not setup, call or teardown")
        stream.ran.add(nodeid)
        if outcome == "skipped":
            tags.add("skipped")
        elif outcome == "failed":
            tags.add("error" if when != "call" else
                     "skipped" if event.get("xfail") is True else "failure")


def disagreement(stream: Stream, report: Mapping[str, str], exit_code: int | None) -> str | None:
    """What makes this run's report, stream and exit status disagree (None when they agree).
    `report` is the report file's outcome per test; `exit_code` the process's (None when a
    signal ended it)."""
    if stream.problem is not None:
        return stream.problem
    if not stream.started:
        return ("the stream never started: the runner ended, or was replaced, before its "
                "session began")
    if stream.finished is None:
        where = ("before collection finished" if stream.collected is None
                 else f"after reports of {len(stream.ran)} of the {stream.collected} collected "
                      "tests")
        return f"the stream ended before the session finished ({where})"
    outcomes = stream.outcomes()
    differ = sorted(test for test in report.keys() | outcomes.keys()
                    if report.get(test) != outcomes.get(test))
    if differ:
        shown = ", ".join(f"report says {test} {report.get(test, 'is absent')}, stream says "
                          f"{outcomes.get(test, 'absent')}" for test in differ[:NAMED_TESTS])
        more = len(differ) - NAMED_TESTS
        return shown + (f" and {more} more" if more > 0 else "")
    if exit_code is not None and exit_code != stream.finished:
        return (f"exit status {exit_code} but the stream says the session finished with "
                f"status {stream.finished}")
    bad = [outcome for outcome in outcomes.values() if outcome in ("failed", "error")]
    if stream.finished == 0 and bad:
        return (f"exit status 0 but the stream reports {bad.count('failed')} failed and "
                f"{bad.count('error')} errored")
    # pytest-xdist's controller collects nothing itself, and so sends no count.
    if (stream.finished == 0 and stream.collected is not None
            and len(stream.ran) != stream.collected):
        return (f"exit status 0 but the stream reports {len(stream.ran)} of "
                f"{stream.collected} collected tests")
    return None

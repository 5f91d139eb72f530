"""docs/outcomes.md's worked example, run as written (issue 40): every `sh` block under its
heading, in order, from a directory that stands for the checkout, against a served stack with a
worker and the real sandbox (how: tests/docs/walkthrough.py).

- The first block is the operator's terminal: it must end with `make run`. Everything before
  that line runs as written; `make run` itself is stood for by a served instance — migrated and
  bootstrapped as `make run` leaves it, on a port of its own, with a worker and beat — started
  with the `GOVERNOR_*` variables the block exported.
- The other blocks are the second terminal, one after the other. Where the example says a
  reviewer approves, the bootstrap admin approves while `begin` waits; before the block after
  `begin` the test waits, as the example tells the reader to, until the worker has probed the
  baseline.

A block passes when it exits 0; what the example's comments promise (active, certified,
observing, the baseline, the export verified) is asserted on each block's output.
"""

from __future__ import annotations

import json
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tests.docs.walkthrough import (
    Reviewer,
    answers,
    base_env,
    checkout,
    commands,
    example_blocks,
    exported,
    reader_env,
    run,
)
from tests.live import ROOT, Live, live_server

pytestmark = pytest.mark.sandbox

PAGE = ROOT / "docs" / "outcomes.md"
HEADING = "A worked example that runs here"
SENTENCE = "after delivery: conversion ≥ 0.031 between day 1 and day 7; correlational"


def wait_for_baseline(live: Live, timeout: float = 60) -> dict[str, Any]:
    """The baseline the worker probed for the example's outcome contract, read from the served
    instance's database once it is there."""
    database = Path(live.env["GOVERNOR_VAR_DIR"]) / "governor.sqlite3"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with closing(sqlite3.connect(database, timeout=10)) as db:
            row = db.execute("SELECT baseline FROM verification_outcomecontract").fetchone()
        if row and row[0] and json.loads(row[0]):
            return dict(json.loads(row[0]))
        time.sleep(0.2)
    raise AssertionError("the worker probed no baseline")


def test_the_example_is_there_and_begins_by_serving() -> None:
    blocks = example_blocks(PAGE, HEADING)
    assert len(blocks) >= 5, [block.where() for block in blocks]
    assert commands(blocks[0])[-1] == "make run", blocks[0].where()
    text = "".join(block.text for block in blocks)
    assert "sudo" not in text and "/srv" not in text  # issue 40: it ran only as root
    for line in (line for block in blocks for line in commands(block)):
        first = line.split()[0]
        assert first not in ("python", "python3", "governor-agent"), (
            f"{line!r}: name the virtualenv (.venv/bin/{first})")


def test_the_worked_example_runs_as_written(tmp_path: Path) -> None:
    here = checkout(tmp_path)
    serving, *session = example_blocks(PAGE, HEADING)

    # The operator's terminal, up to `make run`.
    first = tmp_path / "terminal-1"
    operator = run(serving, here, base_env(), first,
                   text=serving.text[:serving.text.rindex("make run")])
    assert operator.returncode == 0, f"{serving.where()}\n{operator.stdout}\n{operator.stderr}"
    settings = {key: value for key, value in exported(first).items()
                if key.startswith("GOVERNOR_")}
    assert settings.get("GOVERNOR_OUTCOME_DATA_DIR") == str(here / "outcome-data")

    with live_server(here, worker=True, extra_env=settings) as live:
        second = tmp_path / "terminal-2"
        outputs: dict[str, str] = {}
        for block in session:
            begins = any("governor-agent begin" in line for line in commands(block))
            reviewer = Reviewer(live, here) if begins else None
            result = run(block, here, reader_env(live), second)
            assert result.returncode == 0, f"{block.where()}\n{result.stdout}\n{result.stderr}"
            outputs[block.text] = result.stdout
            if reviewer is not None:
                reviewer.finished()
                assert SENTENCE in reviewer.pages["evidence"]
                assert answers(result.stdout)[-1]["status"] == "active"
                baseline = wait_for_baseline(live)
                assert baseline.get("passed"), json.dumps(baseline)  # the probe ran
                assert baseline["metrics"]["conversion"] == 0.027945
                assert baseline["sampleSize"] == 8660

    def output_of(command: str) -> list[Any]:
        (text,) = [out for block, out in outputs.items() if command in block]
        return answers(text)

    [profiles] = output_of("governor-agent outcome-profiles")[:1]
    assert [p["id"] for p in profiles["profiles"]] == ["checkout-conversion"]
    [verified] = output_of("governor-agent verify")
    assert verified["decision"] == "certified"
    assert "delivery-certified; outcome: observing" in verified["message"]
    observed, later = output_of("governor-agent outcome --observe")
    assert observed["status"] == "observing"
    [observation] = observed["observations"]
    assert observation["result"]["metrics"] == {"conversion": 0.027945, "error_rate": 0.002887}
    assert observed["contract"]["baseline"]["metrics"]["conversion"] == 0.027945
    assert later["status"] == "observing"  # the window opens on day 1
    (proof,) = [out for block, out in outputs.items() if "governor.verify" in block]
    assert "\nOK: session " in proof, proof
    exported_log = (here / "workspaces" / "shop-session.jsonl").read_text()
    for kind in ("reliability/outcome-contract", "reliability/outcome-observation"):
        assert kind in exported_log  # the observation, checked offline with the rest
    # The agent's state is in its workspace, not in the checkout (issue 40).
    assert not (here / ".governor").exists()
    assert (here / "workspaces" / "shop" / ".governor" / "session.json").is_file()

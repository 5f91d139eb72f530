"""docs/outcomes.md's worked example, run as written (issue 40): every `sh` block under its
heading, in order, from a directory that stands for the checkout, against a served stack with a
worker and the real sandbox.

- The first block is the operator's terminal: it must end with `make run`. Everything before
  that line runs as written; `make run` itself is stood for by a served instance — migrated and
  bootstrapped as `make run` leaves it, on a port of its own, with a worker and beat — started
  with the `GOVERNOR_*` variables the block exported.
- The other blocks are the second terminal, one after the other: each runs with `bash -e -o
  pipefail` and with what the blocks before it exported (as one shell would keep them). The
  environment holds the instance's settings (so `.venv/bin/python manage.py` acts on it, as in
  tests/docs/test_runnable_snippets.py), `GOVERNOR_URL` and `GOVERNOR_TOKEN`; `PATH` does not
  hold the virtualenv (the example names `.venv/bin/` in every command: a bare `python -m
  governor.verify` or `governor-agent` fails here as on a fresh checkout).
- Where the example says a reviewer approves, the bootstrap admin approves in the browser's
  stead (a real login and the review page's form) while `begin` waits; before the block after
  `begin` the test waits, as the example tells the reader to, until the worker has probed the
  baseline.

A block passes when it exits 0; what the example's comments promise (active, certified,
observing, the baseline, the export verified) is asserted on each block's output.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing, suppress
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.docs.markdown import Block, fenced_blocks
from tests.live import ADMIN_PASSWORD, ROOT, Live, live_server

pytestmark = pytest.mark.sandbox

PAGE = ROOT / "docs" / "outcomes.md"
HEADING = "A worked example that runs here"
VENV_BIN = Path(sys.executable).parent
# What the example's checkout needs of this one: `make install` finds the virtualenv installed
# (its stamps are this checkout's) and does nothing.
LINKED = ("manage.py", ".venv", "docs", "Makefile", "pyproject.toml", "clients")
SENTENCE = "after delivery: conversion ≥ 0.031 between day 1 and day 7; correlational"


def example_blocks() -> list[Block]:
    return [block for block in fenced_blocks(PAGE)
            if block.heading == HEADING and block.language == "sh"]


def commands(block: Block) -> list[str]:
    """The block's command lines, without comments (a heredoc's lines count as commands)."""
    lines = [line.split(" #", 1)[0].strip() for line in block.text.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def base_env() -> dict[str, str]:
    """This process's environment without the governor's settings and without the virtualenv
    on PATH."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("GOVERNOR_") and key not in ("DATABASE_URL", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(part for part in env.get("PATH", "").split(os.pathsep)
                                  if Path(part) != VENV_BIN)
    return env


def run(block: Block, cwd: Path, env: dict[str, str], state: Path
        ) -> subprocess.CompletedProcess[str]:
    """`block` as written, in a shell that first takes the variables `state` holds (what the
    blocks before it exported) and saves its own exports there when it ends."""
    script = cwd / f"snippet-{block.page.stem}-{block.line}.sh"
    script.write_text(f'[ -f "{state}" ] && . "{state}"\n{block.text}export -p > "{state}"\n')
    return subprocess.run(  # noqa: S603
        ["bash", "-e", "-o", "pipefail", str(script)], cwd=cwd, env=env, capture_output=True,
        text=True, timeout=120, check=False)


def exported(state: Path) -> dict[str, str]:
    """The variables a block exported, as `export -p` wrote them."""
    result = subprocess.run(  # noqa: S603
        ["bash", "-c", f'. "{state}" && env -0'], env={}, capture_output=True, check=True)
    pairs = (item.split("=", 1) for item in result.stdout.decode().split("\0") if "=" in item)
    return dict(pairs)


def answers(text: str) -> list[Any]:
    """The JSON objects printed one after another (a line of another command's, such as
    make's, between them is passed over)."""
    decoder, values, index = json.JSONDecoder(), [], 0
    while index < len(text):
        if text.startswith("{", index):
            value, index = decoder.raw_decode(text, index)
            values.append(value)
        else:
            end = text.find("\n", index)
            index = len(text) if end < 0 else end + 1
    return values


class Reviewer:
    """The bootstrap admin, approving both review stages of the example's session on its pages
    (a real login and the review form's POST), as the example's reader does in the browser."""

    def __init__(self, live: Live, checkout: Path) -> None:
        self.live, self.checkout = live, checkout
        self.error: BaseException | None = None
        self.evidence_page = ""
        self.thread = threading.Thread(target=self._review, daemon=True)

    def _session_id(self) -> str:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for state in (self.checkout / "workspaces").glob("*/.governor/session.json"):
                with suppress(ValueError):  # being written
                    if session := json.loads(state.read_text()).get("session_id"):
                        return str(session)
            time.sleep(0.2)
        raise AssertionError("no workspace under workspaces/ has a session")

    def _review(self) -> None:
        try:
            session = self._session_id()
            with httpx.Client(base_url=self.live.url, timeout=30) as http, \
                    self.live.client() as api:
                http.get("/accounts/login/")
                signed_in = http.post("/accounts/login/", data={
                    "username": "admin", "password": ADMIN_PASSWORD,
                    "csrfmiddlewaretoken": http.cookies["csrftoken"]})
                assert signed_in.status_code == 302, signed_in.text
                for stage in ("intent", "evidence"):
                    review = self._pending(api, session, stage)
                    page = http.get(f"/reviews/{review['id']}/")
                    assert page.status_code == 200, page.text
                    if stage == "evidence":
                        self.evidence_page = page.text
                    decided = http.post(f"/reviews/{review['id']}/", data={
                        "receipt": review["proposal_receipt"], "decision": "approved",
                        "feedback": "", "csrfmiddlewaretoken": http.cookies["csrftoken"]})
                    assert decided.status_code in (200, 302), decided.text
        except BaseException as exc:  # reported by the test, in its own thread
            self.error = exc

    @staticmethod
    def _pending(api: httpx.Client, session: str, stage: str) -> dict[str, Any]:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            review = api.get(f"/sessions/{session}/review").json()["review"]
            if review and review["stage"] == stage and review["status"] == "pending":
                return dict(review)
            time.sleep(0.2)
        raise AssertionError(f"no {stage} review opened")


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
    blocks = example_blocks()
    assert len(blocks) >= 5, [block.where() for block in blocks]
    assert commands(blocks[0])[-1] == "make run", blocks[0].where()
    text = "".join(block.text for block in blocks)
    assert "sudo" not in text and "/srv" not in text  # issue 40: it ran only as root
    for line in (line for block in blocks for line in commands(block)):
        first = line.split()[0]
        assert first not in ("python", "python3", "governor-agent"), (
            f"{line!r}: name the virtualenv (.venv/bin/{first})")


def test_the_worked_example_runs_as_written(tmp_path: Path) -> None:
    checkout = tmp_path
    for name in LINKED:
        (checkout / name).symlink_to(ROOT / name)
    up_to_date = subprocess.run(["make", "-q", "install"], cwd=checkout,  # noqa: S607
                                capture_output=True, check=False)
    # Else the example's `make install` would install this checkout's packages from the
    # example's directory, editable there, into this checkout's virtualenv.
    assert up_to_date.returncode == 0, "run `make install` in the checkout first"
    blocks = example_blocks()
    serving, *session = blocks

    # The operator's terminal, up to `make run`.
    first = tmp_path / "terminal-1"
    operator = run(Block(serving.page, serving.line, "sh",
                         serving.text[:serving.text.rindex("make run")], serving.heading,
                         serving.before), checkout, base_env(), first)
    assert operator.returncode == 0, f"{serving.where()}\n{operator.stdout}\n{operator.stderr}"
    settings = {key: value for key, value in exported(first).items()
                if key.startswith("GOVERNOR_")}
    assert settings.get("GOVERNOR_OUTCOME_DATA_DIR") == str(checkout / "outcome-data")

    with live_server(checkout, worker=True, extra_env=settings) as live:
        env = {**base_env(), **{key: value for key, value in live.env.items()
                                if key.startswith("GOVERNOR_") or key == "DATABASE_URL"},
               "GOVERNOR_URL": live.url, "GOVERNOR_TOKEN": live.token}
        second = tmp_path / "terminal-2"
        outputs: dict[str, str] = {}
        for block in session:
            reviewer = None
            if any("governor-agent begin" in line for line in commands(block)):
                reviewer = Reviewer(live, checkout)
                reviewer.thread.start()
            result = run(block, checkout, env, second)
            assert result.returncode == 0, f"{block.where()}\n{result.stdout}\n{result.stderr}"
            outputs[block.text] = result.stdout
            if reviewer is not None:
                reviewer.thread.join(60)
                assert reviewer.error is None, reviewer.error
                assert SENTENCE in reviewer.evidence_page
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
    exported_log = (checkout / "workspaces" / "shop-session.jsonl").read_text()
    for kind in ("reliability/outcome-contract", "reliability/outcome-observation"):
        assert kind in exported_log  # the observation, checked offline with the rest
    # The agent's state is in its workspace, not in the checkout (issue 40).
    assert not (checkout / ".governor").exists()
    assert (checkout / "workspaces" / "shop" / ".governor" / "session.json").is_file()

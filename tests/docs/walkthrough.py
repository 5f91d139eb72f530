"""Running a page's worked example as written: its `sh` blocks one after the other, as one
reader at one terminal would, from a directory that stands for the checkout, against a served
stack (tests/docs/test_outcomes_example.py, tests/docs/test_walkthrough.py).

- The checkout stands for this one: its `manage.py`, `.venv`, `docs/`, `Makefile`,
  `pyproject.toml` and `clients/` are links to this checkout's (so `make install` finds the
  virtualenv installed and does nothing), and its `workspaces/` is the served demo project's
  workspace root (the stack is served from the same directory: `tests.live.live_server`).
- Each block runs with `bash -e -o pipefail` and with what the blocks before it exported (as one
  shell would keep them). The environment holds the instance's settings (so `.venv/bin/python
  manage.py` acts on it, as in tests/docs/test_runnable_snippets.py), `GOVERNOR_URL` and
  `GOVERNOR_TOKEN`; `PATH` does not hold the virtualenv, so a bare `python -m governor.verify`
  or `governor-agent` fails here as on a fresh checkout.
- Where the example says a reviewer approves, `Reviewer` approves as the bootstrap admin in the
  browser's stead (a real login and the review page's form) while `begin` waits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

import httpx

from tests.docs.markdown import Block, fenced_blocks
from tests.live import ADMIN_PASSWORD, ROOT, Live

VENV_BIN = Path(sys.executable).parent
LINKED = ("manage.py", ".venv", "docs", "Makefile", "pyproject.toml", "clients")


def example_blocks(page: Path, heading: str) -> list[Block]:
    """The `sh` blocks under `heading` (its own, not its subsections'), in order."""
    return [block for block in fenced_blocks(page)
            if block.heading == heading and block.language == "sh"]


def commands(block: Block) -> list[str]:
    """The block's command lines, without comments (a heredoc's lines count as commands)."""
    lines = [line.split(" #", 1)[0].strip() for line in block.text.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def checkout(directory: Path) -> Path:
    """`directory` made to stand for this checkout; refused when `make install` would install
    anything (it would install this checkout's packages editable from `directory`)."""
    for name in LINKED:
        (directory / name).symlink_to(ROOT / name)
    up_to_date = subprocess.run(["make", "-q", "install"], cwd=directory,  # noqa: S607
                                capture_output=True, check=False)
    assert up_to_date.returncode == 0, "run `make install` in the checkout first"
    return directory


def base_env() -> dict[str, str]:
    """This process's environment without the governor's settings and without the virtualenv
    on PATH."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("GOVERNOR_") and key not in ("DATABASE_URL", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(part for part in env.get("PATH", "").split(os.pathsep)
                                  if Path(part) != VENV_BIN)
    return env


def reader_env(live: Live) -> dict[str, str]:
    """The environment of the reader's terminal beside the served `live`."""
    return {**base_env(), **{key: value for key, value in live.env.items()
                             if key.startswith("GOVERNOR_") or key == "DATABASE_URL"},
            "GOVERNOR_URL": live.url, "GOVERNOR_TOKEN": live.token}


def run(block: Block, cwd: Path, env: dict[str, str], state: Path,
        text: str | None = None) -> subprocess.CompletedProcess[str]:
    """`block` as written (or `text`, a part of it), in a shell that first takes the variables
    and the directory `state` holds (what the blocks before it left) and saves its own there
    when it ends."""
    script = cwd / f"snippet-{block.page.stem}-{block.line}.sh"
    body = block.text if text is None else text
    script.write_text(f'[ -f "{state}" ] && . "{state}" && cd "$(cat "{state}.cwd")"\n'
                      f'{body}export -p > "{state}"\npwd > "{state}.cwd"\n')
    return subprocess.run(  # noqa: S603
        ["bash", "-e", "-o", "pipefail", str(script)], cwd=cwd, env=env, capture_output=True,
        text=True, timeout=120, check=False)


def exported(state: Path) -> dict[str, str]:
    """The variables the blocks exported, as `export -p` wrote them."""
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
    (a real login and the review form's POST), as the example's reader does in the browser.
    The session is the one a workspace under the checkout's `workspaces/` names."""

    def __init__(self, live: Live, checkout: Path) -> None:
        self.live, self.checkout = live, checkout
        self.error: BaseException | None = None
        self.pages: dict[str, str] = {}  # each stage's review page, as the reviewer read it
        self.thread = threading.Thread(target=self._review, daemon=True)
        self.thread.start()

    def finished(self) -> None:
        self.thread.join(60)
        assert not self.thread.is_alive(), "the reviewer is still waiting"
        assert self.error is None, self.error

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
                    self.pages[stage] = page.text
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

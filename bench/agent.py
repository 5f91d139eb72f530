"""B1's scripted agent and scripted reviewer, both plain HTTP clients of a running governor.

The agent works in a real workspace directory: every action changes real files (or runs real
tests) first and is then posted to the session log as a Harness tool step (`tests/
harness_builders.Trace` builds valid events; the server validates them strictly), including its
calls of governor tools (`reliability_begin`, `reliability_code_verify`, ...). It also keeps its
own record of what it did — the oracle's second input. It never reads the governor's database.

The reviewer is a person with a browser: it logs in on the login page, opens proposal pages and
submits the decision forms they contain, CSRF token and receipt as the page gave them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from tests.harness_builders import Trace
from tests.html_forms import forms_on

FAILED_CHECK_LINE = re.compile(r"^- (?P<id>\S+) \((?P<kind>[a-z_]+)\): (?P<evidence>.*)$")
TEST_SUITES = {
    "full": "import calc\nassert calc.add(2, 3) == 5\nassert calc.mul(3, 4) == 12\n",
    "add": "import calc\nassert calc.add(2, 3) == 5\n",
}


class GovernorError(AssertionError):
    """The governor answered something the script did not expect."""


def _expect(response: httpx.Response, *statuses: int) -> Any:
    if response.status_code not in statuses:
        raise GovernorError(f"{response.request.method} {response.request.url.path} answered "
                            f"{response.status_code}: {response.text[:1500]}")
    return response.json() if response.content else None


def failed_checks(message: str) -> dict[str, str]:
    """The failed checks a steer message lists (`- id (kind): evidence`), id -> evidence."""
    return {m["id"]: m["evidence"] for line in message.splitlines()
            if (m := FAILED_CHECK_LINE.match(line))}


class Agent:
    """One session of the scripted agent in `workspace`."""

    def __init__(self, client: httpx.Client, workspace: Path, task: str) -> None:
        self.client = client
        self.workspace = workspace
        self.record: list[dict[str, Any]] = []
        self.told: list[str] = []  # every message the governor gave it
        session = _expect(client.post("/sessions", json={
            "workspace": {"kind": "path", "path": str(workspace)}}), 201)
        self.id: str = session["id"]
        self.trace = Trace(session["next_seq"])
        self.trace.start_turn(task)
        self._post()
        self.turn_open = True

    # --- the session log ---------------------------------------------------------------------

    def _sync(self) -> None:
        self.trace.sync(self.status()["next_seq"])

    def _post(self) -> None:
        events = self.trace.flush()
        if events:
            _expect(self.client.post(f"/sessions/{self.id}/events", json={"events": events}),
                    200)

    def _step(self, tool: str, arguments: dict[str, Any], *, ok: bool = True,
              text: str = "done") -> None:
        """Post one tool round trip and keep it in the agent's own record."""
        self._sync()
        self.trace.tool(tool, json.dumps(arguments), ok=ok, text=text[:2000] or "(no output)")
        self._post()
        self.record.append({"tool": tool, "arguments": arguments, "ok": ok})

    def say(self, text: str) -> None:
        """End the current turn with a message to the user (kept in the record: what the agent
        claimed is part of what it did)."""
        self.record.append({"tool": "(message)", "arguments": {"text": text}, "ok": True})
        self._sync()
        self.trace.say(text).end_turn()
        self._post()
        self.turn_open = False

    def new_turn(self, text: str) -> None:
        """A new turn whose input is `text` (the governor's steer message)."""
        self._sync()
        self.trace.start_turn(text)
        self._post()
        self.turn_open = True

    def status(self) -> dict[str, Any]:
        return dict(_expect(self.client.get(f"/sessions/{self.id}"), 200))

    # --- workspace actions -------------------------------------------------------------------

    def write(self, relative: str, text: str) -> None:
        path = self.workspace / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            path.unlink()
        path.write_text(text)
        self._step("write_file", {"path": relative, "content": text})

    def edit_with(self, tool: str, relative: str, text: str) -> None:
        """Write `relative` through a tool called `tool` (its call is logged under that name)."""
        (self.workspace / relative).write_text(text)
        self._step(tool, {"path": relative, "content": text})

    def delete(self, relative: str) -> None:
        (self.workspace / relative).unlink()
        self._step("delete_file", {"path": relative})

    def symlink(self, relative: str, target: Path) -> None:
        os.symlink(target, self.workspace / relative)
        self._step("bash", {"command": f"ln -s {target} {relative}"})

    def read(self, relative: str) -> str:
        text = (self.workspace / relative).read_text()
        self._step("read_file", {"path": relative}, text=text)
        return text

    def run_tests(self, suite: str = "full", module: str = "calc") -> bool:
        """Really run a test suite against the workspace's module (the agent's own tests)."""
        code = TEST_SUITES[suite].replace("import calc", f"import {module} as calc")
        run = subprocess.run([sys.executable, "-B", "-I", "-c",
                              "import sys; sys.path.insert(0, '.')\n" + code],
                             cwd=self.workspace, capture_output=True, text=True, timeout=60,
                             check=False, env={"PATH": "/usr/bin:/bin"})
        ok = run.returncode == 0
        output = "tests passed" if ok else (run.stderr.strip().splitlines() or ["failed"])[-1]
        self._step("run_tests", {"suite": suite, "module": module}, ok=ok, text=output)
        return ok

    def tool(self, name: str, arguments: dict[str, Any], text: str = "done") -> None:
        """Any other tool the agent calls (its effect is outside the workspace)."""
        self._step(name, arguments, text=text)

    # --- governor tools ----------------------------------------------------------------------

    def begin(self, body: dict[str, Any], *, code: bool = False) -> tuple[int, dict[str, Any]]:
        route = "code-contracts" if code else "contracts"
        response = self.client.post(f"/sessions/{self.id}/{route}", json=body)
        answer = _expect(response, 200, 201, 202)
        self._step("reliability_begin_code" if code else "reliability_begin",
                   {"objective": body["objective"]}, text=str(answer.get("status")))
        return response.status_code, answer

    def code_verify(self, profile: str) -> bool:
        """Ask for a trusted run of `profile` and wait for its result."""
        run = _expect(self.client.post(f"/sessions/{self.id}/code-verifications",
                                       json={"profile": profile}), 202)
        deadline = time.monotonic() + 120
        while True:
            done = _expect(self.client.get(f"/code-verifications/{run['id']}",
                                           params={"wait": 30}), 200)
            if done["state"] == "finished":
                break
            if time.monotonic() > deadline:
                raise GovernorError(f"verification {run['id']} of {profile} never finished")
        passed = bool(done["result"]["passed"])
        self._step("reliability_code_verify", {"profile": profile},
                   text="passed" if passed else f"failed ({done['result']['failureKind']})")
        return passed

    def abstain(self, reason: str) -> dict[str, Any]:
        answer = dict(_expect(self.client.post(f"/sessions/{self.id}/abstain",
                                               json={"reason": reason}), 200))
        self.told.append(answer["message"])
        self._step("reliability_abstain", {"reason": reason}, text=answer["message"])
        return answer

    def turn_stop(self) -> dict[str, Any]:
        answer = dict(_expect(self.client.post(f"/sessions/{self.id}/turn-stop"), 200))
        if answer.get("message"):
            self.told.append(answer["message"])
        return answer

    def review(self, wait: int = 0) -> dict[str, Any]:
        answer = _expect(self.client.get(f"/sessions/{self.id}/review",
                                         params={"wait": wait} if wait else None), 200)
        return dict(answer["review"])

    def withdraw(self) -> None:
        _expect(self.client.delete(f"/sessions/{self.id}/review"), 200)


# --- the reviewer ----------------------------------------------------------------------------


class Reviewer:
    """A reviewer's browser: cookies, pages, forms."""

    def __init__(self, base_url: str, username: str, password: str) -> None:
        self.http = httpx.Client(base_url=base_url, timeout=30, follow_redirects=False)
        page = self.http.get("/accounts/login/")
        [form] = [f for f in forms_on(page.text) if "password" in f["fields"]]
        fields = {**form["fields"], "username": username, "password": password}
        response = self.http.post(form["action"] or "/accounts/login/", data=fields)
        if response.status_code != 302:
            raise GovernorError(f"login failed: {response.status_code}")

    def close(self) -> None:
        self.http.close()

    def page(self, url: str) -> str:
        response = self.http.get(url)
        if response.status_code != 200:
            raise GovernorError(f"GET {url} answered {response.status_code}")
        return response.text

    @staticmethod
    def form(html: str, button: str) -> dict[str, Any]:
        """The form whose submit button reads `button`, as the page gave it, with that button's
        name and value among its fields (a browser sends them with the form)."""
        matches = [form for form in forms_on(html) if button in form["buttons"]]
        if len(matches) != 1:
            raise GovernorError(f"expected one {button!r} form on the page, found {len(matches)}")
        form = matches[0]
        name, value = form["submits"][form["buttons"].index(button)]
        return {**form, "fields": {**form["fields"], **({name: value} if name else {})}}

    def submit(self, form: dict[str, Any], *, to: str | None = None,
               feedback: str | None = None) -> httpx.Response:
        """Post `form`'s fields to its own action, or to `to` (a replay on another page)."""
        fields = dict(form["fields"])
        if feedback is not None:
            fields["feedback"] = feedback
        return self.http.post(to or form["action"], data=fields)

    def press(self, url: str, button: str, *, feedback: str | None = None) -> httpx.Response:
        return self.submit(self.form(self.page(url), button), feedback=feedback)

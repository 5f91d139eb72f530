"""`governor-agent` as a shell user or a scripted agent runs it, against a real server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.api.test_contracts import readme_contract
from tests.clients.conftest import agent_env, cli, cli_json
from tests.conftest import INTENT
from tests.harness_builders import Trace
from tests.live import Live


def test_session_is_started_once_and_resumed_from_the_workspace(
    live: Live, workspace: Path,
) -> None:
    first = cli_json(live, workspace, "session")
    again = cli_json(live, workspace, "status")
    assert again["id"] == first["id"] and first["state"] == "idle"
    assert first["workspace"]["path"] == str(workspace.resolve())
    pinned = cli_json(live, workspace, "session", "--external-id", "ci-job-42")
    assert pinned["external_id"] == "ci-job-42" and pinned["id"] != first["id"]
    assert cli_json(live, workspace, "status")["id"] == pinned["id"]


def test_recorded_turns_and_raw_events_share_one_valid_log(live: Live, workspace: Path) -> None:
    cli_json(live, workspace, "prompt", "tidy the README")
    cli_json(live, workspace, "tool", "read_file", "--arguments", '{"path": "README.md"}',
             "--output", "no such file", "--error")
    cli_json(live, workspace, "say", "The README is missing.", "--provider", "acme",
             "--model", "m1")
    cli_json(live, workspace, "end-turn")
    status = cli_json(live, workspace, "status")
    trace = Trace(status["next_seq"])
    trace.turn = 1  # the CLI's turn above was turn 1
    lines = "\n".join(json.dumps(event) for event in
                      trace.start_turn("go on").tool("write_file").end_turn().flush())
    appended = cli_json(live, workspace, "events", stdin=lines)
    assert appended["first_seq"] == status["next_seq"]
    cli_json(live, workspace, "prompt", "one more")  # the book is read back after raw events

    with live.client() as client:
        events = client.get(f"/sessions/{status['id']}/events").json()["events"]
    assert [e["data"]["turn"] for e in events if e["type"] == "turn/start"] == [1, 2, 3]
    errors = [e["data"]["message"]["content"][0]["isError"] for e in events
              if e["type"] == "tool/result"]
    assert errors == [True, False]


def test_begin_verify_repair_and_abstain_from_the_shell(
    live: Live, workspace: Path, review_off: None,
) -> None:
    contract = json.dumps(readme_contract())
    assessed = cli_json(live, workspace, "assess", stdin=contract)
    assert assessed["status"] == "ready"
    begun = cli_json(live, workspace, "begin", "--code", stdin=contract)
    assert begun["status"] == "active"
    checks = [check["id"] for check in begun["contract"]["checks"]]
    assert checks[:2] == ["protected-paths", "code-profile-readme-present"]  # rules §17.3
    assert cli_json(live, workspace, "profiles")["profiles"][0]["id"] == "readme-present"
    repair = cli_json(live, workspace, "verify")
    assert repair["decision"] == "repair" and "code-profile-readme-present" in repair["message"]
    stop = cli_json(live, workspace, "turn-stop")
    assert stop["action"] == "steer"
    abstained = cli_json(live, workspace, "abstain", "no worker runs the profile here")
    assert abstained["terminal"]["status"] == "abstained"
    assert cli_json(live, workspace, "turn-stop") == {"action": "allow", "message": ""}
    assert cli_json(live, workspace, "status")["state"] == "abstained"

    refused = cli(live, workspace, "begin", stdin=json.dumps({"objective": "x", "claims": [],
                                                             "checks": []}))
    assert refused.returncode == 1
    assert json.loads(refused.stderr)["error"]["code"] == "VALIDATION"


def test_a_required_review_is_waited_for_and_can_be_withdrawn(
    live: Live, workspace: Path, review_required: None,
) -> None:
    begun = cli(live, workspace, "begin", "--wait", "2",
                stdin=json.dumps(readme_contract(intent=INTENT)))
    assert begun.returncode == 0, begun.stderr
    assert json.loads(begun.stdout)["status"] == "review-pending"
    assert "intent review pending" in begun.stderr
    withdrawn = cli_json(live, workspace, "withdraw")
    assert withdrawn["review"]["status"] == "cancelled"
    review = cli_json(live, workspace, "review")
    assert review["review"]["decision"] == "cancelled"


def test_configuration_comes_from_the_environment_only(live: Live, workspace: Path,
                                                       tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(live.token + "\n")
    env = agent_env(live)
    del env["GOVERNOR_TOKEN"]
    with_file = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "governor_client", "status"], cwd=workspace, timeout=60,
        env={**env, "GOVERNOR_TOKEN_FILE": str(token_file)}, capture_output=True, text=True,
        check=False)
    assert with_file.returncode == 0, with_file.stderr
    missing = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "governor_client", "status"], cwd=workspace, env=env,
        capture_output=True, text=True, timeout=60, check=False)
    assert missing.returncode == 2
    assert json.loads(missing.stderr)["error"]["code"] == "CONFIGURATION"
    usage = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "governor_client", "status", "--token", live.token],
        cwd=workspace, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert usage.returncode == 2 and "unrecognized arguments" in usage.stderr


@pytest.mark.sandbox
def test_run_queues_a_trusted_profile_and_waits_for_its_result(
    live_with_worker: Live,
) -> None:
    live = live_with_worker
    workspace = live.workspace_root / "run-profile"
    workspace.mkdir()
    begun = cli_json(live, workspace, "begin", "--code", stdin=json.dumps(readme_contract()))
    assert begun["status"] == "active"
    failed = cli_json(live, workspace, "run", "readme-present", "--wait", "60")
    assert failed["state"] == "finished" and failed["result"]["passed"] is False
    (workspace / "README.md").write_text("# Tool\n\n## Install\n")
    passed = cli_json(live, workspace, "run", "readme-present", "--wait", "60")
    assert passed["state"] == "finished" and passed["result"]["passed"] is True
    assert cli_json(live, workspace, "verify")["decision"] == "certified"

"""docs/operations.md, "A careful operator's configuration": its shell block and its profile
file run as written against a served project (the operator's venv, which the shell block makes,
moved under the test's own directory: `ENVIRONMENT` and the one path in the profile), and the
profiles' real sandbox runs judge the work — pytest from that venv, mounted read-only, and the
held-out expected outputs: the baselines fail what the task is about (never `infrastructure`),
the fixed package passes both, and the contract is certified. B13 (bench/b13_cheater.py) reads
the same two blocks."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.docs.markdown import (
    OPERATOR_ENVIRONMENT,
    ROOT,
    Block,
    fenced_blocks,
    operator_environment_moved,
)
from tests.live import live_server

pytestmark = pytest.mark.sandbox  # the profile's runs go through bubblewrap

SECTION = "A careful operator's configuration"
# The worked example's package (docs/heldout.md), whose suite the block loads by default.
PACKAGE = ROOT / "docs" / "examples" / "heldout" / "textstats"
FIXED = (PACKAGE / "core.py").read_text()
BUGGY = FIXED.replace("    if len(ordered) % 2:\n        return ordered[middle]\n"
                      "    return (ordered[middle - 1] + ordered[middle]) / 2\n",
                      "    return ordered[middle]\n")
TESTS = ("from textstats import median\n\n\ndef test_median_odd():\n"
         "    assert median([3, 1, 2]) == 2\n\n\n"
         "def test_median_even():\n    assert median([4, 1, 3, 2]) == 2.5\n")


def careful_blocks() -> tuple[Block, Block]:
    """The section's one shell block and one profile file."""
    blocks = [block for block in fenced_blocks(ROOT / "docs" / "operations.md")
              if block.heading == SECTION]
    shell = [block for block in blocks if block.language == "sh"]
    profiles = [block for block in blocks if block.language == "json"]
    assert len(shell) == 1 and len(profiles) == 1, f"one sh and one json block under {SECTION!r}"
    return shell[0], profiles[0]


def test_the_careful_configuration_sets_every_careful_choice() -> None:
    shell, profiles = careful_blocks()
    for option in ("--review-mode off", "--unattended-evidence operator",
                   "--require-discriminating on", "--protected-paths", "governor_profiles load"):
        assert option in shell.text, option
    profile, outputs = json.loads(profiles.text)["profiles"]
    assert profile["report"] == "junit" and profile["required"] is True
    # rules §17.8: the tests' dependencies are an operator directory the shell block makes,
    # mounted read-only, and the command starts from it — never a workspace's .venv
    assert profile["environment"] == [OPERATOR_ENVIRONMENT]
    assert profile["argv"][0] == f"{OPERATOR_ENVIRONMENT}/bin/python"
    assert f"ENVIRONMENT=${{ENVIRONMENT:-{OPERATOR_ENVIRONMENT}}}" in shell.text
    assert "governor_heldout load" in shell.text
    assert outputs["oracle"] == outputs["heldout"] == "expected-outputs"
    assert outputs["required"] is True


def wait_for_baseline(client: httpx.Client, session: str, after: int,
                      profile: str = "pytest") -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        events = client.get(f"/sessions/{session}/events", params={"after": after}).json()
        for event in events["events"]:
            if (event["type"] == "reliability/code-verification" and event["data"]["baseline"]
                    and event["data"]["profile"] == profile):
                return dict(event["data"])
        time.sleep(0.3)
    raise AssertionError(f"the baseline run of {profile} never finished")


def test_rule_17_the_careful_blocks_run_as_written_and_their_profile_judges_the_work(
    tmp_path: Path,
) -> None:
    shell, profiles = careful_blocks()
    environment = tmp_path / "environments" / "py311"  # outside the served workspace root
    profile_file = tmp_path / "governor-profiles.json"
    profile_file.write_text(operator_environment_moved(profiles.text, environment))
    with live_server(tmp_path / "server", worker=True) as live:
        live.manage("governor_project", "create", "careful", "--workspace-root",
                    str(live.workspace_root))
        token = live.manage("governor_token", "create", "--project", "careful", "--owner",
                            "demo-agent").strip()
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", shell.text],  # noqa: S603, S607
                              cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
                              env={**live.env, "PROJECT": "careful",
                                   "PROFILES": str(profile_file),
                                   "ENVIRONMENT": str(environment)})
        assert done.returncode == 0, done.stdout + done.stderr
        assert "2 changed" in done.stdout and "a new version" in done.stdout
        assert "warning" not in done.stdout + done.stderr
        assert (environment / "pyvenv.cfg").is_file()

        workspace = live.workspace_root / "textstats"
        (workspace / "tests").mkdir(parents=True)
        shutil.copytree(PACKAGE, workspace / "textstats")
        (workspace / "textstats" / "core.py").write_text(BUGGY)
        (workspace / "tests" / "test_median.py").write_text(TESTS)
        with httpx.Client(base_url=live.url + "/api/v1", timeout=70,
                          headers={"Authorization": f"Bearer {token}"}) as client:
            project = client.get("/project").json()
            assert project["unattended_evidence"] == "operator"
            assert project["require_discriminating_evidence"] is True
            assert "tests/**" in project["protected_paths"]
            assert project["runner_control_exempt"] == []
            session = client.post("/sessions", json={"workspace": {
                "kind": "path", "path": str(workspace)}}).json()["id"]
            begun = client.post(f"/sessions/{session}/code-contracts", json={
                "objective": "Fix median for an even number of values",
                "claims": [{"id": "median-fixed", "statement": "The tests pass",
                            "importance": "critical", "verification": "deterministic",
                            "check_ids": ["tests-pass"]}],
                "checks": [{"id": "tests-pass", "kind": "code_verification_succeeded",
                            "profile": "pytest"}]})
            assert begun.status_code == 201, begun.text
            started = begun.json()["contract"]["startedAtSeq"]
            baseline = wait_for_baseline(client, session, started)
            assert baseline["failureKind"] == "exit", baseline  # pytest's 1: a test failed
            assert baseline["environment"] is None  # an operator directory: never hashed
            assert (baseline["report"]["passed"], baseline["report"]["failed"]) == (1, 1)
            outputs = wait_for_baseline(client, session, started, "expected-outputs")
            assert outputs["failureKind"] == "outputs-differ", outputs
            assert outputs["oracle"]["matched"] == 9 and outputs["oracle"]["cases"] == 12

            (workspace / "textstats" / "core.py").write_text(FIXED)
            for profile in ("pytest", "expected-outputs"):
                queued = client.post(f"/sessions/{session}/code-verifications",
                                     json={"profile": profile}).json()
                result = client.get(f"/code-verifications/{queued['id']}",
                                    params={"wait": 60}).json()["result"]
                assert result["passed"] is True, result
            assert (result["oracle"]["matched"], result["oracle"]["cases"]) == (12, 12)
            stop = client.post(f"/sessions/{session}/turn-stop").json()
            assert stop["terminal"]["status"] == "certified", stop

"""Issue 41 (rules §19): any agent's change certified at the pull request with no session. Stock
git holds a base and a head branch; `governor-agent gate` reads both trees from git's objects
(the head is never checked out), uploads what the served governor lacks, waits while the real
worker runs the base's policy profiles in the real bubblewrap sandbox, and adds the note of
§16.3 when certified, which `python -m governor.verify --commit --note` checks offline and
`--server` checks online. Heads that cheat — delete a failing test, drop a profile from the
policy, add a runner-control file, change a protected path — are not certified, each finding
naming the path and the rule. Nothing is mocked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.api.test_evidence_the_agent_cannot_shape import PYTEST, RIGHT, TESTS, WRONG
from tests.clients.conftest import agent_env
from tests.clients.test_certified_commits import NOTES, git, new_repository
from tests.live import Live

pytestmark = pytest.mark.sandbox
POLICY = ('required_profiles = ["gate-tests"]\n'
          'protected_paths = ["tests/**", "ci/**"]\n')


@pytest.fixture(scope="module")
def gate_server(live_with_worker: Live, tmp_path_factory: pytest.TempPathFactory
                ) -> tuple[Live, Path]:
    """The served stack with its worker, a report profile the base's policy requires, and a
    gate token (in a file, as a CI secret is)."""
    live = live_with_worker
    tmp = tmp_path_factory.mktemp("gate")
    profiles = tmp / "profiles.json"
    profiles.write_text(json.dumps({"profiles": [{
        "id": "gate-tests", "description": "the repository's tests", "argv": PYTEST,
        "report": "junit", "timeout_ms": 60_000, "required": False}]}))
    live.manage("governor_profiles", "load", str(profiles), "--project", "demo")
    secret = live.manage("governor_token", "create", "--project", "demo", "--name", "ci",
                         "--owner", "admin", "--kind", "gate").strip()
    token_file = tmp / "gate-token"
    token_file.write_text(secret + "\n")
    return live, token_file


def repository(path: Path) -> Path:
    """A repository whose main branch holds the base: the bug, its failing test, the policy
    and a README (the demo project's required sample profile looks for one)."""
    repo = new_repository(path, "sha1")
    (repo / "tests").mkdir()
    (repo / "calc.py").write_text(WRONG)
    (repo / "tests" / "test_calc.py").write_text(TESTS)
    (repo / "README.md").write_text("# calc\n")
    (repo / ".governor-gate.toml").write_text(POLICY)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "checkout", "-q", "-b", "head")
    return repo


def head_commit(repo: Path, files: dict[str, str | None], message: str = "the change") -> None:
    for name, text in files.items():
        target = repo / name
        if text is None:
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def gate(server: tuple[Live, Path], repo: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    live, token_file = server
    env = {key: value for key, value in agent_env(live).items()
           if key not in ("GOVERNOR_TOKEN", "GOVERNOR_URL")}
    return subprocess.run(  # noqa: S603
        [sys.executable, "-m", "governor_client", "gate", "--base", "main", "--head", "head",
         "--repo", str(repo), "--server", live.url, "--token-file", str(token_file), *extra],
        env=env, capture_output=True, text=True, timeout=300, check=False)


def answer_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def verify(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603
        [sys.executable, "-m", "governor.verify", "--commit", "head", "--repo", str(repo),
         *args], capture_output=True, text=True, timeout=120, check=False,
        cwd=Path(__file__).resolve().parents[2])


def test_rule_19_3_an_honest_change_is_certified_and_its_note_verifies(
        gate_server: tuple[Live, Path], tmp_path: Path) -> None:
    repo = repository(tmp_path / "repo")
    head_commit(repo, {"calc.py": RIGHT})
    git(repo, "checkout", "-q", "main")  # the head is never checked out for the gate
    done = gate(gate_server, repo)
    assert done.returncode == 0, done.stdout + done.stderr
    answer = answer_of(done)
    assert answer["status"] == "certified" and answer["note"] == NOTES
    assert "gate-tests on the head: passed" in done.stderr
    assert "proved [fail-to-pass] fail-to-pass 1 of 1, pass-to-pass 1 of 1" in done.stderr
    live, token_file = gate_server
    keys = tmp_path / "keys.json"
    keys.write_bytes(subprocess.run(  # noqa: S603
        ["curl", "-sf", f"{live.url}/api/v1/keys"], capture_output=True, check=True,  # noqa: S607
        timeout=30).stdout)
    offline = verify(repo, "--note", "--key", str(keys))
    assert offline.returncode == 0, offline.stdout + offline.stderr
    assert f"certified by gated change {answer['change']}" in offline.stdout
    online = verify(repo, "--server", live.url, "--token", str(token_file), "--key", str(keys))
    assert online.returncode == 0, online.stdout + online.stderr
    # the base is already run: a second change on it reuses the base's run
    git(repo, "checkout", "-q", "head")
    head_commit(repo, {"NOTES.md": "mul fixed\n"}, "notes")
    again = gate(gate_server, repo)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "1 to upload" in again.stderr  # only the new file's blob
    assert "gate-tests on the base: passed" not in again.stderr
    runs = _runs(live, token_file, answer["change"], answer_of(again)["change"])
    assert runs[0]["base"] == runs[1]["base"]


def _runs(live: Live, token_file: Path, *changes: str) -> list[dict[str, str]]:
    import httpx

    token = token_file.read_text().strip()
    found = []
    for change in changes:
        body = httpx.get(f"{live.url}/api/v1/changes/{change}", timeout=30,
                         headers={"Authorization": f"Bearer {token}"}).json()
        found.append({run["role"]: run["id"] for run in body["runs"]
                      if run["profile"] == "gate-tests"})
    return found


@pytest.mark.parametrize(("files", "rule", "named"), [
    ({"tests/test_calc.py": None}, "protected-paths", "tests/test_calc.py (deleted)"),
    ({".governor-gate.toml": 'protected_paths = ["tests/**"]\n'}, "gate-policy",
     ".governor-gate.toml (modified)"),
    ({"conftest.py": "def pytest_collection_modifyitems(items):\n    items.clear()\n"},
     "protected-paths", "conftest.py (added)"),
    ({"ci/deploy.sh": "echo deployed\n"}, "protected-paths", "ci/deploy.sh (added)"),
], ids=["deletes-the-failing-test", "drops-a-profile", "adds-conftest", "changes-protected"])
def test_rule_19_3_a_cheating_head_is_not_certified_naming_path_and_rule(
        gate_server: tuple[Live, Path], tmp_path: Path, files: dict[str, str | None],
        rule: str, named: str) -> None:
    repo = repository(tmp_path / "repo")
    head_commit(repo, files)
    done = gate(gate_server, repo)
    assert done.returncode == 1, done.stdout + done.stderr
    assert answer_of(done)["status"] == "not-certified"
    finding = next(line for line in done.stdout.splitlines() if line.startswith(f"[{rule}]"))
    assert named in finding
    assert git(repo, "notes", f"--ref={NOTES}", "list", check=False).stdout == ""


def test_rule_19_3_observe_mode_exits_0_and_records_what_it_would_refuse(
        gate_server: tuple[Live, Path], tmp_path: Path) -> None:
    repo = repository(tmp_path / "repo")
    head_commit(repo, {"tests/test_calc.py": None})
    done = gate(gate_server, repo, "--observe")
    assert done.returncode == 0, done.stdout + done.stderr
    answer = answer_of(done)
    assert answer["observe"] is True and answer["status"] == "not-certified"
    assert "[protected-paths]" in done.stdout
    assert "observe mode" in done.stderr


def test_rule_19_3_a_base_that_is_not_an_ancestor_is_refused_before_anything_is_sent(
        gate_server: tuple[Live, Path], tmp_path: Path) -> None:
    repo = repository(tmp_path / "repo")
    head_commit(repo, {"calc.py": RIGHT})
    git(repo, "checkout", "-q", "main")
    head_commit(repo, {"README.md": "# other\n"}, "main moved on")
    done = gate(gate_server, repo)
    assert done.returncode == 1
    error = json.loads(done.stderr.strip().splitlines()[-1])["error"]
    assert error["details"][0]["path"] == "base" and "not an ancestor" in error["message"]
    unknown = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "governor_client", "gate", "--base", "no-such-branch", "--head",
         "head", "--repo", str(repo), "--server", gate_server[0].url, "--token-file",
         str(gate_server[1])], env={**os.environ, "PYTHONPATH": agent_env(gate_server[0])[
             "PYTHONPATH"]}, capture_output=True, text=True, timeout=120, check=False)
    assert unknown.returncode == 1
    assert "base: 'no-such-branch' names no commit" in unknown.stderr


def test_rule_19_1_a_refused_policy_file_fails_the_cli_with_the_servers_words(
        gate_server: tuple[Live, Path], tmp_path: Path) -> None:
    repo = repository(tmp_path / "repo")
    git(repo, "checkout", "-q", "main")
    (repo / ".governor-gate.toml").write_text('required_profiles = ["gate-tests"]\n'
                                              "tamper_scan = maybe\n")
    git(repo, "commit", "-q", "-am", "a broken policy")
    git(repo, "checkout", "-q", "-B", "head")
    head_commit(repo, {"calc.py": RIGHT})
    for extra in ((), ("--observe",)):
        done = gate(gate_server, repo, *extra)
        assert done.returncode == 1, done.stdout + done.stderr
        error = json.loads(done.stderr.strip().splitlines()[-1])["error"]
        assert error["status"] == 422
        assert error["details"][0]["path"] == "base: .governor-gate.toml"
        assert "line 2" in error["details"][0]["message"]


def test_rule_19_3_a_head_that_changes_excluded_paths_is_refused_naming_them(
        gate_server: tuple[Live, Path], tmp_path: Path) -> None:
    """Review attack: the project leaves `__pycache__/**` out of every tree (build output). A
    head with the honest fix also commits `__pycache__/calc.cpython-311.pyc` — bytecode of
    other code, which an unchecked-hash .pyc makes Python run instead of calc.py. The gate
    judged the tree without it and certified; a merge would carry it. Refused now, naming it,
    before anything is sent."""
    live, _ = gate_server
    live.manage("shell", "-c", "from governor.models import Project; "
                "Project.objects.filter(slug='demo').update(tree_exclusions=['__pycache__/**'])")
    try:
        repo = repository(tmp_path / "repo")
        head_commit(repo, {"calc.py": RIGHT, "__pycache__/calc.cpython-311.pyc": "not judged"})
        done = gate(gate_server, repo)
        assert done.returncode == 1, done.stdout + done.stderr
        assert '"status": "certified"' not in done.stdout
        error = json.loads(done.stderr.strip().splitlines()[-1])["error"]
        assert error["details"][0]["path"] == "head"
        assert "(__pycache__/calc.cpython-311.pyc)" in error["message"]
        assert git(repo, "notes", f"--ref={NOTES}", "list", check=False).stdout == ""
        observed = gate(gate_server, repo, "--observe")  # bad input fails in either mode
        assert observed.returncode == 1
    finally:
        live.manage("shell", "-c", "from governor.models import Project; "
                    "Project.objects.filter(slug='demo').update(tree_exclusions=[])")

"""docs/integrations.md, "Gate pull requests from any agent": the GitHub Actions workflow and the
GitLab CI job run as written. Their shell steps after the install are taken from the page and
run with bash, with the variables the forge would set, against a local bare repository holding
a base branch and a pull request's head ref, and a served governor with its worker and real
bubblewrap; git has no user configuration, as on a fresh CI runner. The workflow's shape is
checked too: `pull_request_target` (the job as the base has it), read-only permissions, and no
step that checks out, installs from or runs the head."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.api.test_evidence_the_agent_cannot_shape import RIGHT
from tests.clients.test_certified_commits import git
from tests.clients.test_gate_cli import gate_server, head_commit, repository  # noqa: F401
from tests.docs.markdown import ROOT, fenced_blocks
from tests.live import Live

pytestmark = pytest.mark.sandbox
PAGE = ROOT / "docs" / "integrations.md"


def recipe(heading: str) -> dict[str, Any]:
    [block] = [b for b in fenced_blocks(PAGE) if b.heading == heading and b.language == "yaml"]
    return dict(yaml.safe_load(block.text))


def github() -> dict[str, Any]:
    return recipe("GitHub Actions: a required check")


def gitlab() -> dict[str, Any]:
    return recipe("GitLab CI")


def test_rule_19_3_the_github_workflow_comes_from_the_base_and_runs_nothing_of_the_head() -> None:
    workflow = github()
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true
    assert list(triggers) == ["pull_request_target"]
    assert workflow["permissions"] == {"contents": "read"}
    steps = workflow["jobs"]["gate"]["steps"]
    checkout = next(step for step in steps if str(step.get("uses", "")).startswith(
        "actions/checkout"))
    assert "ref" not in checkout.get("with", {})  # the base, as pull_request_target gives it
    script = "\n".join(str(step.get("run", "")) for step in steps)
    assert "checkout" not in script and "pip install ." not in script
    assert gitlab()["governor-gate"]["variables"] == {"GIT_STRATEGY": "none"}


def ci_env(tmp: Path, live: Live, **extra: str) -> dict[str, str]:
    venv_bin = Path(sys.executable).parent
    env = {key: value for key, value in os.environ.items() if not key.startswith("GOVERNOR_")}
    return {**env, "PATH": f"{venv_bin}:{env['PATH']}", "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1", "GOVERNOR_URL": live.url, "RUNNER_TEMP": str(tmp),
            **extra}


def forge(tmp: Path, head_files: dict[str, str | None]) -> tuple[Path, str, str]:
    """A bare repository (the forge) with main and the pull request's head refs; (bare, base
    sha, head sha)."""
    work = repository(tmp / "author")
    head_commit(work, head_files)
    bare = tmp / "forge.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)  # noqa: S603,S607
    git(work, "push", "-q", str(bare), "main:refs/heads/main", "head:refs/pull/1/head",
        "head:refs/merge-requests/1/head")
    return (bare, git(work, "rev-parse", "main").stdout.strip(),
            git(work, "rev-parse", "head").stdout.strip())


def run_github(server: tuple[Live, Path], tmp: Path, bare: Path, base: str,
               head: str) -> subprocess.CompletedProcess[str]:
    live, token_file = server
    step = next(step for step in github()["jobs"]["gate"]["steps"]
                if step.get("name") == "gate the change")
    runner = tmp / "github"
    runner.mkdir()
    checkout = runner / "checkout"  # what actions/checkout leaves: the base, all history
    subprocess.run(["git", "clone", "-q", "--branch", "main", str(bare), str(checkout)],  # noqa: S603,S607
                   check=True)
    env = ci_env(runner, live, GOVERNOR_GATE_TOKEN=token_file.read_text().strip(),
                 BASE_SHA=base, HEAD_SHA=head, PR_NUMBER="1")
    return subprocess.run(["/bin/bash", "-e", "-c", step["run"]], cwd=checkout, env=env,  # noqa: S603
                          capture_output=True, text=True, timeout=300, check=False)


def run_gitlab(server: tuple[Live, Path], tmp: Path, bare: Path, base: str,
               head: str) -> subprocess.CompletedProcess[str]:
    """GitLab's variables as it sets them: the diff base is the merge base of the target
    branch and the head (the target's tip only when the head contains it)."""
    live, token_file = server
    diff_base = subprocess.run(["git", "-C", str(bare), "merge-base", base, head],  # noqa: S603,S607
                               check=True, capture_output=True, text=True).stdout.strip()
    script = gitlab()["governor-gate"]["script"]
    assert script[0].startswith("pip install")
    builds = tmp / "gitlab"
    builds.mkdir()
    env = ci_env(builds, live, CI_BUILDS_DIR=str(builds), CI_REPOSITORY_URL=str(bare),
                 CI_MERGE_REQUEST_TARGET_BRANCH_NAME="main", CI_MERGE_REQUEST_IID="1",
                 CI_MERGE_REQUEST_DIFF_BASE_SHA=diff_base, CI_COMMIT_SHA=head,
                 GOVERNOR_GATE_TOKEN_FILE=str(token_file))
    return subprocess.run(["/bin/bash", "-e", "-c", "\n".join(script[1:])], cwd=builds,  # noqa: S603
                          env=env, capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize("forge_name", ["github", "gitlab"])
def test_rule_19_3_the_documented_ci_steps_certify_an_honest_change_and_refuse_a_cheat(
        gate_server: tuple[Live, Path], tmp_path: Path, forge_name: str) -> None:  # noqa: F811
    run = run_github if forge_name == "github" else run_gitlab
    bare, base, head = forge(tmp_path / "honest", {"calc.py": RIGHT})
    done = run(gate_server, tmp_path / "honest", bare, base, head)
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"status": "certified"' in done.stdout
    bare, base, head = forge(tmp_path / "cheat", {"tests/test_calc.py": None})
    done = run(gate_server, tmp_path / "cheat", bare, base, head)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "[protected-paths]" in done.stdout and "tests/test_calc.py (deleted)" in done.stdout


def stale_forge(tmp: Path) -> tuple[Path, str, str]:
    """Review attack: main gained its gate policy after the pull request branched off, and the
    head (branched from before) deletes the failing test; (bare, base sha, head sha)."""
    from tests.clients.test_certified_commits import new_repository
    from tests.clients.test_gate_cli import POLICY

    work = new_repository(tmp / "author", "sha1")
    (work / "tests").mkdir()
    (work / "calc.py").write_text("def mul(a, b):\n    return a + b\n")
    (work / "tests" / "test_calc.py").write_text("from calc import mul\n\n\ndef test_mul():\n"
                                                  "    assert mul(3, 4) == 12\n")
    (work / "README.md").write_text("# calc\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "before the gate")
    git(work, "branch", "head")
    (work / ".governor-gate.toml").write_text(POLICY)
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "the gate's policy")
    git(work, "checkout", "-q", "head")
    head_commit(work, {"tests/test_calc.py": None})
    bare = tmp / "forge.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)  # noqa: S603,S607
    git(work, "push", "-q", str(bare), "main:refs/heads/main", "head:refs/pull/1/head",
        "head:refs/merge-requests/1/head")
    return (bare, git(work, "rev-parse", "main").stdout.strip(),
            git(work, "rev-parse", "head").stdout.strip())


@pytest.mark.parametrize("forge_name", ["github", "gitlab"])
def test_rule_19_1_a_head_branched_before_the_policy_is_not_judged_by_an_older_base(
        gate_server: tuple[Live, Path], tmp_path: Path, forge_name: str) -> None:  # noqa: F811
    """The recipes once gated against `git merge-base` (GitLab: the diff base), so a head
    branched from an older commit of main — before `.governor-gate.toml` existed — was judged
    by that commit's policy (none: its tests not even run) and certified. They now gate against
    the base branch as it is; a head that does not contain it is refused, naming the base, until
    it is brought up to date."""
    run = run_github if forge_name == "github" else run_gitlab
    bare, base, head = stale_forge(tmp_path)
    done = run(gate_server, tmp_path, bare, base, head)
    assert done.returncode == 1, done.stdout + done.stderr
    assert '"status": "certified"' not in done.stdout
    assert "is not an ancestor of the head" in done.stderr, done.stderr

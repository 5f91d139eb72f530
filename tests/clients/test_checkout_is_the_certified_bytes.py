"""Rules §17.9 (issue 38, finding 2): a checkout is the certified bytes. A `.gitattributes` line
`calc.py ident` (built into git, no configuration needed) makes every checkout expand `$Id$`,
and code that branches on it passes its tests in the certified tree and fails them in every
clone. Certification refuses such a tree; `python -m governor.verify --commit`, the git hook and
`governor-agent commit` refuse such a commit (one certified before the rule), each naming the
attribute and the path; attributes that convert nothing are not refused. Stock git, real pytest
and the real served stack; nothing is mocked."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.api.test_contracts import readme_contract
from tests.clients.conftest import agent_env, cli
from tests.clients.test_certified_commits import git, install, new_repository
from tests.live import Live

CALC = '''VERSION = "$Id$"


def add(a, b):
    if VERSION != "$" + "Id$":  # a checkout expanded the keyword
        return a - b
    return a + b
'''
TEST_CALC = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
NAMED = "`ident` applies to calc.py (.gitattributes:1)"
HARMLESS = "*.png binary\n*.md linguist-documentation\ndocs/ export-ignore\n*.py -text diff\n"

# The attempt service as every server ran it before rule 17.9: the tree's attributes unread.
BEFORE_THE_RULE = """
from governor.models import Session
from governor.services import trees
from governor.services.contracts import attempt_record
trees.HashedWorkspace.checkout_converted = lambda self, *, max_bytes: []
session = Session.objects.get(pk="{session}")
print(attempt_record(session=session, token=session.created_by, trigger="manual").decision)
"""


def plant(workspace: Path, attributes: str = "calc.py ident\n") -> None:
    (workspace / "calc.py").write_text(CALC)
    (workspace / "test_calc.py").write_text(TEST_CALC)
    (workspace / ".gitattributes").write_text(attributes)


def agent(live: Live, workspace: Path, *args: str, stdin: str | None = None,
          **env: str) -> dict[str, Any]:
    done = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "governor_client", *args], cwd=workspace, input=stdin,
        env=agent_env(live, **env), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout)) if done.stdout.strip() else {}


def suite_passes(directory: Path) -> bool:
    """Real pytest (the sandbox's interpreter) on the directory's test_calc.py."""
    return subprocess.run(  # noqa: S603
        ["/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_calc.py"],
        cwd=directory, capture_output=True, text=True, timeout=120, check=False,
    ).returncode == 0


def begin(live: Live, workspace: Path, **env: str) -> None:
    new_repository(workspace, "sha1")
    plant(workspace)
    assert agent(live, workspace, "begin", "-", stdin=json.dumps(readme_contract()), **env)[
        "status"] == "active"
    (workspace / "README.md").write_text("# Calc\n\n## Install\n")


@pytest.mark.parametrize("kind", ["path", "snapshot"])
def test_rule_17_9_certification_refuses_a_tree_whose_gitattributes_convert_a_path(
        live: Live, workspace: Path, review_off: None, kind: str) -> None:
    """A path session's workspace and a snapshot session's uploaded tree alike."""
    env = {"GOVERNOR_WORKSPACE": "snapshot"} if kind == "snapshot" else {}
    begin(live, workspace, **env)
    assert suite_passes(workspace)
    refused = agent(live, workspace, "turn-stop", **env)
    assert refused["action"] == "steer" and "terminal" not in refused, refused
    assert NAMED in refused["message"], refused["message"]
    assert all(NAMED in result["evidence"] and not result["passed"]
               for result in refused["attempt"]["results"])
    # Attributes that convert nothing (binary is -diff -merge -text) are not refused.
    (workspace / ".gitattributes").write_text(HARMLESS)
    certified = agent(live, workspace, "turn-stop", **env)
    assert certified["terminal"]["status"] == "certified", certified


def test_rule_17_9_a_commit_whose_checkout_differs_is_refused_at_every_gate(
        live: Live, workspace: Path, tmp_path: Path, review_off: None) -> None:
    """The attack end to end on a certification made before the rule: the clone's tests fail,
    and `governor-agent commit`, `verify --commit` and the pre-receive hook refuse it."""
    begin(live, workspace)
    session = agent(live, workspace, "status")["id"]
    assert live.manage("shell", "-c", BEFORE_THE_RULE.format(session=session)).split()[
        -1] == "certified"
    refused = cli(live, workspace, "commit")
    assert refused.returncode == 1, refused.stdout
    error = json.loads(refused.stderr)["error"]
    assert error["code"] == "NOT_CERTIFIED" and NAMED in error["message"], error
    assert git(workspace, "rev-parse", "--verify", "HEAD", check=False).returncode != 0
    assert not git(workspace, "ls-files", "--stage").stdout  # the index as it was: empty

    git(workspace, "add", "-A", "--", ".", ":!/.governor")
    git(workspace, "commit", "-q", "-m", "Add calc")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(workspace), str(clone))
    assert suite_passes(workspace) and not suite_passes(clone)  # every checkout differs

    keys, token = tmp_path / "keys.json", tmp_path / "token"
    with live.client() as client:
        keys.write_bytes(client.get("/keys").content)
    token.write_text(live.token)
    verified = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "governor.verify", "--commit", "HEAD", "--repo", str(workspace),
         "--server", live.url, "--token", str(token), "--key", str(keys)],
        capture_output=True, text=True, timeout=120, check=False)
    assert verified.returncode == 1 and NAMED in verified.stdout, verified.stdout

    remote = new_repository(tmp_path / "remote.git", "sha1", bare=True)
    install(live, remote, "--server", live.url, "--token-file", str(token), "--keys-file",
            str(keys))
    pushed = git(workspace, "push", "-q", str(remote), "HEAD:refs/heads/main", check=False,
                 PYTHONPATH=agent_env(live)["PYTHONPATH"])
    assert pushed.returncode != 0 and NAMED in pushed.stderr, pushed.stderr
    assert "push refused" in pushed.stderr

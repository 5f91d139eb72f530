"""Every command and snippet in README.md and docs/*.md that is marked runnable runs as written.

The marker is the line `<!-- runnable -->` (`RUNNABLE`) just above a fenced block; rendered
Markdown does not show it. A marked block is run, unchanged, against a served instance of its
own — migrated and bootstrapped as `make run` leaves it (the `demo` project, review required,
an agent token), on a free port, with no worker — in this environment:

- `GOVERNOR_URL` (the server, no `/api/v1`) and `GOVERNOR_TOKEN` (the agent token) are set;
  `GOVERNOR_REVIEW_WAIT` is 1, so a snippet that waits for a person waits one second;
- the working directory stands for the checkout: its `workspaces/` is the demo project's
  workspace root (a fresh directory per instance), and its `manage.py` and `.venv` are this
  checkout's (links), with the instance's settings (`GOVERNOR_VAR_DIR`, ...) in the
  environment, so `.venv/bin/python manage.py …` acts on the served instance as it would on
  the one `make run` serves;
- `PATH` starts with the virtualenv's `bin/` (`python`, `governor-agent`);
- `sh` blocks run with `bash -e -o pipefail`, `python` blocks with the virtualenv's Python.

A block passes when it exits 0. Mark a block only if it runs so here; a block that needs a
placeholder filled in, a machine of its own or root is not marked.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.markdown import PAGES, Block, fenced_blocks
from tests.live import ROOT, Live, live_server

RUNNABLE = "<!-- runnable -->"
RUNNERS = {"sh": ["bash", "-e", "-o", "pipefail"], "python": [sys.executable]}
VENV_BIN = Path(sys.executable).parent


def runnable_blocks() -> list[Block]:
    return [block for page in PAGES for block in fenced_blocks(page)
            if block.before.strip() == RUNNABLE]


BLOCKS = runnable_blocks()


def run(block: Block, live: Live, cwd: Path) -> subprocess.CompletedProcess[str]:
    script = cwd / f"snippet-{block.page.stem}-{block.line}.{block.language}"
    script.write_text(block.text)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("GOVERNOR_") and key != "DATABASE_URL"}
    env.update({key: value for key, value in live.env.items()  # the instance's settings
                if key.startswith("GOVERNOR_") or key == "DATABASE_URL"})
    env.update(GOVERNOR_URL=live.url, GOVERNOR_TOKEN=live.token, GOVERNOR_REVIEW_WAIT="1",
               PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}")
    return subprocess.run(  # noqa: S603
        [*RUNNERS[block.language], str(script)], cwd=cwd, env=env, capture_output=True,
        text=True, timeout=120, check=False)


def checkout(live: Live) -> Path:
    """The directory that stands for the checkout: the parent of the demo workspace root,
    with this checkout's `manage.py` and virtualenv."""
    assert live.workspace_root.name == "workspaces"
    here = live.workspace_root.parent
    for name, target in (("manage.py", ROOT / "manage.py"), (".venv", VENV_BIN.parent)):
        if not (here / name).exists():
            (here / name).symlink_to(target)
    return here


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with live_server(tmp_path_factory.mktemp("snippets")) as server:
        yield server


def test_every_marker_stands_above_a_block_that_can_be_run() -> None:
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            if line.strip() == RUNNABLE:
                fence = lines[number] if number < len(lines) else ""
                language = fence.removeprefix("```")
                assert fence.startswith("```") and language in RUNNERS, (
                    f"{page.name}:{number}: {RUNNABLE} must stand just above a fenced block "
                    f"of {', '.join(RUNNERS)}")


def test_the_readme_session_and_the_python_client_snippet_are_marked() -> None:
    marked = {(block.page.name, block.heading, block.language) for block in BLOCKS}
    assert ("README.md", "Using it", "sh") in marked
    assert ("integrations.md", "The client", "python") in marked


def test_every_command_docs_reviewing_gives_to_run_is_marked() -> None:
    """Issue 40: its Stage 3 gave a `governor_project` command that answered `invalid choice`.
    Every `manage.py` command the page gives stands in a marked block (which runs it)."""
    page = ROOT / "docs" / "reviewing.md"
    marked = "".join(block.text for block in BLOCKS if block.page == page)
    assert ".venv/bin/python manage.py governor_project set demo --delivery-review required" in (
        marked)
    text = page.read_text(encoding="utf-8")
    for given in re.findall(r"`(manage\.py [^`]*)`", text):
        assert given in marked, f"docs/reviewing.md gives `{given}` outside a marked block"


@pytest.mark.parametrize("block", BLOCKS, ids=[block.where() for block in BLOCKS])
def test_a_marked_block_runs_as_written(block: Block, live: Live) -> None:
    result = run(block, live, checkout(live))
    assert result.returncode == 0, f"{block.where()}\n{result.stdout}\n{result.stderr}"


def test_the_readme_session_waits_for_review_and_is_allowed_to_stop(live: Live) -> None:
    (readme,) = [block for block in BLOCKS if block.page.name == "README.md"
                 and block.heading == "Using it"]
    result = run(readme, live, checkout(live))
    assert result.returncode == 0, result.stderr
    assert '"status": "review-pending"' in result.stdout
    assert f'"review_url": "{live.url}/reviews/' in result.stdout
    assert '"action": "allow"' in result.stdout


def test_the_client_snippet_says_a_review_is_pending_then_certifies_once_review_is_off(
    tmp_path: Path,
) -> None:
    (snippet,) = [block for block in BLOCKS if block.page.name == "integrations.md"
                  and block.heading == "The client"]
    with live_server(tmp_path / "server") as server:
        pending = run(snippet, server, checkout(server))
        assert pending.returncode == 0, pending.stderr
        assert "waiting for review: " + server.url in pending.stdout
        assert "a contract is waiting for review" in pending.stdout
        assert "a reviewer decides at " + server.url in pending.stdout

        server.manage("governor_project", "set", "demo", "--review-mode", "off")
        shutil.rmtree(server.workspace_root / "readme-task" / ".governor")  # a new session
        certified = run(snippet, server, checkout(server))
        assert certified.returncode == 0, certified.stderr
        assert "'decision': 'certified'" in certified.stdout


def test_the_documented_envelope_is_a_whole_valid_turn(live: Live) -> None:
    (envelope,) = [block for block in BLOCKS if block.page.name == "api.md"
                   and block.heading == "The event envelope"]
    result = run(envelope, live, checkout(live))
    assert result.returncode == 0, result.stderr
    assert '"first_seq": 0' in result.stdout and '"last_seq": 7' in result.stdout

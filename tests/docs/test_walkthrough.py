"""docs/integrations.md's walk-through, from `make run` to a certified task, run as written:
every `sh` block under its heading, in order, from a directory that stands for the checkout,
against a freshly bootstrapped instance (how: tests/docs/walkthrough.py), the bootstrap admin
approving both review stages while `begin` waits. What the walk-through's comments promise
(ready, active, steered naming the failed check, allowed, certified, the export verified) is
asserted on each block's output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.docs.markdown import fenced_blocks
from tests.docs.walkthrough import (
    Reviewer,
    answers,
    checkout,
    commands,
    example_blocks,
    reader_env,
    run,
)
from tests.live import ROOT, live_server

PAGE = ROOT / "docs" / "integrations.md"
HEADING = "Walk-through: from `make run` to a certified task"


def test_the_walkthrough_names_the_virtualenv_in_every_command() -> None:
    blocks = example_blocks(PAGE, HEADING)
    assert len(blocks) >= 6, [block.where() for block in blocks]
    for line in (line for block in blocks for line in commands(block)):
        first = line.split()[0]
        assert first not in ("python", "python3", "governor-agent", "pip"), (
            f"{line!r}: name the virtualenv (.venv/bin/{first})")


def test_the_walkthrough_runs_as_written(tmp_path: Path) -> None:
    here = checkout(tmp_path)
    outputs: list[tuple[str, list[Any], str]] = []
    with live_server(here) as live:
        state = tmp_path / "terminal"
        for block in example_blocks(PAGE, HEADING):
            begins = any("governor-agent begin" in line for line in commands(block))
            reviewer = Reviewer(live, here) if begins else None
            result = run(block, here, reader_env(live), state)
            assert result.returncode == 0, f"{block.where()}\n{result.stdout}\n{result.stderr}"
            if reviewer is not None:
                reviewer.finished()
            outputs.append((block.text, answers(result.stdout), result.stdout))

    def answered(command: str) -> list[Any]:
        (found,) = [values for text, values, _ in outputs if command in text]
        return found

    _, assessed, begun = answered("governor-agent begin")
    assert assessed["status"] == "ready"
    assert begun["status"] == "active"
    _, early = answered('echo "# Tool"')
    assert early["action"] == "steer"
    assert "readme-install" in early["message"]
    _, steered, allowed, status = answered("pip install tool")
    assert steered["action"] == "steer" and allowed["action"] == "allow"
    assert "certified" in steered["message"], steered  # "with the certified terminal text"
    assert status["state"] == "certified"
    (proof,) = [stdout for text, _, stdout in outputs if "governor.verify" in text]
    assert "\nOK: session " in proof, proof
    assert not (here / ".governor").exists()  # the client's state is in the workspace


def test_the_token_file_configuration_runs_with_its_placeholders_filled(tmp_path: Path) -> None:
    """docs/integrations.md, "Configuration": the block with the token and the server's address
    filled in, in a home of its own; the file is the owner's alone and the client reads the
    token from it (GOVERNOR_TOKEN unset)."""
    (block,) = [block for block in fenced_blocks(PAGE) if block.heading == "Configuration"
                and block.language == "sh"]
    assert "PASTE-THE-AGENT-TOKEN" in block.text and "http://127.0.0.1:8000" in block.text
    here = checkout(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    with live_server(here) as live:
        env = {key: value for key, value in reader_env(live).items()
               if key not in ("GOVERNOR_TOKEN", "GOVERNOR_URL")}
        env.update(HOME=str(home), GOVERNOR_WORKSPACE=str(live.workspace_root))
        filled = block.text.replace("PASTE-THE-AGENT-TOKEN", live.token).replace(
            "http://127.0.0.1:8000", live.url)
        state = tmp_path / "terminal"
        configured = run(block, here, env, state, text=filled)
        assert configured.returncode == 0, configured.stderr
        token_file = home / ".config" / "governor" / "token"
        assert token_file.read_text() == live.token
        assert token_file.stat().st_mode & 0o777 == 0o600
        asked = run(block, here, env, state, text=".venv/bin/governor-agent profiles\n")
        assert asked.returncode == 0, asked.stderr
        assert "profiles" in answers(asked.stdout)[0]

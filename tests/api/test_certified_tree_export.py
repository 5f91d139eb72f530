"""rules §10.2 end to end: a certified session's signed terminal names the tree its deciding
attempt judged, its export carries that tree's manifest, `python -m governor.verify EXPORT --tree
DIR` recognises the workspace (and names the files that differ once it changes), and the stock-git
command docs/api.md shows gives the same id; §14.8: the export also carries the contract's start
tree, from which the verifier recomputes the signed changes digest."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from governor.domain.attestation import key_id
from governor.domain.canonical import loads_strict, receipt
from governor.domain.export import serialise_line
from governor.domain.tree import exclusions_digest
from governor.models import Project
from governor.verify import verify_export
from tests.api.test_contracts import Agent, readme_contract
from tests.api.test_export_and_verify import export_text
from tests.conftest import AgentClient
from tests.signed_exports import reseal

ROOT = Path(__file__).resolve().parents[2]
EXCLUSIONS = ["node_modules/**", "*.log"]  # those of the command in docs/api.md
GIT_ENV = {"PATH": os.environ["PATH"], "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C"}


@pytest.fixture
def certified(agent: AgentClient, workspace: Path, project: Project) -> tuple[Agent, str]:
    """A certified contract over a workspace with an executable, a symlink and excluded files;
    (the agent, its export)."""
    project.tree_exclusions = EXCLUSIONS
    project.save(update_fields=["tree_exclusions"])
    (workspace / "bin").mkdir()
    (workspace / "bin" / "run").write_text("#!/bin/sh\n")
    (workspace / "bin" / "run").chmod(0o755)
    os.symlink("bin/run", workspace / "run")
    (workspace / "node_modules" / "dep").mkdir(parents=True)
    (workspace / "node_modules" / "dep" / "index.js").write_text("x\n")
    (workspace / "debug.log").write_text("noise\n")
    worker = Agent(agent, workspace)
    assert worker.begin(readme_contract()).status_code == 201
    worker.write("README.md", "## Install\n")
    assert worker.turn_stop()["terminal"]["status"] == "certified"
    return worker, export_text(agent, worker.id)


def statement_of(envelope: dict[str, Any]) -> dict[str, Any]:
    return dict(json.loads(base64.b64decode(envelope["payload"])))


def test_the_status_the_signed_terminal_and_the_export_name_the_certified_tree(
        certified: tuple[Agent, str]) -> None:
    worker, text = certified
    status = worker.status()
    tree = status["terminal"]["tree"]
    assert tree == status["attempts"][-1]["tree"]
    assert tree["id"].startswith("gittree:sha256:")
    assert tree["exclusions"] == exclusions_digest(EXCLUSIONS)
    assert status["contract"]["startTree"]["exclusions"] == tree["exclusions"]
    assert status["contract"]["startTree"]["id"] != tree["id"]  # README.md was written since
    lines = [loads_strict(line) for line in text.splitlines()]
    terminal_seq = status["terminal"]["seq"]
    [attestation] = [line for line in lines
                     if line["kind"] == "attestation" and line["seq"] == terminal_seq]
    assert statement_of(attestation["envelope"])["subject"][1] == {
        "name": "workspace", "digest": {"gitTree": tree["id"].removeprefix("gittree:sha256:")}}
    manifests = {line["tree"]: line for line in lines if line["kind"] == "manifest"}
    assert [line["kind"] for line in lines[-3:]] == ["manifest", "manifest", "head"]
    start = status["contract"]["startTree"]["id"]
    assert set(manifests) == {tree["id"], start}
    assert [entry["path"] for entry in manifests[start]["entries"]] == ["bin/run", "run"]
    manifest = manifests[tree["id"]]
    assert manifest["exclusions"] == sorted(EXCLUSIONS)
    assert {entry["path"]: entry["mode"] for entry in manifest["entries"]} == {
        "README.md": "100644", "bin/run": "100755", "run": "120000"}
    report = verify_export(text.splitlines())
    assert report.ok, report.summary()
    assert [(entry.seq, entry.tree) for entry in report.certified] == [(terminal_seq,
                                                                        tree["id"])]


def test_an_exhausted_terminal_names_its_tree_but_the_export_has_no_manifest(
        agent: AgentClient, workspace: Path) -> None:
    worker = Agent(agent, workspace)
    assert worker.begin(readme_contract(max_attempts=1)).status_code == 201
    answer = worker.turn_stop()
    assert answer["terminal"]["status"] == "exhausted"
    text = export_text(agent, worker.id)
    lines = [loads_strict(line) for line in text.splitlines()]
    terminal = next(line for line in lines if line["kind"] == "attestation"
                    and line["seq"] == worker.status()["terminal"]["seq"])
    assert statement_of(terminal["envelope"])["subject"][1]["name"] == "workspace"
    assert not [line for line in lines if line["kind"] == "manifest"]
    report = verify_export(text.splitlines())
    assert report.ok and report.certified == (), report.summary()


def resigned(text: str, edit_predicate: Any = None, drop_start: bool = False) -> list[str]:
    """The export as one holding the server's key could rewrite it: the terminal's predicate
    edited, or the start tree's manifest dropped; every attestation and the head re-signed."""
    objects = [loads_strict(line) for line in text.splitlines()]
    terminal = next(obj["seq"] for obj in objects
                    if obj["kind"] == "event" and obj["type"] == "reliability/terminal")
    start = next(obj["data"]["startTree"]["id"] for obj in objects
                 if obj["kind"] == "event" and obj["type"] == "reliability/contract")
    for obj in objects:
        if obj["kind"] == "attestation" and obj["seq"] == terminal and edit_predicate:
            statement = statement_of(obj["envelope"])
            edit_predicate(statement["predicate"])
            obj["envelope"]["payload"] = base64.b64encode(
                json.dumps(statement).encode()).decode()
    if drop_start:
        objects = [obj for obj in objects if obj["kind"] != "manifest" or obj["tree"] != start]
    return [serialise_line(obj) for obj in reseal(objects, SERVER_KEY)]


SERVER_KEY = Ed25519PrivateKey.generate()
TRUSTED = {key_id(SERVER_KEY.public_key()): SERVER_KEY.public_key()}


def test_verify_recomputes_the_changes_digest_from_the_start_and_certified_manifests(
        certified: tuple[Agent, str]) -> None:
    """§14.8: a certified terminal's startTree and changesDigest are checked against the
    contract and the two manifests, not taken on the signer's word."""
    _, text = certified
    report = verify_export(resigned(text), TRUSTED)
    assert report.ok, report.summary()

    def hide_a_change(predicate: dict[str, Any]) -> None:
        predicate["changesDigest"] = receipt("workspace-changes", [])

    report = verify_export(resigned(text, hide_a_change), TRUSTED)
    assert not report.ok and report.failure is not None
    assert report.failure.message == ("predicate changesDigest does not recompute from the "
                                      "start and certified trees' manifests")

    def another_start(predicate: dict[str, Any]) -> None:
        predicate["startTree"] = "gittree:sha256:" + "0" * 64

    report = verify_export(resigned(text, another_start), TRUSTED)
    assert report.failure is not None and report.failure.message.endswith(
        "predicate startTree is not the start tree of the terminal's contract")

    report = verify_export(resigned(text, drop_start=True), TRUSTED)
    assert report.failure is not None and "has no manifest line" in report.failure.message
    assert report.failure.message.startswith("the start tree gittree:sha256:")


def run_verify(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own interpreter and arguments
        [sys.executable, "-m", "governor.verify", *map(str, args)], cwd=ROOT,
        capture_output=True, text=True, timeout=120)


def test_verify_tree_recognises_the_workspace_and_names_what_differs(
        certified: tuple[Agent, str], workspace: Path, tmp_path: Path) -> None:
    worker, text = certified
    tree = worker.status()["terminal"]["tree"]["id"]
    export = tmp_path / "export.jsonl"
    export.write_text(text)
    (workspace / "node_modules" / "dep" / "more.js").write_text("excluded\n")
    result = run_verify(export, "--tree", workspace)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1].startswith(f"OK: {workspace} is {tree}, the tree the "
                                                     "terminal at seq ")
    (workspace / "README.md").write_text("## Installation\n")
    (workspace / "bin" / "run").chmod(0o644)
    (workspace / "run").unlink()
    (workspace / "NOTES.md").write_text("later\n")
    result = run_verify(export, "--tree", workspace)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[-5].startswith(f"FAIL: {workspace} is gittree:sha256:")
    assert f"not {tree}" in lines[-5] and lines[-5].endswith("4 differences:")
    assert lines[-4:] == ["  added: NOTES.md", "  changed: README.md",
                          "  mode changed: bin/run (100755 -> 100644)", "  removed: run"]


def documented_git_command() -> str:
    text = (ROOT / "docs" / "api.md").read_text()
    section = text[text.index("**A workspace against a certified tree.**"):]
    match = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert match is not None
    return match.group(1)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_documented_stock_git_command_gives_the_certified_id(
        certified: tuple[Agent, str], workspace: Path, tmp_path: Path) -> None:
    worker, _ = certified
    tree = worker.status()["terminal"]["tree"]["id"]
    (workspace / ".governor").mkdir()
    (workspace / ".governor" / "state").write_text("left out\n")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    result = subprocess.run(  # noqa: S603
        ["/bin/bash", "-e", "-c", documented_git_command()], capture_output=True, text=True,
        env={**GIT_ENV, "DIR": str(workspace), "TMPDIR": str(scratch)}, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "gittree:sha256:" + result.stdout.strip() == tree

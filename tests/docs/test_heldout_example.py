"""docs/heldout.md, the worked example: the files in docs/examples/heldout/ load as written
(`governor_heldout load`, `governor_profiles load`), and the oracle profile judges the package
in the real sandbox — the buggy median fails the even-length cases by name, the fix passes every
case and certifies, and the adapter is an ordinary program the operator can try by hand."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command

from governor.models import Project
from tests.api.test_code_verification import run
from tests.api.test_contracts import Agent
from tests.api.test_evidence_the_agent_cannot_shape import begin_code, evidence_of
from tests.api.test_workspace_trees import verify
from tests.conftest import AgentClient
from tests.docs.markdown import ROOT, fenced_blocks

pytestmark = [pytest.mark.sandbox, pytest.mark.usefixtures("private_store")]

EXAMPLE = ROOT / "docs" / "examples" / "heldout"
CORE = (EXAMPLE / "textstats" / "core.py").read_text()
BUGGY = CORE.replace("    if len(ordered) % 2:\n        return ordered[middle]\n"
                     "    return (ordered[middle - 1] + ordered[middle]) / 2\n",
                     "    return ordered[middle]\n")


def test_the_adapter_answers_each_case_as_a_plain_program(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLE / "textstats", tmp_path / "textstats")
    cases = (EXAMPLE / "suite" / "cases.jsonl").read_text().splitlines()
    stdin = "".join(json.dumps({"id": c["id"], "input": c["input"]}) + "\n"
                    for c in map(json.loads, cases))
    done = subprocess.run(["/usr/bin/python3", str(EXAMPLE / "suite" / "adapter.py"),  # noqa: S603
                           "textstats"], input=stdin, capture_output=True, text=True,
                          cwd=tmp_path, timeout=30, check=True)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == [json.loads(c)["id"] for c in cases]
    assert answers[0] == {"id": "median-even", "output": 11.5}


def test_the_worked_example_loads_as_written_and_judges_the_package(
        agent: AgentClient, workspace: Path, project: Project) -> None:
    out = io.StringIO()
    call_command("governor_heldout", "load", str(EXAMPLE / "suite"), "--project", project.slug,
                 "--name", "textstats-outputs", stdout=out)
    assert "1 file(s), 12 case(s)" in out.getvalue()
    call_command("governor_profiles", "load", str(EXAMPLE / "profiles.json"), "--project",
                 project.slug, stdout=out)
    shutil.copytree(EXAMPLE / "textstats", workspace / "textstats")
    (workspace / "textstats" / "core.py").write_text(BUGGY)
    worker = Agent(agent, workspace)
    contract = begin_code(worker)["contract"]
    assert "code-profile-textstats-outputs" in [check["id"] for check in contract["checks"]]
    verdict = verify(worker)
    evidence = evidence_of(verdict, "code-profile-textstats-outputs")
    assert verdict["decision"] == "repair"
    answer = run(worker, "textstats-outputs")["result"]
    assert answer["failureKind"] == "outputs-differ"
    assert answer["oracle"]["failing"] == ["median-even", "median-even-unsorted",
                                           "median-even-floats"]
    evidence = evidence_of(verify(worker), "code-profile-textstats-outputs")
    assert "expected outputs: 9 of 12 match; failing: median-even, median-even-unsorted" in evidence
    worker.write("textstats/core.py", CORE)
    assert run(worker, "textstats-outputs")["result"]["passed"]
    verdict = verify(worker)
    assert verdict["decision"] == "certified", verdict["message"]
    assert "expected outputs: 12 of 12 match; fail-to-pass 3 of 3, pass-to-pass 9 of 9" in (
        evidence_of(verdict, "code-profile-textstats-outputs"))


def test_the_page_shows_the_files_as_they_are() -> None:
    """The adapter, the case line and the profile file on the page are the example's files."""
    blocks = [block for block in fenced_blocks(ROOT / "docs" / "heldout.md")
              if block.heading == "A worked example"]
    [adapter] = [block.text for block in blocks if block.language == "python"]
    assert (EXAMPLE / "suite" / "adapter.py").read_text().endswith(adapter)
    case, profiles = (json.loads(block.text) for block in blocks if block.language == "json")
    assert case == json.loads((EXAMPLE / "suite" / "cases.jsonl").read_text().splitlines()[0])
    assert profiles == json.loads((EXAMPLE / "profiles.json").read_text())

"""rules §18.1 and §18.3, who sees what: a marker planted in a held-out file and in an expected
value appears in no answer of any agent route — every GET of the API's schema with every id the
session has, the verify and turn-stop answers (the repair texts), the export — while the runs
are bound to the suite version (their receipts, checked offline by the verifier); the project's
reviewers see the files and cases on the evidence page."""

from __future__ import annotations

import json
import re
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from governor.api import api
from governor.domain.canonical import loads_strict, receipt
from governor.domain.export import serialise_line
from governor.domain.heldout import binding_problem
from governor.domain.tree import blob_id
from governor.models import Change, Event, Project
from governor.selectors.heldout import suite_current
from governor.services.heldout import suite_load
from governor.verify import verify_export
from reviews.models import Review
from tests.api.test_code_verification import add_profile, run
from tests.api.test_contracts import Agent
from tests.api.test_evidence_the_agent_cannot_shape import WRONG, begin_code, settle_baseline
from tests.api.test_export_and_verify import export_text, rehashed
from tests.api.test_heldout_evidence import ADAPTER, PYTEST_HELDOUT, cases_jsonl
from tests.api.test_workspace_trees import verify
from tests.conftest import INTENT, AgentClient
from tests.pages import press, reviewer_client
from verification.models import VerificationRun

pytestmark = [pytest.mark.sandbox, pytest.mark.usefixtures("private_store")]

FILE_MARKER = "HELDOUT-FILE-MARK-93b1f0"
EXPECTED_MARKER = "HELDOUT-EXPECTED-MARK-4c7e2a"
HIDDEN_TESTS = textwrap.dedent(f"""\
    from calc import mul

    SECRET = "{FILE_MARKER}"


    def test_mul_hidden():
        assert mul(6, 7) == 42
    """)
CASES = [{"id": "six-seven", "input": [6, 7], "expected": 42, "compare": "exact"},
         {"id": "named", "input": [1, 1], "expected": {"label": EXPECTED_MARKER},
          "compare": "exact"}]


@pytest.fixture
def worker(agent: AgentClient, workspace: Path, project: Project) -> Agent:
    (workspace / "calc.py").write_text(WRONG)
    suite_load(project=project, name="hidden-tests",
               entries=[("tests/test_hidden.py", "100644", HIDDEN_TESTS.encode())])
    suite_load(project=project, name="golden-outputs",
               entries=[("adapter.py", "100644", (ADAPTER + f"# {FILE_MARKER}\n").encode()),
                        ("cases.jsonl", "100644", cases_jsonl(CASES))])
    add_profile(project, "hidden-tests", PYTEST_HELDOUT, report="junit", timeout_ms=60_000,
                heldout="hidden-tests")
    add_profile(project, "golden-outputs", ["/usr/bin/python3", "/governor-heldout/adapter.py"],
                timeout_ms=60_000, heldout="golden-outputs", oracle="golden-outputs")
    return Agent(agent, workspace)


def answers_of_every_agent_get(worker: Agent, project: Project) -> dict[str, str]:
    """Every GET route of the agent API, each with every value its path parameters can take in
    this session: the answer text by URL."""
    session = worker.id
    runs = [str(pk) for pk in VerificationRun.objects.filter(session_id=session)
            .values_list("pk", flat=True)]
    receipts = sorted({value for data in Event.objects.filter(session_id=session)
                       .values_list("data", flat=True)
                       for value in re.findall(r"sha256:[0-9a-f]{64}", json.dumps(data))})
    receipts += [suite_current(project, name).receipt  # type: ignore[union-attr]
                 for name in ("hidden-tests", "golden-outputs")]
    trees = sorted(set(re.findall(r"gittree:sha256:[0-9a-f]{64}", json.dumps(
        list(Event.objects.filter(session_id=session).values_list("data", flat=True))))))
    values = {"session_id": [session], "run_id": runs, "receipt": receipts, "tree": trees,
              "file_path": ["calc.py", "tests/test_hidden.py", "cases.jsonl", "adapter.py"],
              # the gate's changes (rules §19): the project's, else one that is not there
              "change_id": [str(pk) for pk in Change.objects.filter(project=project)
                            .values_list("pk", flat=True)] or [str(uuid.uuid4())]}
    answers: dict[str, str] = {}
    for path, operations in api.get_openapi_schema()["paths"].items():
        if "get" not in operations:
            continue
        urls = [path.removeprefix("/api/v1")]
        for name, options in values.items():
            urls = [url.replace("{" + name + "}", option) for url in urls for option in options]
        for url in urls:
            assert "{" not in url, url
            response = worker.client.get(url)
            content = (b"".join(response.streaming_content) if response.streaming
                       else response.content)
            answers[url] = content.decode("utf-8", errors="replace")
    return answers


def test_rule_18_1_no_agent_route_answer_or_export_holds_a_held_out_byte(
        worker: Agent, project: Project) -> None:
    begin_code(worker)
    assert settle_baseline  # both baselines ran at activation
    run(worker, "hidden-tests")
    run(worker, "golden-outputs")
    texts = {"verify": json.dumps(verify(worker)), "turn-stop": json.dumps(worker.turn_stop()),
             **answers_of_every_agent_get(worker, project)}
    assert len(texts) > 20
    for url, text in texts.items():
        assert FILE_MARKER not in text, url
        assert EXPECTED_MARKER not in text, url
    verdict = json.loads(texts["verify"])
    evidence = " ".join(result["evidence"] for result in verdict["attempt"]["results"])
    assert "failing: six-seven, named" in evidence and "named ← [1,1]" in evidence
    profiles = json.loads(texts["/code-profiles"])["profiles"]
    oracle = next(p["oracle"] for p in profiles if p["id"] == "golden-outputs")
    version = suite_current(project, "golden-outputs")
    assert version is not None
    assert oracle == {"name": "golden-outputs", "version": version.receipt, "files": 1,
                      "cases": 2}
    # The agent's blob routes cannot even tell a held-out file is stored.
    held = [item["blob"] for item in version.document["files"]]
    missing = worker.client.post("/blobs/missing", {"blobs": held}).json()
    assert missing["missing"] == held


def test_rule_18_1_the_export_carries_the_suite_versions_and_verifies_offline(
        worker: Agent, agent: AgentClient, project: Project) -> None:
    begin_code(worker)
    run(worker, "golden-outputs")
    text = export_text(agent, worker.id)
    assert FILE_MARKER not in text and EXPECTED_MARKER not in text
    report = verify_export(text.splitlines())
    assert report.ok, report.failure
    version = suite_current(project, "golden-outputs")
    assert version is not None and f'"version":"{version.receipt}"' in text
    # Rebinding a run to another suite version breaks its result receipt...
    objects = [loads_strict(line) for line in text.splitlines()]
    run_line = next(obj for obj in objects if obj.get("type") == "reliability/code-verification"
                    and "oracle" in obj["data"] and obj["data"].get("baseline") is not True)
    run_line["data"]["oracle"]["version"] = "sha256:" + "0" * 64
    forged = verify_export([serialise_line(obj) for obj in rehashed(objects)])
    assert not forged.ok and "receipt does not recompute" in str(forged.failure)
    # ...and a forger who recomputes it still cannot call a failing oracle run passed.
    run_line["data"].update(passed=True, failureKind=None)
    data = {key: value for key, value in run_line["data"].items() if key != "receipt"}
    run_line["data"]["receipt"] = receipt("code-verification-result", data)
    forged = verify_export([serialise_line(obj) for obj in rehashed(objects)])
    assert not forged.ok
    assert "the run passed with cases that did not match" in str(forged.failure)


def test_rule_18_1_binding_problems_name_what_is_wrong() -> None:
    suite = {"name": "golden", "version": "sha256:" + "a" * 64, "files": 1, "cases": 3}
    good = {"passed": False, "receipt": "r", "oracle": {**suite, "matched": 1,
                                                        "failing": ["a", "b"],
                                                        "outcomes": "sha256:" + "b" * 64}}
    assert binding_problem(good) is None
    assert binding_problem({"passed": True, "heldout": suite}) == (
        "a run that names a held-out suite has no result receipt")
    assert "version" in str(binding_problem({**good, "heldout": {**suite, "version": "v1"}}))
    assert "failing cases" in str(binding_problem(
        {**good, "oracle": {**good["oracle"], "failing": ["a"]}}))
    assert binding_problem({"passed": True, "receipt": "r"}) is None


def test_rule_18_1_reviewers_see_the_suite_files_and_cases_on_the_evidence_page(
        worker: Agent, project: Project, reviewer: Any) -> None:
    begin_code(worker)
    run(worker, "golden-outputs")
    client = Client()
    client.force_login(reviewer)
    page = client.get(f"/sessions/{worker.id}/").content.decode()
    assert "golden-outputs" in page
    assert EXPECTED_MARKER in page and "adapter.py" in page
    assert blob_id(HIDDEN_TESTS.encode())[:12] in page or "tests/test_hidden.py" in page


def test_rule_18_4_the_evidence_page_shows_reviewers_the_suite_before_any_run(
        agent: AgentClient, workspace: Path, project: Project, reviewer: Any) -> None:
    """At the evidence stage nothing has run yet: the page shows the suites the plan's
    profiles are judged by, files and expected values included, to the project's reviewer."""
    (workspace / "calc.py").write_text(WRONG)
    suite_load(project=project, name="golden-outputs",
               entries=[("adapter.py", "100644", ADAPTER.encode()),
                        ("cases.jsonl", "100644", cases_jsonl(CASES))])
    add_profile(project, "golden-outputs", ["/usr/bin/python3", "/governor-heldout/adapter.py"],
                timeout_ms=60_000, heldout="golden-outputs", oracle="golden-outputs")
    project.review_mode = "required"
    project.save(update_fields=["review_mode"])
    session = agent.create_session(workspace)["id"]
    response = agent.post(f"/sessions/{session}/code-contracts",
                          {"objective": "Fix mul", "claims": [], "checks": [],
                           "intent": INTENT})
    assert response.status_code == 202, response.content
    intent = Review.objects.get(pk=response.json()["review"]["id"])
    rita = reviewer_client("rita", "rita-password-1")
    assert press(rita, f"/reviews/{intent.pk}/", "Approve").status_code == 302
    evidence = Review.objects.get(session_id=session, stage="evidence")
    page = rita.get(f"/reviews/{evidence.pk}/").content.decode()
    assert "Held-out suites (1)" in page and "golden-outputs" in page
    assert EXPECTED_MARKER in page and "adapter.py" in page

"""rules §17.5 through the API, with real pytest in the real sandbox: where a profile runs code,
begin injects the claim `no-evidence-tampering` over the check `tamper-free`; the check scans
the attempt's changed Python files, and its findings (path:line, rule, reason, excerpt) fail it
with a repair text. The code under test forging the report from inside the runner (an `atexit`
hook) or detecting the runner (`PYTEST_CURRENT_TEST`) passes the run itself, and is not
certified; an honest fix is. Only a person accepting every named finding at the delivery review
certifies a change that has findings, and the acceptance is bound into the decision's receipt."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from governor.domain.attempts import decide_attempt
from governor.models import Event, Project, Session
from governor.selectors.sessions import lifecycle_of
from governor.services.events import session_locked
from governor.services.reviews import DecisionRefused, review_decide
from governor.services.terminals import TerminalEvidence, terminal_write
from governor.verify import verify_export
from reviews.models import Approval, Review
from tests.api.test_code_verification import add_profile, run
from tests.api.test_contracts import Agent, readme_contract
from tests.api.test_evidence_the_agent_cannot_shape import (
    PYTEST,
    RIGHT,
    TESTS,
    WRONG,
    begin_code,
    evidence_of,
    settle_baseline,
)
from tests.api.test_export_and_verify import export_text
from tests.api.test_workspace_trees import verify
from tests.conftest import AgentClient

sandboxed = pytest.mark.sandbox

# mul is still wrong; at exit, the module rewrites the report pytest wrote so that every test
# passed, and the run exits 0 — the road of the report forged from inside the runner's process.
ATEXIT_FORGERY = textwrap.dedent("""\
    import atexit
    import os


    def mul(a, b):
        return a + b


    def _all_passed():
        path = os.path.join("/governor-report", "junit.xml")
        with open(path) as report:
            text = report.read()
        start, end = text.find("<failure"), text.find("</failure>")
        if start >= 0:
            text = text[:start] + text[end + len("</failure>"):]
        text = text.replace('failures="1"', 'failures="0"')
        with open(path, "w") as report:
            report.write(text)
        os._exit(0)


    atexit.register(_all_passed)
    """)
# mul is right only under the test runner: the road of detecting the runner.
RUNNER_DETECTION = textwrap.dedent("""\
    import os


    def mul(a, b):
        if os.environ.get("PYTEST_CURRENT_TEST"):
            return a * b
        return a + b
    """)
# An honest fix that needs the garbage collector (a finding a person may accept).
RIGHT_WITH_GC = textwrap.dedent("""\
    import gc


    def mul(a, b):
        gc.collect()
        return a * b
    """)


@pytest.fixture
def task(workspace: Path, project: Project) -> Project:
    """mul is wrong and the operator's protected tests say so; the unit tests are a trusted
    pytest report profile."""
    (workspace / "calc.py").write_text(WRONG)
    (workspace / "tests").mkdir()
    (workspace / "tests" / "test_calc.py").write_text(TESTS)
    (workspace / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    add_profile(project, "unit-tests", PYTEST, report="junit", timeout_ms=60_000,
                protected_paths=["tests/**"])
    return project


@pytest.fixture
def worker(agent: AgentClient, workspace: Path, task: Project) -> Agent:
    return Agent(agent, workspace)


def tamper_of(verdict: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = next(r for r in verdict["attempt"]["results"]
                                  if r["id"] == "tamper-free")
    return result


def fixed_and_run(worker: Agent, source: str) -> dict[str, Any]:
    begin_code(worker)
    settle_baseline(worker)
    worker.write("calc.py", source)
    return run(worker, "unit-tests")["result"]


@sandboxed
def test_rule_17_5_a_contract_naming_a_profile_gets_the_injected_claim_and_check(
        worker: Agent, task: Project) -> None:
    contract = begin_code(worker)["contract"]
    assert contract["checks"][-1] == {"id": "tamper-free", "kind": "tamper_free"}
    claim = contract["claims"][-1]
    assert (claim["id"], claim["importance"], claim["checkIds"]) == (
        "no-evidence-tampering", "critical", ["tamper-free"])
    assert contract["baselines"]["tamper-free"] == "passes"


def test_rule_17_5_a_contract_without_a_profile_has_no_tamper_check(
        agent: AgentClient, session: dict[str, Any]) -> None:
    response = agent.post(f"/sessions/{session['id']}/contracts", readme_contract())
    assert response.status_code == 201, response.content
    assert "tamper-free" not in [c["id"] for c in response.json()["contract"]["checks"]]


@sandboxed
@pytest.mark.parametrize(("field", "item"), [
    ("claims", {"id": "no-evidence-tampering", "statement": "mine", "importance": "minor",
                "verification": "deterministic", "check_ids": ["calc-exists"]}),
    ("checks", {"id": "tamper-free", "kind": "file_exists", "path": "calc.py"}),
])
def test_rule_17_5_an_agent_claim_or_check_with_the_injected_ids_is_refused_naming_it(
        worker: Agent, task: Project, field: str, item: dict[str, Any]) -> None:
    checks = [{"id": "calc-exists", "kind": "file_exists", "path": "calc.py"}]
    body: dict[str, Any] = {"objective": "Fix mul", "claims": [], "checks": checks}
    body[field] = [item]
    response = worker.client.post(f"/sessions/{worker.id}/code-contracts", body)
    assert response.status_code == 422, response.content
    assert f"{field}/0/id" in response.content.decode()
    assert "reserved for the tamper scan" in response.content.decode()
    assert not Event.objects.filter(session_id=worker.id, type="reliability/contract").exists()


@sandboxed
def test_rule_17_5_an_atexit_hook_that_rewrites_the_report_is_not_certified(
        worker: Agent, task: Project) -> None:
    result = fixed_and_run(worker, ATEXIT_FORGERY)
    # The report stream (rules §17.4) already makes the rewritten run bad-report; the scan names
    # the code that did it, whatever the run says.
    assert result["passed"] is False and "stream says failed" in str(result), result
    verdict = verify(worker)
    assert verdict["decision"] == "repair"
    tamper = tamper_of(verdict)
    assert tamper["passed"] is False
    found = {(f["path"], f["line"], f["rule"]) for f in tamper["findings"]}
    assert ("calc.py", 1, "tamper/runner-import") in found
    assert ("calc.py", 10, "tamper/report-literal") in found
    assert "calc.py:1 tamper/runner-import (imports a test runner" in tamper["evidence"]
    assert "import atexit" in tamper["evidence"]
    assert "reaches into the verification machinery" in verdict["message"]
    assert "calc.py:1 tamper/runner-import" in verdict["message"]


@sandboxed
def test_rule_17_5_a_package_that_detects_the_runner_is_not_certified(
        worker: Agent, task: Project, reviewer: Any, client: Any) -> None:
    """Road 5's "detecting the runner": mul is right only where PYTEST_CURRENT_TEST is set."""
    result = fixed_and_run(worker, RUNNER_DETECTION)
    assert result["passed"] is True  # the tests pass under the runner
    verdict = verify(worker)
    assert verdict["decision"] == "repair"
    assert [(f["path"], f["line"], f["rule"]) for f in tamper_of(verdict)["findings"]] == [
        ("calc.py", 5, "tamper/runner-detection")]
    client.force_login(reviewer)  # the timeline shows the finding: where, the rule, why
    page = client.get(f"/sessions/{worker.id}/").content.decode()
    assert "<code>calc.py:5</code>" in page and "tamper/runner-detection" in page
    assert "reads GOVERNOR_* or PYTEST_* variables" in page
    assert "if os.environ.get(&quot;PYTEST_CURRENT_TEST&quot;):" in page


@sandboxed
def test_rule_17_5_an_honest_fix_passes_the_scan_and_is_certified(
        worker: Agent, task: Project) -> None:
    assert fixed_and_run(worker, RIGHT)["passed"] is True
    verdict = verify(worker)
    assert verdict["decision"] == "certified", verdict["message"]
    assert evidence_of(verdict, "tamper-free") == "No tamper finding in the 1 changed Python file."


@pytest.fixture
def delivered(worker: Agent, task: Project) -> Review:
    """A person reviews every delivery; the fix needs `gc`, which the scan finds."""
    task.delivery_review = "required"
    task.save(update_fields=["delivery_review"])
    assert fixed_and_run(worker, RIGHT_WITH_GC)["passed"] is True
    verdict = verify(worker)
    assert verdict["decision"] == "delivery-pending", verdict["message"]
    assert "except the tamper scan" in verdict["message"]
    review = Review.objects.get(session_id=worker.id, stage="delivery")
    assert [f["id"] for f in review.proposal["tamperFindings"]] == [
        "tamper/runner-import@calc.py:1"]
    return review


FINDING = "tamper/runner-import@calc.py:1"


@sandboxed
def test_rule_17_5_a_person_accepting_the_named_finding_certifies_and_the_receipt_binds_it(
        worker: Agent, delivered: Review, reviewer: Any) -> None:
    with pytest.raises(DecisionRefused, match=FINDING):  # approving must accept every finding
        review_decide(user=reviewer, review=delivered, receipt=delivered.receipt,
                      decision="approved")
    review_decide(user=reviewer, review=delivered, receipt=delivered.receipt,
                  decision="approved", accepted_findings=[FINDING])
    status = worker.client.get(f"/sessions/{worker.id}").json()
    assert status["state"] == "certified"
    assert "accepting its 1 finding" in status["terminal"]["reason"]
    decision = Event.objects.get(session_id=worker.id, type="reliability/delivery-review")
    assert decision.data["acceptedFindings"] == [FINDING]
    report = verify_export(export_text(worker.client, worker.id).splitlines())
    assert report.ok, report.failure  # the receipt binding the acceptance recomputes offline


@sandboxed
def test_rule_17_5_accepting_a_finding_that_does_not_exist_is_422_naming_it(
        worker: Agent, delivered: Review, reviewer: Any, client: Any) -> None:
    client.force_login(reviewer)
    page = client.get(f"/reviews/{delivered.pk}/").content.decode()
    assert "<code>calc.py:1</code>" in page and "tamper/runner-import" in page
    assert 'name="accepted_findings" value="tamper/runner-import@calc.py:1"' in page
    response = client.post(f"/reviews/{delivered.pk}/", {
        "receipt": delivered.receipt, "decision": "approved",
        "accepted_findings": [FINDING, "tamper/runner-import@calc.py:9"]})
    assert response.status_code == 422
    assert "tamper/runner-import@calc.py:9" in response.content.decode()
    assert "is not a finding of this proposal" in response.content.decode()
    assert not Approval.objects.filter(review=delivered).exists()
    assert not Event.objects.filter(session_id=worker.id,
                                    type="reliability/delivery-review").exists()
    delivered.refresh_from_db()
    assert delivered.status == "pending"


@sandboxed
def test_rule_17_5_the_delivery_page_accepts_the_ticked_finding_and_certifies(
        worker: Agent, delivered: Review, reviewer: Any, client: Any) -> None:
    client.force_login(reviewer)
    response = client.post(f"/reviews/{delivered.pk}/", {
        "receipt": delivered.receipt, "decision": "approved", "accepted_findings": [FINDING]})
    assert response.status_code == 302
    assert worker.client.get(f"/sessions/{worker.id}").json()["state"] == "certified"


@sandboxed
def test_rule_17_5_the_offline_verifier_refuses_a_certification_over_unaccepted_findings(
        worker: Agent, task: Project) -> None:
    """A server that certified an attempt with findings no person accepted (written here
    through the terminal service, as a faulty path would) is caught by `governor.verify`."""
    fixed_and_run(worker, RIGHT_WITH_GC)
    verdict = verify(worker)
    assert verdict["decision"] == "repair"
    session = Session.objects.get(pk=worker.id)
    with session_locked(session) as state:
        contract = lifecycle_of(state)["contract"]["data"]
        terminal_write(session=session, state=state, contract=contract, status="certified",
                       reason="certified anyway", evidence=TerminalEvidence(
                           attempt_receipt=verdict["attempt"]["receipt"],
                           tree=verdict["attempt"]["tree"]))
    report = verify_export(export_text(worker.client, worker.id).splitlines())
    assert not report.ok
    assert f"certified over tamper findings no person accepted: {FINDING}" in str(
        report.failure)


def test_rule_17_5_unattended_a_finding_cannot_be_certified() -> None:
    """Review off: the only way past a finding is a person's review, so an attempt with one
    is repaired, or exhausted at the end of the budget — never certified."""
    findings = [{"id": FINDING}]
    results = [{"id": "tamper-free", "kind": "tamper_free", "passed": False,
                "evidence": "1 tamper finding", "findings": findings}]
    assert decide_attempt(results, 1, 2, delivery_review="off")[0] == "repair"
    assert decide_attempt(results, 2, 2, delivery_review="off")[0] == "exhausted"
    assert decide_attempt(results, 2, 2, delivery_review="required")[0] == "delivery-pending"

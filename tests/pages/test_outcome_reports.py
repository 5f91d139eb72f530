"""Reported outcomes (issue 31 item 4): on a session whose contract ended, a reviewer reports
"certified but not done", "exhausted but done", "should not have abstained" or "a check was
brittle", with a reason. The report is a hash-chained `reliability/outcome-report` event: in
the export, verified offline, shown on the timeline. Every refusal names the field and the
reason and stores nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from governor.domain.canonical import receipt
from governor.models import Event, Membership, Project, ReliabilityFact, Role
from governor.verify import RECEIPTED_EVENTS, verify_export
from tests.api.test_contracts import Agent, readme_contract
from tests.api.test_export_and_verify import export_text
from tests.conftest import AgentClient
from tests.html_forms import forms_on
from tests.pages import reviewer_client

REPORT = "reliability/outcome-report"


@pytest.fixture
def rita(reviewer: Any) -> Client:
    return reviewer_client("rita", "rita-password-1")


def certified(agent: AgentClient, workspace: Path) -> Agent:
    worker = Agent(agent, workspace)
    assert worker.begin(readme_contract()).status_code == 201
    worker.write("README.md", "# Tool\n\n## Install\n")
    assert worker.turn_stop()["terminal"]["status"] == "certified"
    return worker


def timeline(client: Client, session_id: str) -> str:
    page = client.get(f"/sessions/{session_id}/")
    assert page.status_code == 200
    return page.content.decode()


def report(client: Client, session_id: str, **fields: str) -> Any:
    """Fill in the report form of the timeline, as a browser would, and post it."""
    [form] = [form for form in forms_on(timeline(client, session_id))
              if form["action"].endswith("/reports")]
    return client.post(form["action"], {**form["fields"], **fields})


def reports_of(session_id: str) -> list[dict[str, Any]]:
    return list(Event.objects.filter(session_id=session_id, type=REPORT)
                .order_by("seq").values_list("data", flat=True))


def test_a_false_certification_report_is_a_chained_event_the_export_verifies(
        agent: AgentClient, workspace: Path, rita: Client, reviewer: Any) -> None:
    worker = certified(agent, workspace)
    answer = report(rita, worker.id, kind="false-certification",
                    reason="  The Install section names a package that does not exist.  ")
    assert answer.status_code == 302 and answer["Location"].endswith("#reports")
    [data] = reports_of(worker.id)
    terminal = worker.status()["terminal"]
    assert data["kind"] == "false-certification"
    assert data["terminalReceipt"] == terminal["receipt"] and data["terminalStatus"] == "certified"
    assert data["reason"] == "The Install section names a package that does not exist."
    assert data["reportedBy"] == {"kind": "reviewer", "userId": reviewer.pk}
    assert data["receipt"] == receipt("outcome-report",
                                      {k: v for k, v in data.items() if k != "receipt"})
    assert RECEIPTED_EVENTS[REPORT].kind == "outcome-report"
    result = verify_export(export_text(agent, worker.id).splitlines())
    assert result.ok, result.failure
    page = timeline(rita, worker.id)
    assert "certified but not done" in page and "does not exist." in page
    assert ReliabilityFact.objects.filter(kind="report", name="false-certification").count() == 1


def test_an_altered_report_fails_offline_verification_naming_its_receipt(
        agent: AgentClient, workspace: Path, rita: Client) -> None:
    worker = certified(agent, workspace)
    report(rita, worker.id, kind="false-certification", reason="not done")
    text = export_text(agent, worker.id).replace('"reason":"not done"', '"reason":"was done"')
    result = verify_export(text.splitlines())
    assert not result.ok


@pytest.mark.parametrize(("fields", "path", "message"), [
    ({"kind": "false-certification", "reason": "   "}, "reason", "is required"),
    ({"kind": "false-exhaustion", "reason": "it was done"}, "kind", "for a exhausted contract"),
    ({"kind": "wrong-abstention", "reason": "x"}, "kind", "this one is certified"),
    ({"kind": "guess", "reason": "x"}, "kind", "must be one of"),
    ({"kind": "brittle-check", "reason": "flaky"}, "check", "name the check"),
    ({"kind": "brittle-check", "reason": "flaky", "check": "nope"}, "check", "is not a check"),
    ({"kind": "false-certification", "reason": "x" * 2001}, "reason", "at most 2000"),
])
def test_every_refusal_names_the_field_and_stores_nothing(
        agent: AgentClient, workspace: Path, rita: Client, fields: dict[str, str], path: str,
        message: str) -> None:
    worker = certified(agent, workspace)
    before = Event.objects.filter(session_id=worker.id).count()
    [form] = [form for form in forms_on(timeline(rita, worker.id))
              if form["action"].endswith("/reports")]
    answer = rita.post(form["action"], {**form["fields"], **fields})
    assert answer.status_code == 400
    page = answer.content.decode()
    assert "Nothing was reported" in page and f"<code>{path}</code>" in page and message in page
    assert Event.objects.filter(session_id=worker.id).count() == before
    assert not ReliabilityFact.objects.filter(kind="report").exists()


def test_a_brittle_check_names_one_of_the_contracts_checks(
        agent: AgentClient, workspace: Path, rita: Client) -> None:
    worker = certified(agent, workspace)
    answer = report(rita, worker.id, kind="brittle-check", check="readme-install",
                    reason="matches '## Install' in a code block too")
    assert answer.status_code == 302
    assert reports_of(worker.id)[0]["check"] == "readme-install"


def test_the_same_report_twice_by_the_same_reviewer_is_refused(
        agent: AgentClient, workspace: Path, rita: Client) -> None:
    worker = certified(agent, workspace)
    report(rita, worker.id, kind="false-certification", reason="not done")
    again = report(rita, worker.id, kind="false-certification", reason="still not done")
    assert again.status_code == 409 and "already reported" in again.content.decode()
    assert len(reports_of(worker.id)) == 1


def test_exhausted_and_abstained_sessions_take_their_own_reports(
        agent: AgentClient, workspace: Path, rita: Client) -> None:
    exhausted = Agent(agent, workspace)
    exhausted.begin(readme_contract(max_attempts=1))
    assert exhausted.turn_stop()["terminal"]["status"] == "exhausted"
    assert "Exhausted but done" in timeline(rita, exhausted.id)
    assert report(rita, exhausted.id, kind="false-exhaustion",
                  reason="the README was right; the check was wrong").status_code == 302
    abstained = Agent(agent, workspace)
    abstained.begin(readme_contract())
    agent.post(f"/sessions/{abstained.id}/abstain", {"reason": "needs a human"})
    assert report(rita, abstained.id, kind="wrong-abstention",
                  reason="it could have finished").status_code == 302
    assert [r["kind"] for r in reports_of(abstained.id)] == ["wrong-abstention"]


def test_a_session_that_has_not_ended_offers_no_report_and_refuses_one(
        agent: AgentClient, workspace: Path, rita: Client) -> None:
    worker = Agent(agent, workspace)
    worker.begin(readme_contract())
    page = timeline(rita, worker.id)
    assert "Nothing to report yet" in page and 'action="/sessions/' not in page.split(
        'id="reports"')[1].split("</section>")[0]
    [token_form] = forms_on(page)[:1]
    answer = rita.post(f"/sessions/{worker.id}/reports",
                       {"csrfmiddlewaretoken": token_form["fields"]["csrfmiddlewaretoken"],
                        "kind": "false-certification", "reason": "x"})
    assert answer.status_code == 400 and "<code>session</code>" in answer.content.decode()
    assert reports_of(worker.id) == []


def test_an_operator_sees_reports_but_cannot_make_one(
        agent: AgentClient, workspace: Path, project: Project, rita: Client) -> None:
    worker = certified(agent, workspace)
    report(rita, worker.id, kind="false-certification", reason="not done")
    olga = get_user_model().objects.create_user("olga", "olga@example.com", "olga-password-1")
    Membership.objects.create(user=olga, project=project, role=Role.OPERATOR)
    client = reviewer_client("olga", "olga-password-1")
    page = timeline(client, worker.id)
    assert "certified but not done" in page and 'name="reason"' not in page
    token = forms_on(page)[0]["fields"]["csrfmiddlewaretoken"]
    answer = client.post(f"/sessions/{worker.id}/reports", {
        "csrfmiddlewaretoken": token, "kind": "false-certification", "reason": "x"})
    assert answer.status_code == 403 and "only a reviewer" in answer.content.decode()
    assert len(reports_of(worker.id)) == 1


def test_a_verifier_written_from_docs_api_md_checks_the_reports_receipt(
        agent: AgentClient, workspace: Path, rita: Client) -> None:
    from tests.api import documented_verifier

    worker = certified(agent, workspace)
    report(rita, worker.id, kind="false-certification", reason="not done")
    text = export_text(agent, worker.id)
    keys = documented_verifier.keys_from_endpoint(agent.get("/keys").content)
    assert documented_verifier.problems(text, keys) == []
    forged = text.replace('"kind":"false-certification"', '"kind":"brittle-check"')
    assert documented_verifier.problems(forged, keys) != []


def test_a_reviewer_of_another_project_reports_nothing_and_is_told_why(
        agent: AgentClient, workspace: Path, rita: Client) -> None:
    worker = certified(agent, workspace)
    other = Project.objects.create(slug="elsewhere", name="Elsewhere")
    otto = get_user_model().objects.create_user("otto", "otto@example.com", "otto-password-1")
    Membership.objects.create(user=otto, project=other, role=Role.REVIEWER)
    client = reviewer_client("otto", "otto-password-1")
    client.get("/sessions/")  # a page, for its CSRF cookie
    answer = client.post(f"/sessions/{worker.id}/reports", {
        "csrfmiddlewaretoken": client.cookies["csrftoken"].value,
        "kind": "false-certification", "reason": "x"})
    assert answer.status_code == 404
    assert "no such session in a project you review" in answer.content.decode()
    assert reports_of(worker.id) == []


def test_an_agent_token_can_never_report(agent: AgentClient, workspace: Path) -> None:
    worker = certified(agent, workspace)
    answer = agent.client.post(f"/sessions/{worker.id}/reports",
                               {"kind": "false-certification", "reason": "x"},
                               headers={"Authorization": f"Bearer {agent.secret}"})
    assert answer.status_code == 302 and "/accounts/login/" in answer["Location"]
    assert reports_of(worker.id) == []

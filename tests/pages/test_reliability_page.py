"""The reliability page (issue 31 item 3): for a project's reviewers and operators, over a
chosen period, how often "done" was really done — sessions, contracts, certified at the first
attempt or after repair, exhausted, abstained, review decisions per stage with the median time
to decide, trusted-run failures per profile, the checks that fail most, per agent token, and the
false-certification rate as a count of a total over the period; CSV and JSON with the same
numbers; a fixed number of queries whatever the row count."""

from __future__ import annotations

import csv
import datetime
import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from bench.b12_reliability import populate
from governor.domain.reliability import Fact, Period, event_facts
from governor.models import AgentToken, Membership, Project, ReliabilityFact, Role, Session
from governor.services.facts import days_count
from tests.api.test_contracts import Agent, readme_contract
from tests.conftest import AgentClient
from tests.pages import reviewer_client
from tests.pages.test_outcome_reports import report
from tests.unit.test_checks import CODE_CHECK, call, verification
from tests.unit.test_checks import run as check_run

URL = "/projects/acme/reliability"


@pytest.fixture
def rita(reviewer: Any) -> Client:
    return reviewer_client("rita", "rita-password-1")


def today_label() -> str:
    today = timezone.now().date()
    return Period(today - datetime.timedelta(days=29), today).label()


def lifecycles(agent: AgentClient, workspace: Path, rita: Client) -> None:
    """Two certified contracts (one at the first attempt, one after a repair), one exhausted,
    one abstained; one certified one reported false."""
    first = Agent(agent, workspace)
    first.begin(readme_contract())
    first.write("README.md", "# Tool\n\n## Install\n")
    assert first.turn_stop()["terminal"]["status"] == "certified"
    (workspace / "README.md").unlink()
    repaired = Agent(agent, workspace)
    repaired.begin(readme_contract())
    assert repaired.turn_stop()["action"] == "steer"
    repaired.write("README.md", "# Tool\n\n## Install\n")
    assert repaired.turn_stop()["terminal"]["status"] == "certified"
    (workspace / "README.md").unlink()
    exhausted = Agent(agent, workspace)
    exhausted.begin(readme_contract(max_attempts=1))
    assert exhausted.turn_stop()["terminal"]["status"] == "exhausted"
    abstained = Agent(agent, workspace)
    abstained.begin(readme_contract())
    agent.post(f"/sessions/{abstained.id}/abstain", {"reason": "needs a human"})
    assert report(rita, repaired.id, kind="false-certification",
                  reason="the Install section is empty").status_code == 302


def test_real_lifecycles_are_counted_and_the_false_certification_rate_has_its_count_and_period(
        agent: AgentClient, workspace: Path, rita: Client) -> None:
    lifecycles(agent, workspace, rita)
    page = rita.get(URL)
    assert page.status_code == 200
    html = page.content.decode()
    assert (f"1 of 2 certified contracts reported certified but not done, {today_label()}"
            in html)
    assert "%" not in html.split('id="false-certification"')[1].split("</p>")[0]
    summary = rita.get(URL, {"format": "json"}).json()
    assert summary["sessions"] == 4
    assert summary["contracts"] == {"total": 4, "reviewed": 0, "unreviewed": 4}
    assert summary["outcomes"] == {"certified_first": 1, "certified_repair": 1,
                                   "exhausted": 1, "abstained": 1}
    assert summary["false_certification"]["contracts"] == 1
    assert summary["false_certification"]["total"] == 2
    failing = {check["check"]: check for check in summary["checks"]}
    assert failing["readme-exists"]["failures"] == 2  # the repaired and the exhausted attempt
    assert failing["readme-install"]["failures"] == 2
    [token] = summary["tokens"]
    assert token["token"].startswith("agent (") and token["sessions"] == 4
    assert token["certified_first"] == 1 and token["false_certification"] == 1


def record(project: Project, session_id: str, seq: int, fact: Fact) -> None:
    """A fact as `facts_record` writes it: its row and its day count."""
    session = Session.objects.get(pk=session_id)
    now = timezone.now()
    ReliabilityFact.objects.create(project=project, session=session, event_seq=seq, at=now,
                                   kind=fact.kind, name=fact.name, status=fact.status,
                                   value=fact.value)
    days_count(session, now.date(), [(fact.kind, fact.name, fact.status, fact.value == 1)])


def test_review_decisions_per_stage_with_the_median_time_to_decide(
        agent: AgentClient, workspace: Path, project: Project, rita: Client) -> None:
    session = Agent(agent, workspace)
    for seq, waited in enumerate((60_000, 180_000, 120_000, 3_600_000)):
        record(project, session.id, seq, Fact("review", "intent",
                                               "approved" if seq else "rejected", waited))
    summary = rita.get(URL, {"format": "json"}).json()
    intent = summary["reviews"][0]
    assert intent["stage"] == "intent" and intent["total"] == 4
    assert intent["decisions"]["approved"] == 3 and intent["decisions"]["rejected"] == 1
    assert intent["median_ms"] == 150_000
    assert "2 min 30 s" in rita.get(URL).content.decode()


def test_trusted_run_failures_are_counted_per_profile_without_baselines(
        project: Project, agent: AgentClient, workspace: Path, rita: Client) -> None:
    session = Agent(agent, workspace)
    runs = [{"profile": "unit-tests", "passed": True, "durationMs": 5},
            {"profile": "unit-tests", "passed": False, "failureKind": "exit"},
            {"profile": "unit-tests", "passed": False, "failureKind": "timeout"},
            {"profile": "unit-tests", "passed": False, "failureKind": "exit", "baseline": True}]
    for seq, data in enumerate(runs):
        for fact in event_facts("reliability/code-verification", data, attempts=0):
            record(project, session.id, seq, fact)
    [profile] = rita.get(URL, {"format": "json"}).json()["runs"]
    assert profile == {"profile": "unit-tests", "runs": 3, "failures": 2,
                       "kinds": {"exit": 1, "timeout": 1}}


def test_a_trusted_runs_check_no_run_answered_yet_is_not_counted_as_a_failed_check(
        project: Project, agent: AgentClient, workspace: Path, rita: Client) -> None:
    """Issue 40: "no run requested yet" is a check that has not run, not one that failed."""
    session = Agent(agent, workspace)
    not_run = check_run(CODE_CHECK, events=[call(11, "c", "edit")])
    assert not_run["evidence"].startswith("No run of profile")
    failed = check_run(CODE_CHECK, events=[verification(12, passed=False)])
    attempt = {"contractId": "c-1", "attempt": 1, "results": [
        not_run, {**failed, "id": "lint"}]}
    for fact in event_facts("reliability/attempt", attempt, attempts=1):
        record(project, session.id, 1, fact)
    assert rita.get(URL, {"format": "json"}).json()["checks"] == [
        {"check": "lint", "kind": "code_verification_succeeded", "failures": 1}]
    assert "has not run, so it has not failed" in rita.get(URL).content.decode()


@pytest.mark.parametrize("sizes", [(10, 200)])
def test_the_page_takes_the_same_queries_whatever_the_row_count(
        project: Project, agent_owner: Any, rita: Client, sizes: tuple[int, int],
        django_assert_num_queries: Any) -> None:
    tokens = [AgentToken.objects.create(project=project, name=f"agent {n}", prefix=f"p{n}",
                                        digest=f"{n:064d}", owner=agent_owner) for n in range(3)]
    now = timezone.now()
    start = datetime.datetime.combine(now.date() - datetime.timedelta(days=29), datetime.time(),
                                      tzinfo=datetime.UTC)
    smaller, larger = sizes
    written = populate(project, tokens, smaller, start=start, end=now)
    with CaptureQueriesContext(connection) as small:
        assert rita.get(URL).status_code == 200
    more = populate(project, tokens, larger - smaller, start=start, end=now, seed=99)
    with django_assert_num_queries(len(small.captured_queries)):
        page = rita.get(URL)
    certified = sum(counts[name] for counts in (written, more)
                    for name in ("certified_first", "certified_repair"))
    assert f"of {certified} certified contracts" in page.content.decode()


def test_another_projects_user_gets_a_clear_page_not_a_bare_not_found(
        project: Project, rita: Client) -> None:
    Project.objects.create(slug="secret", name="Secret")
    answer = rita.get("/projects/secret/reliability")
    assert answer.status_code == 404
    html = answer.content.decode()
    assert "No project “secret” for you" in html and "reviewers or operators" in html
    assert rita.get("/projects/nowhere/reliability").content.decode().count("nowhere") >= 2


def test_an_operator_sees_the_page_and_a_stranger_must_sign_in(
        project: Project, rita: Client) -> None:
    olga = get_user_model().objects.create_user("olga", "olga@example.com", "olga-password-1")
    Membership.objects.create(user=olga, project=project, role=Role.OPERATOR)
    assert reviewer_client("olga", "olga-password-1").get(URL).status_code == 200
    anonymous = Client().get(URL)
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]


def test_the_projects_list_links_each_members_project(project: Project, rita: Client) -> None:
    html = rita.get("/projects/").content.decode()
    assert f'href="{URL}"' in html


@pytest.mark.parametrize(("query", "field", "message"), [
    ({"from": "yesterday"}, "from", "is not a date"),
    ({"from": "2026-11-30", "to": "2026-11-01"}, "from", "is after to"),
    ({"from": "2024-01-01", "to": "2026-01-01"}, "from", "at most 366"),
    ({"format": "xml"}, "format", "must be one of"),
])
def test_a_bad_period_is_refused_naming_the_field(
        rita: Client, query: dict[str, str], field: str, message: str) -> None:
    page = rita.get(URL, query)
    assert page.status_code == 400
    assert f"<code>{field}</code>" in page.content.decode() and message in page.content.decode()
    answer = rita.get(URL, {**query, "format": "json"})
    if query.get("format") != "xml":
        assert answer.status_code == 422
        assert answer.json()["error"]["details"][0]["path"] == field


def test_a_chosen_period_counts_only_what_happened_in_it(
        agent: AgentClient, workspace: Path, rita: Client) -> None:
    lifecycles(agent, workspace, rita)
    tomorrow = timezone.now().date() + datetime.timedelta(days=1)
    later = rita.get(URL, {"from": tomorrow.isoformat(), "to": tomorrow.isoformat(),
                           "format": "json"}).json()
    assert later["sessions"] == 0 and later["ended"] == 0
    assert later["false_certification"]["sentence"] == (
        f"0 of 0 certified contracts reported certified but not done, "
        f"{Period(tomorrow, tomorrow).label()}")
    assert "no rate to measure" in rita.get(URL, {"from": tomorrow.isoformat(),
                                                  "to": tomorrow.isoformat()}).content.decode()


def test_csv_and_json_downloads_hold_the_same_numbers(
        agent: AgentClient, workspace: Path, rita: Client) -> None:
    lifecycles(agent, workspace, rita)
    html = rita.get(URL).content.decode()
    assert "format=csv" in html and "format=json" in html
    answer = rita.get(URL, {"format": "csv"})
    assert answer["Content-Type"].startswith("text/csv")
    assert answer["Content-Disposition"].startswith('attachment; filename="reliability-acme-')
    rows = list(csv.reader(io.StringIO(answer.content.decode())))
    assert rows[0] == ["section", "item", "measure", "value"]
    cells = {(section, item, measure): value for section, item, measure, value in rows[1:]}
    summary = rita.get(URL, {"format": "json"}).json()
    assert cells[("sessions", "", "started")] == str(summary["sessions"])
    assert cells[("outcomes", "certified_repair", "contracts")] == "1"
    assert cells[("reports", "false-certification", "contracts")] == "1"
    assert cells[("reports", "false-certification", "of_certified")] == "2"
    assert json.loads(rita.get(URL, {"format": "json"}).content) == summary


def test_a_real_review_decision_is_counted_with_its_time_to_decide(
        agent: AgentClient, workspace: Path, project: Project, reviewer: Any,
        rita: Client) -> None:
    from governor.services.reviews import review_decide
    from tests.pages import propose

    project.review_mode = "required"
    project.save(update_fields=["review_mode"])
    _, intent = propose(agent, workspace)
    review_decide(user=reviewer, review=intent, receipt=intent.receipt,
                  decision="revision-requested", feedback="name the package manager")
    summary = rita.get(URL, {"format": "json"}).json()
    stage = summary["reviews"][0]
    assert stage["stage"] == "intent" and stage["total"] == 1
    assert stage["decisions"]["revision-requested"] == 1
    assert stage["median_ms"] is not None and stage["median_ms"] >= 0
    assert summary["sessions"] == 1 and summary["contracts"]["total"] == 0


def test_rebuilding_the_facts_from_the_logs_gives_the_same_page(
        agent: AgentClient, workspace: Path, rita: Client) -> None:
    from django.core.management import call_command

    lifecycles(agent, workspace, rita)
    before = rita.get(URL, {"format": "json"}).json()
    rows = sorted(ReliabilityFact.objects.values_list("session_id", "event_seq", "kind", "name",
                                                       "status", "value", "contract_id"))
    out = io.StringIO()
    call_command("governor_reliability", "rebuild", "--project", "acme", stdout=out)
    assert "acme: facts rebuilt from 4 session(s)" in out.getvalue()
    assert rita.get(URL, {"format": "json"}).json() == before
    assert sorted(ReliabilityFact.objects.values_list(
        "session_id", "event_seq", "kind", "name", "status", "value", "contract_id")) == rows

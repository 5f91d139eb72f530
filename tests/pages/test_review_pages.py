"""The reviewer pages (rules §6, docs/architecture.md): who may see a proposal, what it
shows, and that only a reviewer's browser session posting the exact receipt it was shown can
decide it."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from governor.models import Event, Membership, Project, Role, Session
from governor.selectors.sessions import session_status
from reviews.models import Review, Stage, Status
from tests.conftest import AgentClient
from tests.pages import forms_on, press, propose, reject, reviewer_client

pytestmark = pytest.mark.django_db


def member(username: str, project: Project, *roles: str) -> Client:
    user = get_user_model().objects.create_user(username, f"{username}@example.com",
                                                f"{username}-password-1")
    for role in roles:
        Membership.objects.create(user=user, project=project, role=role)
    return reviewer_client(username, f"{username}-password-1")


def other_project(tmp_path: Path) -> Project:
    return Project.objects.create(slug="other", name="Other", review_mode="required",
                                  workspace_roots=[str(tmp_path)])


def url(review: Review) -> str:
    return f"/reviews/{review.pk}/"


def approve_intent(client: Client, review: Review) -> Review:
    response = press(client, url(review), "Approve")
    assert response.status_code == 302, response.content
    return Review.objects.get(session_id=review.session_id, stage=Stage.EVIDENCE)


# --- who sees what ----------------------------------------------------------------------------


def test_pages_need_a_login(intent_review: Review) -> None:
    client = Client(enforce_csrf_checks=True)
    for path in ("/reviews/", url(intent_review), f"/sessions/{intent_review.session_id}/"):
        response = client.get(path)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/?next=")


def test_login_page_signs_a_reviewer_in(reviewer: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    page = client.get("/accounts/login/")
    assert page.status_code == 200
    [form] = forms_on(page.content.decode())
    fields = {**form["fields"], "username": "rita", "password": "rita-password-1"}
    response = client.post(form["action"], fields)
    assert response.status_code == 302 and response["Location"] == "/reviews/"
    inbox = client.get("/reviews/").content.decode()
    assert "rita" in inbox and 'action="/accounts/logout/"' in inbox


def test_inbox_shows_only_the_reviewers_projects(
    rita: Client, intent_review: Review, tmp_path: Path
) -> None:
    elsewhere = other_project(tmp_path)
    session = Session.objects.create(project=elsewhere, workspace_kind="path")
    Review.objects.create(session=session, stage=Stage.INTENT, receipt="sha256:" + "e" * 64,
                          proposal={"objective": "Someone else's secret plan"}, plan={},
                          expires_at=timezone.now() + timedelta(hours=1))
    page = rita.get("/reviews/")
    assert page.status_code == 200
    html = page.content.decode()
    assert f'href="/reviews/{intent_review.pk}/"' in html
    assert "Write README.md with an Install section" in html
    assert "Someone else" not in html
    assert 'hx-get="/reviews/live?page=1&amp;version=' in html  # it waits for a change
    assert "every" not in html.split('<section id="inbox-list"')[1].split(">")[0]  # no timer


def test_inbox_lists_the_newest_first_with_stage_and_expiry(
    rita: Client, agent: AgentClient, workspace: Path, intent_review: Review
) -> None:
    newer = propose(agent, workspace, objective="Add a CHANGELOG entry")[1]
    html = rita.get("/reviews/").content.decode()
    assert html.index(f"/reviews/{newer.pk}/") < html.index(f"/reviews/{intent_review.pk}/")
    assert "Add a CHANGELOG entry" in html
    assert ">Intent</span>" in html and "23\xa0hours" in html  # expires in (timeuntil)


def test_inbox_fragment_is_the_list_alone_for_htmx(rita: Client, intent_review: Review) -> None:
    response = rita.get("/reviews/live", {"version": "something-older", "wait": 0},
                        headers={"HX-Request": "true"})
    assert response.status_code == 200
    html = response.content.decode()
    status, listing = html.split('<section id="inbox-list"')
    assert status.strip() == ('<p id="inbox-status" class="visually-hidden" role="status">'
                              "1 proposal waiting</p>")  # swapped apart: only it is announced
    assert f"/reviews/{intent_review.pk}/" in listing and "<html" not in html
    assert "aria-live" not in listing


def test_another_projects_reviewer_gets_404_on_the_proposal_and_the_timeline(
    intent_review: Review, tmp_path: Path
) -> None:
    outsider = member("otto", other_project(tmp_path), Role.REVIEWER)
    assert outsider.get(url(intent_review)).status_code == 404
    assert outsider.get(f"/sessions/{intent_review.session_id}/").status_code == 404
    assert outsider.get(f"/sessions/{intent_review.session_id}/export").status_code == 404
    assert str(intent_review.pk) not in outsider.get("/reviews/").content.decode()


def test_another_projects_reviewer_cannot_post_a_decision(
    intent_review: Review, tmp_path: Path
) -> None:
    outsider = member("otto", other_project(tmp_path), Role.REVIEWER)
    outsider.get("/reviews/")
    response = outsider.post(url(intent_review), {
        "receipt": intent_review.receipt, "decision": "approved",
        "csrfmiddlewaretoken": outsider.cookies["csrftoken"].value})
    assert response.status_code == 404
    assert Review.objects.get(pk=intent_review.pk).status == Status.PENDING


def test_an_operator_only_member_is_not_a_reviewer(
    intent_review: Review, review_project: Project
) -> None:
    operator = member("olga", review_project, Role.OPERATOR)
    assert operator.get(url(intent_review)).status_code == 404
    assert str(intent_review.pk) not in operator.get("/reviews/").content.decode()
    timeline = operator.get(f"/sessions/{intent_review.session_id}/")
    assert timeline.status_code == 200  # members of the project read its sessions
    assert f"/reviews/{intent_review.pk}/" not in timeline.content.decode()


def test_unknown_review_is_404(rita: Client) -> None:
    assert rita.get("/reviews/00000000-0000-0000-0000-000000000000/").status_code == 404


# --- what a proposal shows --------------------------------------------------------------------


def test_intent_page_shows_the_whole_intent_and_its_receipt(
    rita: Client, intent_review: Review
) -> None:
    html = rita.get(url(intent_review)).content.decode()
    for text in ("Write README.md with an Install section",
                 "Keep the existing sections of README.md", "README.md may not exist yet",
                 "No changes to CI", "Which package manager the Install section should name",
                 "current-agent", "declared by the caller", intent_review.receipt,
                 f"/sessions/{intent_review.session_id}/"):
        assert text in html
    buttons = [button for form in forms_on(html) for button in form["buttons"]]
    assert buttons == ["Log out", "Approve", "Request revision", "Reject"]  # one decision box
    for form in forms_on(html)[1:]:
        assert form["method"] == "post"
        assert form["fields"]["receipt"] == intent_review.receipt
        assert form["fields"]["csrfmiddlewaretoken"]
    assert '<label for="feedback-' in html and 'maxlength="2000"' in html


def test_evidence_page_shows_claims_every_check_parameter_coverage_and_the_intent(
    rita: Client, intent_review: Review
) -> None:
    evidence = approve_intent(rita, intent_review)
    html = rita.get(url(evidence)).content.decode()
    proposal = evidence.proposal
    assert "claim-0" in html and "README.md satisfies requirement 0" in html
    assert "critical" in html and "deterministic" in html
    for check in proposal["checks"]:
        assert check["id"] in html and check["kind"] in html
        for name, value in check.items():
            if name not in ("id", "kind"):
                assert f"<dt>{name}</dt>" in html
                assert json.dumps(value).replace('"', "&quot;") in html
    coverage = proposal["coverage"]
    assert coverage["receipt"] in html
    for finding in coverage["findings"]:
        assert finding["code"] in html
    assert 'class="finding warning"' in html and "Warning" in html
    assert f"{coverage['scores']['critical']['covered']} of" in html
    assert "maxAttempts" in html and f"<strong>{proposal['maxAttempts']}</strong>" in html
    intent = proposal["approvedIntent"]
    assert intent["proposalReceipt"] == intent_review.receipt
    assert intent["proposalReceipt"] in html and intent["reviewReceipt"] in html
    assert "Keep the existing sections of README.md" in html
    assert "declared by the caller" in html


def test_warnings_and_errors_are_listed_apart(rita: Client, intent_review: Review) -> None:
    evidence = approve_intent(rita, intent_review)
    findings = [{"code": "claim_unsupported", "severity": "error", "message": "bad claim"},
                {"code": "presence_only_evidence", "severity": "warning", "message": "weak"}]
    proposal = {**evidence.proposal, "coverage": {**evidence.proposal["coverage"],
                                                  "findings": findings}}
    Review.objects.filter(pk=evidence.pk).update(proposal=proposal)
    html = rita.get(url(evidence)).content.decode()
    errors, warnings = html.split("<h3>Errors (1)</h3>")[1].split("<h3>Warnings (1)</h3>")
    assert "claim_unsupported" in errors and "presence_only_evidence" not in errors
    assert "presence_only_evidence" in warnings and "claim_unsupported" not in warnings
    assert 'class="finding error"' in errors and 'class="finding warning"' in warnings


# --- deciding ---------------------------------------------------------------------------------


def test_post_without_csrf_token_fails_and_decides_nothing(
    rita: Client, intent_review: Review
) -> None:
    response = rita.post(url(intent_review), {"receipt": intent_review.receipt,
                                              "decision": "approved"})
    assert response.status_code == 403  # CsrfViewMiddleware, before any access decision
    assert Review.objects.get(pk=intent_review.pk).status == Status.PENDING


def test_approving_the_intent_opens_the_evidence_proposal(
    rita: Client, intent_review: Review
) -> None:
    response = press(rita, url(intent_review), "Approve")
    assert response.status_code == 302 and response["Location"] == url(intent_review)
    intent_review.refresh_from_db()
    assert intent_review.status == Status.APPROVED
    evidence = Review.objects.get(session_id=intent_review.session_id, stage=Stage.EVIDENCE)
    assert evidence.status == Status.PENDING
    page = rita.get(response["Location"]).content.decode()
    assert "The evidence plan is now waiting" in page
    assert f'href="/reviews/{evidence.pk}/"' in page
    assert "Approve</button>" not in page and "Reject</button>" not in page
    assert f'href="/reviews/{evidence.pk}/"' in rita.get("/reviews/").content.decode()


def test_approving_the_evidence_activates_a_version_5_contract(
    rita: Client, intent_review: Review
) -> None:
    evidence = approve_intent(rita, intent_review)
    response = press(rita, url(evidence), "Approve")
    assert response.status_code == 302
    page = rita.get(response["Location"]).content.decode()
    assert "the contract is active" in page
    status = session_status(Session.objects.get(pk=intent_review.session_id))
    assert status["state"] == "active"
    assert status["contract"]["version"] == 5
    evidence.refresh_from_db()
    assert status["contract"]["review"]["contractProposalReceipt"] == evidence.receipt
    assert status["contract"]["review"]["contractReviewReceipt"] == evidence.decision_receipt
    assert status["contract"]["review"]["intentProposalReceipt"] == intent_review.receipt


def test_request_revision_sends_the_feedback_to_the_agent(
    rita: Client, intent_review: Review, agent: AgentClient
) -> None:
    feedback = "Please also name pipx as an install option."
    response = press(rita, url(intent_review), "Request revision", feedback=feedback)
    assert response.status_code == 302
    review = agent.get(f"/sessions/{intent_review.session_id}/review").json()["review"]
    assert review["status"] == "revision-requested"
    assert review["feedback"] == feedback
    assert review["proposal_receipt"] == intent_review.receipt
    page = rita.get(url(intent_review)).content.decode()
    assert "A revision was requested" in page and "Nothing was approved" in page


def test_feedback_text_never_appears_in_events_or_the_export(
    rita: Client, intent_review: Review, agent: AgentClient
) -> None:
    feedback = "UNIQUE-FEEDBACK-MARKER: the Install section must mention uv"
    press(rita, url(intent_review), "Request revision", feedback=feedback)
    rows = Event.objects.filter(session_id=intent_review.session_id)
    assert rows.filter(type="reliability/intent-review").count() == 1
    for row in rows:
        assert "UNIQUE-FEEDBACK-MARKER" not in json.dumps(row.data)
        assert "UNIQUE-FEEDBACK-MARKER" not in (row.raw or "")
    review_event = rows.get(type="reliability/intent-review")
    assert review_event.data["feedbackBytes"] == len(feedback.encode())
    export = agent.get(f"/sessions/{intent_review.session_id}/export")
    assert b"UNIQUE-FEEDBACK-MARKER" not in export.getvalue()
    page_export = rita.get(f"/sessions/{intent_review.session_id}/export")
    assert page_export.status_code == 200
    assert b"UNIQUE-FEEDBACK-MARKER" not in page_export.getvalue()


def test_rejecting_ends_the_stage_and_approves_nothing(
    rita: Client, intent_review: Review
) -> None:
    assert reject(rita, url(intent_review), "out of scope").status_code == 302
    intent_review.refresh_from_db()
    assert intent_review.status == Status.REJECTED
    assert not Review.objects.filter(session_id=intent_review.session_id,
                                     stage=Stage.EVIDENCE).exists()
    page = rita.get(url(intent_review)).content.decode()
    assert "rejected" in page and "Approve</button>" not in page


def test_feedback_over_2000_characters_is_refused(rita: Client, intent_review: Review) -> None:
    response = press(rita, url(intent_review), "Request revision", feedback="x" * 2001)
    assert response.status_code == 400
    assert "Nothing was decided" in response.content.decode()
    assert Review.objects.get(pk=intent_review.pk).status == Status.PENDING
    crlf = "line\r\n" * 400  # 2,400 bytes as sent, 2,000 characters as typed
    assert press(rita, url(intent_review), "Request revision", feedback=crlf).status_code == 302


def test_stale_receipt_approves_nothing_and_says_so(rita: Client, intent_review: Review) -> None:
    html = rita.get(url(intent_review)).content.decode()
    altered = html.replace(intent_review.receipt, "sha256:" + "0" * 64)
    response = press(rita, url(intent_review), "Approve", html=altered)
    assert response.status_code == 409
    page = response.content.decode()
    assert "Nothing was approved." in page and "not the session&#x27;s current pending" in page
    assert Review.objects.get(pk=intent_review.pk).status == Status.PENDING
    assert not Event.objects.filter(session_id=intent_review.session_id,
                                    type="reliability/intent-review").exists()


def test_a_decided_proposal_cannot_be_approved_again(rita: Client, intent_review: Review) -> None:
    shown = rita.get(url(intent_review)).content.decode()
    assert reject(rita, url(intent_review), "out of scope", html=shown).status_code == 302
    response = press(rita, url(intent_review), "Approve", html=shown)
    assert response.status_code == 409
    assert "Nothing was approved." in response.content.decode()
    assert Review.objects.get(pk=intent_review.pk).status == Status.REJECTED
    assert not Review.objects.filter(session_id=intent_review.session_id,
                                     stage=Stage.EVIDENCE).exists()


def test_an_expired_proposal_cannot_be_approved(rita: Client, intent_review: Review) -> None:
    shown = rita.get(url(intent_review)).content.decode()
    Review.objects.filter(pk=intent_review.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1))
    response = press(rita, url(intent_review), "Approve", html=shown)
    assert response.status_code == 409
    page = response.content.decode()
    assert "Nothing was approved." in page and "expired" in page
    assert "Approve</button>" not in page
    intent_review.refresh_from_db()
    assert intent_review.status == Status.EXPIRED
    assert not Review.objects.filter(session_id=intent_review.session_id,
                                     stage=Stage.EVIDENCE).exists()
    assert "Approve</button>" not in rita.get(url(intent_review)).content.decode()
    waiting, decided = rita.get("/reviews/").content.decode().split('id="decided-heading"')
    assert str(intent_review.pk) not in waiting
    assert str(intent_review.pk) in decided and "expired" in decided


def test_required_approvals_2_needs_two_distinct_reviewers(
    rita: Client, intent_review: Review, review_project: Project
) -> None:
    Project.objects.filter(pk=review_project.pk).update(required_approvals=2)
    assert press(rita, url(intent_review), "Approve").status_code == 302
    assert Review.objects.get(pk=intent_review.pk).status == Status.PENDING
    page = rita.get(url(intent_review)).content.decode()
    assert "1 of 2 required approvals" in page and "You have approved it" in page
    assert "Approve</button>" not in page  # the same reviewer cannot count twice
    again = rita.post(url(intent_review), {
        "receipt": intent_review.receipt, "decision": "approved",
        "csrfmiddlewaretoken": rita.cookies["csrftoken"].value})
    assert again.status_code == 302
    assert Review.objects.get(pk=intent_review.pk).status == Status.PENDING
    second = member("ravi", review_project, Role.REVIEWER)
    assert press(second, url(intent_review), "Approve").status_code == 302
    intent_review.refresh_from_db()
    assert intent_review.status == Status.APPROVED
    event = Event.objects.get(session_id=intent_review.session_id,
                              type="reliability/intent-review")
    assert len(set(event.data["decidedBy"]["userIds"])) == 2


def test_a_withdrawn_proposal_shows_its_status_and_no_buttons(
    rita: Client, intent_review: Review, agent: AgentClient
) -> None:
    assert agent.delete(f"/sessions/{intent_review.session_id}/review").status_code == 200
    page = rita.get(url(intent_review)).content.decode()
    assert "The agent withdrew this proposal." in page and ">cancelled</span>" in page
    assert "<button" not in page.split('id="decision"')[1]


# --- htmx -------------------------------------------------------------------------------------


def test_htmx_decision_answers_with_the_decision_panel(
    rita: Client, intent_review: Review
) -> None:
    response = press(rita, url(intent_review), "Approve", **{"HX-Request": "true"})
    assert response.status_code == 200
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="decision"')
    assert "The evidence plan is now waiting" in html and "<html" not in html


def test_htmx_stale_decision_answers_409_with_the_panel(
    rita: Client, intent_review: Review
) -> None:
    shown = rita.get(url(intent_review)).content.decode()
    assert reject(rita, url(intent_review), "out of scope", html=shown).status_code == 302
    response = press(rita, url(intent_review), "Approve", html=shown, **{"HX-Request": "true"})
    assert response.status_code == 409
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="decision"') and "Nothing was approved." in html


def test_forms_work_without_javascript(rita: Client, intent_review: Review) -> None:
    html = rita.get(url(intent_review)).content.decode()
    for form in forms_on(html)[1:]:
        assert form["action"] == url(intent_review)
        assert form["attrs"]["hx-post"] == url(intent_review)
        assert form["attrs"]["hx-target"] == "#decision"
    assert "hx-headers" in html and "X-CSRFToken" in html
    assert '<script src="/static/vendor/htmx.min.js"' in html


# --- query counts -----------------------------------------------------------------------------


def pending_reviews(agent: AgentClient, workspace: Path, count: int) -> None:
    for _ in range(count):
        propose(agent, workspace)


@pytest.mark.parametrize("count", [10, 100])
def test_inbox_query_count_does_not_grow_with_pending_reviews(
    rita: Client, agent: AgentClient, workspace: Path, review_project: Project,
    django_assert_num_queries: Any, count: int
) -> None:
    pending_reviews(agent, workspace, count)
    # session, user, the live part's version, count of pending, one page of them, the recently
    # decided, the newest gated changes (rules §19)
    with django_assert_num_queries(7):
        response = rita.get("/reviews/")
    page = response.content.decode()
    assert page.count('class="objective-link"') == min(count, 50)
    assert (f"1–50 of {count} waiting" in page) is (count > 50)
    if count > 50:
        older = rita.get("/reviews/?page=2").content.decode()
        assert older.count('class="objective-link"') == count - 50


@pytest.mark.parametrize("count", [10, 100])
def test_evidence_page_query_count_does_not_grow_with_claims_and_checks(
    rita: Client, agent: AgentClient, workspace: Path, review_project: Project,
    django_assert_num_queries: Any, count: int
) -> None:
    Project.objects.filter(pk=review_project.pk).update(max_checks=100)
    _, intent = propose(agent, workspace, checks=count, claims=count)
    evidence = approve_intent(rita, intent)
    assert len(evidence.proposal["checks"]) == len(evidence.proposal["claims"]) == count
    # session, user, review with its project, approvals, the session's earlier proposals, the
    # reviewer's passkeys (does the decision get signed), the session's folded lifecycle (the
    # changes of an earlier contract: none here), the runs that used a held-out suite (§18.4)
    with django_assert_num_queries(8):
        response = rita.get(url(evidence))
    assert response.status_code == 200
    assert response.content.decode().count('class="check"') == count



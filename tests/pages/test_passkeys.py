"""Issue 18 through the pages, without a browser: a software authenticator (real P-256 keys,
real CBOR; tests/passkey_authenticator.py) answers the WebAuthn ceremonies exactly as a browser
posts them, and py_webauthn on the server checks every answer. Registering, naming and removing
passkeys; a project requiring signed approvals; what a signed decision stores; and the
signatures the server refuses (no user verification, a counter that went backwards, a signature
of another decision, a nonce used twice)."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from governor.domain.passkey import assertion_digest, b64url, load_reviewer_keys
from governor.models import Event, Membership, Project, Role
from governor.services.exports import export_lines
from governor.verify import verify_export
from reviews.models import DecisionSignature, Passkey, Review, Stage, Status
from tests.conftest import AgentClient
from tests.html_forms import forms_on
from tests.pages import contract_body, decision_form, press, propose, reviewer_client
from tests.passkey_authenticator import SoftAuthenticator

ORIGIN = "http://localhost:8000"


@pytest.fixture(autouse=True)
def _relying_party(settings: Any) -> None:
    settings.WEBAUTHN_RP_ID = "localhost"
    settings.WEBAUTHN_ORIGIN = ORIGIN


@pytest.fixture
def rita(rita: Client) -> Client:
    """Rita's browser at the origin passkeys belong to (the pages say where to go otherwise)."""
    rita.defaults["HTTP_HOST"] = "localhost:8000"
    return rita


@pytest.fixture
def soft() -> SoftAuthenticator:
    return SoftAuthenticator(rp_id="localhost", origin=ORIGIN)


def url(review: Review) -> str:
    return f"/reviews/{review.pk}/"


def csrf(client: Client) -> dict[str, str]:
    html = client.get("/reviews/passkeys/").content.decode()
    return {"X-CSRFToken": forms_on(html)[0]["fields"]["csrfmiddlewaretoken"]}


def register(client: Client, soft: SoftAuthenticator, name: str = "work laptop") -> Any:
    headers = csrf(client)
    options = client.post("/reviews/passkeys/options", headers=headers)
    assert options.status_code == 200, options.content
    return client.post("/reviews/passkeys/register",
                       {"name": name, "credential": json.dumps(soft.create(options.json()))},
                       headers=headers)


def signed_press(client: Client, review: Review, button: str, soft: SoftAuthenticator, *,
                 feedback: str | None = None, html: str | None = None,
                 signs: str | None = None) -> Any:
    """Press `button` as static/passkeys.js does: ask for the decision's challenge, let the
    authenticator sign it, post the form with the assertion. `signs`: the decision the
    challenge is asked for, when not the button's own."""
    page = html or client.get(url(review)).content.decode()
    form = decision_form(page, button)
    fields = dict(form["fields"])
    name, value = form["submits"][form["buttons"].index(button)]
    fields[name] = value
    if feedback is not None:
        fields["feedback"] = feedback
    options = client.post(f"/reviews/{review.pk}/sign",
                          {"receipt": fields["receipt"], "decision": signs or value},
                          headers=csrf(client))
    assert options.status_code == 200, options.content
    fields["assertion"] = json.dumps(soft.get(options.json()))
    return client.post(form["action"], fields)


def require_signatures(project: Project) -> None:
    Project.objects.filter(pk=project.pk).update(require_signed_approvals=True)


def decision_event(review: Review) -> dict[str, Any]:
    review.refresh_from_db()
    return next(event.data for event in Event.objects.filter(session_id=review.session_id)
                if event.data.get("receipt") == review.decision_receipt)


def verified(review: Review, **keys: Any) -> Any:
    return verify_export(list(export_lines(review.session)), **keys)


# --- registering, naming, removing ------------------------------------------------------------


def test_issue_18_a_reviewer_registers_names_and_removes_a_passkey(
    rita: Client, soft: SoftAuthenticator
) -> None:
    page = rita.get("/reviews/passkeys/").content.decode()
    assert "You have no passkey yet" in page and "Add a passkey" in page
    response = register(rita, soft, "blue security key")
    assert response.status_code == 201, response.content
    passkey = Passkey.objects.get()
    assert passkey.name == "blue security key" and passkey.rp_id == "localhost"
    assert passkey.credential_id == b64url(soft.credential_id) and passkey.algorithm == -7
    assert "blue security key" in rita.get("/reviews/passkeys/").content.decode()
    (published,) = rita.get("/reviews/passkeys/reviewer-keys.json").json()
    assert published["spki"] == b64url(soft.spki) and published["username"] == "rita"
    assert list(load_reviewer_keys(json.dumps([published]))) == [passkey.credential_id]

    html = rita.get("/reviews/passkeys/").content.decode()
    (remove,) = [form for form in forms_on(html) if form["action"].endswith("/remove")]
    assert rita.post(remove["action"], remove["fields"]).status_code == 302
    assert "You have no passkey yet" in rita.get("/reviews/passkeys/").content.decode()
    assert Passkey.objects.get().removed_at is not None  # kept: its signatures stay checkable
    assert rita.get("/reviews/passkeys/reviewer-keys.json").json() == []


def test_issue_18_a_registration_is_refused_naming_the_field_and_stores_nothing(
    rita: Client, soft: SoftAuthenticator
) -> None:
    unnamed = register(rita, soft, "   ")
    assert unnamed.status_code == 400
    assert unnamed.json()["details"] == [{"path": "name", "message": unnamed.json()["error"]}]
    unasked = rita.post("/reviews/passkeys/register",
                        {"name": "laptop", "credential": json.dumps(soft.create(
                            {"challenge": b64url(b"not issued by the server")}))},
                        headers=csrf(rita))
    assert unasked.status_code == 400 and "not started here" in unasked.json()["error"]
    headers = csrf(rita)
    options = rita.post("/reviews/passkeys/options", headers=headers).json()
    soft.user_verified = False
    unverified = rita.post("/reviews/passkeys/register",
                           {"name": "laptop", "credential": json.dumps(soft.create(options))},
                           headers=headers)
    assert unverified.status_code == 400 and "does not verify" in unverified.json()["error"]
    assert not Passkey.objects.exists()


def test_issue_18_another_users_passkey_cannot_be_removed(
    rita: Client, soft: SoftAuthenticator, review_project: Project
) -> None:
    assert register(rita, soft).status_code == 201
    user = get_user_model().objects.create_user("ruth", password="ruth-password-1")
    Membership.objects.create(user=user, project=review_project, role=Role.REVIEWER)
    ruth = reviewer_client("ruth", "ruth-password-1")
    passkey = Passkey.objects.get()
    response = ruth.post(f"/reviews/passkeys/{passkey.pk}/remove", headers=csrf(ruth))
    assert response.status_code == 404
    assert Passkey.objects.get().removed_at is None


# --- the project setting ----------------------------------------------------------------------


def test_issue_18_an_unsigned_approval_is_refused_when_the_project_requires_signatures(
    rita: Client, agent: AgentClient, workspace: Path, review_project: Project
) -> None:
    require_signatures(review_project)
    _, review = propose(agent, workspace)
    page = rita.get(url(review)).content.decode()
    assert "This project requires signed approvals." in page and "Add a passkey" in page
    response = press(rita, url(review), "Approve", html=page)
    assert response.status_code == 409
    refused = response.content.decode()
    assert "Nothing was approved." in refused
    assert "requires every approval to be signed with your own passkey" in refused
    assert Review.objects.get(pk=review.pk).status == Status.PENDING
    # Requesting a revision needs no passkey, with or without JavaScript.
    asked = press(rita, url(review), "Request revision", feedback="Name pipx too.")
    assert asked.status_code == 302
    assert Review.objects.get(pk=review.pk).status == Status.REVISION_REQUESTED


def test_issue_18_without_the_setting_unsigned_approvals_work_as_before(
    rita: Client, agent: AgentClient, workspace: Path
) -> None:
    _, review = propose(agent, workspace)
    page = rita.get(url(review)).content.decode()
    assert "data-sign-url" not in page and "requires signed approvals" not in page
    assert press(rita, url(review), "Approve", html=page).status_code == 302
    data = decision_event(review)
    assert data["decision"] == "approved" and "signatures" not in data
    report = verified(review)
    assert report.ok and [str(d).endswith("unsigned (only the server vouches for it)")
                          for d in report.decisions] == [True]


# --- signed decisions -------------------------------------------------------------------------


def test_issue_18_a_signed_approval_keeps_the_assertion_and_the_event_carries_its_digest(
    rita: Client, agent: AgentClient, workspace: Path, review_project: Project,
    soft: SoftAuthenticator
) -> None:
    require_signatures(review_project)
    assert register(rita, soft).status_code == 201
    _, review = propose(agent, workspace)
    page = rita.get(url(review)).content.decode()
    assert "data-sign-url" in page and "Your decision is signed with your passkey" in page
    response = signed_press(rita, review, "Approve", soft, html=page)
    assert response.status_code == 302, response.content
    stored = DecisionSignature.objects.get()
    (entry,) = decision_event(review)["signatures"]
    assert entry == {"userId": stored.user_id, "credentialId": b64url(soft.credential_id),
                     "nonce": stored.nonce, "assertion": stored.digest}
    assert stored.digest == assertion_digest({
        "credentialId": entry["credentialId"], "authenticatorData": stored.authenticator_data,
        "clientDataJSON": stored.client_data_json, "signature": stored.signature})
    assert Passkey.objects.get().sign_count == 1
    published = rita.get("/reviews/passkeys/reviewer-keys.json").content
    report = verified(review, reviewer_keys=load_reviewer_keys(published))
    assert report.ok, report.summary()
    (decision,) = report.decisions
    assert str(decision).endswith(f"by user {entry['userId']} (rita), signed with their passkey")


def test_issue_18_a_revision_request_and_a_rejection_are_signed_too(
    rita: Client, agent: AgentClient, workspace: Path, soft: SoftAuthenticator
) -> None:
    assert register(rita, soft).status_code == 201
    _, review = propose(agent, workspace)
    assert signed_press(rita, review, "Request revision", soft,
                        feedback="Name pipx too.").status_code == 302
    _, second = propose(agent, workspace)
    asked = press(rita, url(second), "Reject", feedback="Wrong repository.")
    assert asked.status_code == 200 and "Confirm rejection" in asked.content.decode()
    assert signed_press(rita, second, "Confirm rejection", soft, feedback="Wrong repository.",
                        html=asked.content.decode()).status_code == 302
    for decided, decision in ((review, "revision-requested"), (second, "rejected")):
        data = decision_event(decided)
        assert data["decision"] == decision and len(data["signatures"]) == 1
        report = verified(decided)
        assert report.ok, report.summary()
        assert f"intent {decision} " in str(report.decisions[0])


def test_issue_18_two_required_approvals_carry_both_signatures(
    rita: Client, agent: AgentClient, workspace: Path, review_project: Project,
    soft: SoftAuthenticator
) -> None:
    Project.objects.filter(pk=review_project.pk).update(required_approvals=2,
                                                        require_signed_approvals=True)
    user = get_user_model().objects.create_user("ruth", password="ruth-password-1")
    Membership.objects.create(user=user, project=review_project, role=Role.REVIEWER)
    ruth = reviewer_client("ruth", "ruth-password-1")
    ruths = SoftAuthenticator(rp_id="localhost", origin=ORIGIN)
    assert register(rita, soft).status_code == 201
    assert register(ruth, ruths).status_code == 201
    _, review = propose(agent, workspace)
    assert signed_press(rita, review, "Approve", soft).status_code == 302
    assert Review.objects.get(pk=review.pk).status == Status.PENDING
    assert signed_press(ruth, review, "Approve", ruths).status_code == 302
    data = decision_event(review)
    assert sorted(entry["userId"] for entry in data["signatures"]) == sorted(
        data["decidedBy"]["userIds"])
    report = verified(review)
    assert report.ok, report.summary()
    assert [str(d).endswith("signed with their passkey") for d in report.decisions] == [True] * 2


# --- refused signatures -----------------------------------------------------------------------


def test_issue_18_an_assertion_without_user_verification_is_refused(
    rita: Client, agent: AgentClient, workspace: Path, soft: SoftAuthenticator
) -> None:
    assert register(rita, soft).status_code == 201
    _, review = propose(agent, workspace)
    soft.user_verified = False
    response = signed_press(rita, review, "Approve", soft)
    assert response.status_code == 400
    page = response.content.decode()
    assert "Nothing was decided." in page and "did not verify you" in page
    assert Review.objects.get(pk=review.pk).status == Status.PENDING
    assert not DecisionSignature.objects.exists()


def test_issue_18_a_signature_counter_that_went_backwards_is_refused(
    rita: Client, agent: AgentClient, workspace: Path, soft: SoftAuthenticator
) -> None:
    assert register(rita, soft).status_code == 201
    _, review = propose(agent, workspace)
    assert signed_press(rita, review, "Approve", soft).status_code == 302
    evidence = Review.objects.get(session_id=review.session_id, stage=Stage.EVIDENCE)
    soft.sign_count = 0  # a clone of the authenticator, made before the first signature
    response = signed_press(rita, evidence, "Approve", soft)
    assert response.status_code == 400
    page = response.content.decode()
    assert "signature counter went backwards" in page and "cloned" in page
    assert Review.objects.get(pk=evidence.pk).status == Status.PENDING
    assert Passkey.objects.get().sign_count == 1


def test_issue_18_a_signature_of_another_decision_or_a_used_nonce_is_refused(
    rita: Client, agent: AgentClient, workspace: Path, soft: SoftAuthenticator
) -> None:
    assert register(rita, soft).status_code == 201
    _, review = propose(agent, workspace)
    # Signed as a revision request, posted as an approval.
    response = signed_press(rita, review, "Approve", soft, signs="revision-requested")
    assert response.status_code == 400
    assert "not requested for this decision" in response.content.decode()
    # A valid signature posted twice: the second finds its nonce used.
    page = rita.get(url(review)).content.decode()
    form = decision_form(page, "Approve")
    fields = {**form["fields"], "decision": "approved"}
    options = rita.post(f"/reviews/{review.pk}/sign",
                        {"receipt": fields["receipt"], "decision": "approved"},
                        headers=csrf(rita)).json()
    fields["assertion"] = json.dumps(soft.get(options))
    assert rita.post(form["action"], fields).status_code == 302
    again = rita.post(form["action"], fields)
    assert again.status_code in (400, 409)
    assert DecisionSignature.objects.count() == 1


# --- operators ---------------------------------------------------------------------------------


def test_issue_18_operators_see_in_the_admin_which_reviewers_have_a_passkey(
    rita: Client, soft: SoftAuthenticator, review_project: Project
) -> None:
    user = get_user_model().objects.create_user("ruth", password="ruth-password-1")
    Membership.objects.create(user=user, project=review_project, role=Role.REVIEWER)
    assert register(rita, soft, "blue security key").status_code == 201
    root = get_user_model().objects.create_superuser("root", "root@example.com", "root-pass-1")
    operator = Client()
    operator.force_login(root)
    project_page = operator.get(f"/admin/governor/project/{review_project.pk}/change/")
    html = project_page.content.decode()
    assert "blue security key" in html and "none (cannot sign)" in html
    listing = operator.get("/admin/reviews/passkey/").content.decode()
    assert "blue security key" in listing and "rita" in listing
    assert operator.get("/admin/reviews/passkey/add/").status_code == 403


def test_issue_18_a_carried_approval_is_never_automatic_when_signatures_are_required(
    rita: Client, agent: AgentClient, workspace: Path, review_project: Project,
    soft: SoftAuthenticator
) -> None:
    """rules §13: re-approving an unchanged intent in one step still needs its signature."""
    require_signatures(review_project)
    assert register(rita, soft).status_code == 201
    session_id, first = propose(agent, workspace)
    assert signed_press(rita, first, "Approve", soft).status_code == 302
    evidence = Review.objects.get(session_id=session_id, stage=Stage.EVIDENCE)
    assert signed_press(rita, evidence, "Request revision", soft,
                        feedback="Name pipx too.").status_code == 302
    again = agent.post(f"/sessions/{session_id}/contracts", contract_body(checks=3))
    assert again.status_code == 202, again.content
    second = Review.objects.get(pk=again.json()["review"]["id"])
    html = rita.get(url(second)).content.decode()
    assert "Approve again" in html
    unsigned = press(rita, url(second), "Approve again", html=html)
    assert unsigned.status_code == 409
    assert "requires every approval to be signed" in unsigned.content.decode()
    assert Review.objects.get(pk=second.pk).status == Status.PENDING
    assert signed_press(rita, second, "Approve again", soft).status_code == 302
    data = decision_event(second)
    first.refresh_from_db()
    assert data["carriedFrom"] == [first.decision_receipt] and len(data["signatures"]) == 1
    assert verified(second).ok


def test_issue_18_the_project_command_requires_signed_approvals(review_project: Project) -> None:
    call_command("governor_project", "set", review_project.slug, "--signed-approvals",
                 "required", stdout=StringIO())
    assert Project.objects.get(pk=review_project.pk).require_signed_approvals is True
    call_command("governor_project", "set", review_project.slug, "--signed-approvals", "off",
                 stdout=StringIO())
    assert Project.objects.get(pk=review_project.pk).require_signed_approvals is False

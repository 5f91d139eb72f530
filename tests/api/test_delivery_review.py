"""The delivery stage (issue 28 item 2): where the project asks for it, a contract whose checks
all pass is not certified until a person approved the delivered change. The approval is bound to
the receipt of exactly what was shown (the passing attempt, its tree and the changes from the
start tree); a revision request puts the contract back to active while budget remains; a
rejection ends it exhausted; the agent may stop meanwhile but claims nothing."""

from __future__ import annotations

import base64
import json
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.utils import timezone

from governor.domain.review import proposal_receipt
from governor.models import AgentToken, Attestation, Event, Project
from governor.services.reviews import StaleReceipt, review_decide
from governor.verify import verify_export
from reviews.models import Review
from tests.api.test_contracts import readme_contract
from tests.api.test_export_and_verify import export_text
from tests.conftest import AgentClient


@pytest.fixture
def delivery(project: Project) -> Project:
    project.delivery_review = "required"
    project.save(update_fields=["delivery_review"])
    return project


def begin_and_pass(agent: AgentClient, session: dict, workspace: Path) -> dict[str, Any]:
    """Begin the README contract (review off), do the work, and stop: every check passes."""
    response = agent.post(f"/sessions/{session['id']}/contracts", readme_contract())
    assert response.status_code == 201, response.content
    (workspace / "README.md").write_text("# Demo\n\n## Install\n")
    return agent.post(f"/sessions/{session['id']}/turn-stop").json()


def state(agent: AgentClient, session: dict) -> str:
    return agent.get(f"/sessions/{session['id']}").json()["state"]


def test_passing_checks_open_a_delivery_review_and_certify_nothing(
        delivery: Project, agent: AgentClient, session: dict, workspace: Path) -> None:
    answer = begin_and_pass(agent, session, workspace)
    assert answer["action"] == "allow"  # it may stop, but must not claim completion
    assert "not certified yet" in answer["message"] and "/reviews/" in answer["message"]
    assert answer["attempt"]["passed"] is True
    assert state(agent, session) == "delivery-pending"
    review = Review.objects.get(stage="delivery")
    assert review.proposal["attemptReceipt"] == answer["attempt"]["receipt"]
    assert review.proposal["changes"] == [{"path": "README.md", "kind": "added"}]
    assert review.proposal["startTree"]["id"] != review.proposal["tree"]["id"]
    assert not Event.objects.filter(session_id=session["id"], type="reliability/terminal")
    # Another stop, or an explicit verify, records no second attempt while a person reviews.
    again = agent.post(f"/sessions/{session['id']}/turn-stop").json()
    assert again["action"] == "allow" and "not certified yet" in again["message"]
    verify = agent.post(f"/sessions/{session['id']}/verify").json()
    assert verify["decision"] == "delivery-pending"
    assert Event.objects.filter(session_id=session["id"], type="reliability/attempt").count() == 1


def test_approving_the_delivery_certifies_with_the_passing_attempts_evidence(
        delivery: Project, agent: AgentClient, session: dict, workspace: Path,
        reviewer: Any) -> None:
    answer = begin_and_pass(agent, session, workspace)
    review = Review.objects.get(stage="delivery")
    review_decide(user=reviewer, review=review, receipt=review.receipt, decision="approved")
    status = agent.get(f"/sessions/{session['id']}").json()
    assert status["state"] == "certified"
    assert status["terminal"]["tree"] == answer["attempt"]["tree"]  # the passing attempt's
    assert "a person approved the delivered change" in status["terminal"]["reason"]
    decision = Event.objects.get(session_id=session["id"], type="reliability/delivery-review")
    assert decision.data["proposalReceipt"] == review.receipt
    report = verify_export(export_text(agent, session["id"]).splitlines())
    assert report.ok, report.failure  # the delivery decision's receipt recomputes offline


def test_a_stale_delivery_receipt_approves_nothing(
        delivery: Project, agent: AgentClient, session: dict, workspace: Path,
        reviewer: Any) -> None:
    begin_and_pass(agent, session, workspace)
    review = Review.objects.get(stage="delivery")
    with pytest.raises(StaleReceipt):
        review_decide(user=reviewer, review=review, receipt="sha256:" + "0" * 64,
                      decision="approved")
    assert state(agent, session) == "delivery-pending"


def test_a_revision_request_puts_the_contract_back_to_active(
        delivery: Project, agent: AgentClient, session: dict, workspace: Path,
        reviewer: Any) -> None:
    begin_and_pass(agent, session, workspace)
    review = Review.objects.get(stage="delivery")
    review_decide(user=reviewer, review=review, receipt=review.receipt,
                  decision="revision-requested", feedback="Name the package manager too")
    assert state(agent, session) == "active"
    feedback = agent.get(f"/sessions/{session['id']}/review").json()["review"]
    assert (feedback["stage"], feedback["feedback"]) == ("delivery", "Name the package manager too")
    (workspace / "README.md").write_text("# Demo\n\n## Install\n\npip install demo\n")
    agent.post(f"/sessions/{session['id']}/turn-stop")
    second = Review.objects.filter(stage="delivery", status="pending").get()
    assert second.proposal["attempt"] == 2  # the new delivery is the new passing attempt


def test_a_revision_with_the_budget_spent_ends_exhausted(
        delivery: Project, agent: AgentClient, session: dict, workspace: Path,
        reviewer: Any) -> None:
    response = agent.post(f"/sessions/{session['id']}/contracts", readme_contract(max_attempts=1))
    assert response.status_code == 201, response.content
    (workspace / "README.md").write_text("# Demo\n\n## Install\n")
    agent.post(f"/sessions/{session['id']}/turn-stop")
    review = Review.objects.get(stage="delivery")
    review_decide(user=reviewer, review=review, receipt=review.receipt,
                  decision="revision-requested", feedback="Not quite")
    terminal = agent.get(f"/sessions/{session['id']}").json()["terminal"]
    assert terminal["status"] == "exhausted"
    assert "repair budget of 1 attempts is spent" in terminal["reason"]


def test_a_rejected_delivery_ends_exhausted_and_its_reason_stays_out_of_the_log(
        delivery: Project, agent: AgentClient, session: dict, workspace: Path,
        reviewer: Any) -> None:
    begin_and_pass(agent, session, workspace)
    review = Review.objects.get(stage="delivery")
    review_decide(user=reviewer, review=review, receipt=review.receipt, decision="rejected",
                  feedback="This rewrites the README the user asked to keep — secret-77")
    status = agent.get(f"/sessions/{session['id']}").json()
    assert status["state"] == "exhausted"
    assert "rejected the delivered change" in status["terminal"]["reason"]
    assert all("secret-77" not in str(event.data) for event in Event.objects.all())


def test_an_expired_delivery_review_lets_the_agent_attempt_again(
        delivery: Project, agent: AgentClient, session: dict, workspace: Path) -> None:
    begin_and_pass(agent, session, workspace)
    Review.objects.update(expires_at=timezone.now())
    assert state(agent, session) == "active"
    agent.post(f"/sessions/{session['id']}/turn-stop")
    assert Review.objects.get(stage="delivery", status="expired")
    assert Review.objects.filter(stage="delivery", status="pending").count() == 1
    assert state(agent, session) == "delivery-pending"


def test_the_agent_cannot_withdraw_a_delivery_review_but_may_abstain(
        delivery: Project, agent: AgentClient, session: dict, workspace: Path,
        reviewer: Any) -> None:
    begin_and_pass(agent, session, workspace)
    refused = agent.delete(f"/sessions/{session['id']}/review")
    assert refused.status_code == 409
    assert "not the agent's to withdraw" in refused.json()["error"]["message"]
    abstained = agent.post(f"/sessions/{session['id']}/abstain", {"reason": "The user left"})
    assert abstained.json()["decision"] == "abstained"
    review = Review.objects.get(stage="delivery")
    assert review.status == "cancelled"
    with pytest.raises(StaleReceipt):  # nothing left to approve: the contract ended
        review_decide(user=reviewer, review=review, receipt=review.receipt, decision="approved")
    assert state(agent, session) == "abstained"


def test_without_delivery_review_passing_checks_certify_at_once(
        agent: AgentClient, session: dict, workspace: Path) -> None:
    answer = begin_and_pass(agent, session, workspace)
    assert answer["terminal"]["status"] == "certified"
    assert not Review.objects.filter(stage="delivery")


def test_an_operator_turns_delivery_review_on_with_governor_project(project: Project) -> None:
    from django.core.management import call_command

    call_command("governor_project", "set", project.slug, "--delivery-review", "required")
    assert Project.objects.get(pk=project.pk).delivery_review == "required"


def statement_of(envelope: dict[str, Any]) -> dict[str, Any]:
    return dict(json.loads(base64.b64decode(envelope["payload"])))


def test_rule_17_10_the_delivery_receipt_binds_exactly_what_the_certified_terminal_cites(
        delivery: Project, agent: AgentClient, session: dict, workspace: Path,
        reviewer: Any) -> None:
    begin_and_pass(agent, session, workspace)
    review = Review.objects.get(stage="delivery")
    proposal = review.proposal
    assert review.receipt == proposal_receipt("delivery", proposal)
    review_decide(user=reviewer, review=review, receipt=review.receipt, decision="approved")
    terminal = Event.objects.get(session_id=session["id"], type="reliability/terminal")
    assert terminal.data["status"] == "certified"
    statement = statement_of(Attestation.objects.get(event=terminal).envelope)
    cited = statement["predicate"]
    assert cited["attemptReceipt"] == proposal["attemptReceipt"]
    assert cited["contractReceipt"] == proposal["contractReceipt"]
    assert cited["profileReceipts"] == proposal["profileReceipts"]
    assert cited["runReceipts"] == proposal["runReceipts"]
    assert cited["changesDigest"] == proposal["changesDigest"] is not None
    assert cited["startTree"] == proposal["startTree"]["id"]
    assert {"gitTree": proposal["tree"]["id"].removeprefix("gittree:sha256:")} in [
        subject["digest"] for subject in statement["subject"]]
    decision = Event.objects.get(session_id=session["id"], type="reliability/delivery-review")
    assert decision.data["proposalReceipt"] == review.receipt  # which binds all of the above
    for name, other in (("runReceipts", ["sha256:" + "1" * 64]),
                        ("profileReceipts", ["sha256:" + "2" * 64]),
                        ("changesDigest", "sha256:" + "3" * 64)):
        assert proposal_receipt("delivery", {**proposal, name: other}) != review.receipt, name


def test_rule_17_10_evidence_changed_after_the_proposal_approves_nothing(
        delivery: Project, agent: AgentClient, session: dict, workspace: Path,
        reviewer: Any) -> None:
    """The evidence the terminal would cite is kept in the proposal, so it cannot change under
    the receipt a person approves: a stored proposal that no longer matches it is stale."""
    begin_and_pass(agent, session, workspace)
    review = Review.objects.get(stage="delivery")
    forged = {**review.proposal, "changesDigest": "sha256:" + "3" * 64}
    Review.objects.filter(pk=review.pk).update(proposal=forged)
    with pytest.raises(StaleReceipt):
        review_decide(user=reviewer, review=review, receipt=review.receipt, decision="approved")
    assert state(agent, session) == "delivery-pending"
    assert not Event.objects.filter(session_id=session["id"], type="reliability/terminal")


def test_rule_17_10_the_log_names_the_tokens_that_began_the_contract_and_made_its_attempts(
        delivery: Project, agent: AgentClient, session: dict, workspace: Path) -> None:
    begin_and_pass(agent, session, workspace)
    token = AgentToken.objects.get(name="agent")
    contract = Event.objects.get(session_id=session["id"], type="reliability/contract")
    attempt = Event.objects.get(session_id=session["id"], type="reliability/attempt")
    assert contract.data["begunBy"] == attempt.data["madeBy"] == {"id": token.pk, "name": "agent"}
    review = Review.objects.get(stage="delivery")
    assert review.proposal["tokens"] == [
        {"token": {"id": token.pk, "name": "agent"}, "did": "began the contract"},
        {"token": {"id": token.pk, "name": "agent"}, "did": "made attempt 1"}]
    report = verify_export(export_text(agent, session["id"]).splitlines())
    assert report.ok, report.failure  # the receipts that cover them recompute offline


def test_rule_17_10_a_delivery_pending_from_before_gets_its_evidence_and_expires(
        delivery: Project, agent: AgentClient, session: dict, workspace: Path,
        reviewer: Any) -> None:
    """The upgrade (reviews 0008): a pending delivery review whose proposal neither binds the
    evidence nor names the tokens — as they were made before — is not approved by anyone; it
    expires, and the contract is active again."""
    begin_and_pass(agent, session, workspace)
    review = Review.objects.get(stage="delivery")
    new = review.proposal
    legacy = {key: value for key, value in new.items()
              if key not in ("profileReceipts", "runReceipts", "changesDigest", "tokens")}
    evidence = {"attempt_receipt": new["attemptReceipt"], "tree": new["tree"],
                "profile_receipts": new["profileReceipts"], "run_receipts": new["runReceipts"],
                "changes_digest": new["changesDigest"]}
    Review.objects.filter(pk=review.pk).update(
        proposal=legacy, receipt=proposal_receipt("delivery", legacy),
        plan={**review.plan, "evidence": evidence})
    import_module("reviews.migrations.0008_delivery_proposals_bind_evidence"
                  ).bind_pending_deliveries(apps, None)
    review.refresh_from_db()
    assert {key: review.proposal[key] for key in new} == {**new, "tokens": []}
    assert review.receipt == proposal_receipt("delivery", review.proposal)
    with pytest.raises(StaleReceipt):  # expired: nothing approved
        review_decide(user=reviewer, review=review, receipt=review.receipt, decision="approved")
    assert Review.objects.get(pk=review.pk).status == "expired"
    assert state(agent, session) == "active"

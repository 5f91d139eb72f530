"""The revision loop of a delivered change, end to end (issue 40 item 1 and 7; rules §6.7 and
§7.4): after a person's revision request, a stop on the tree they reviewed is no new attempt but
a steer that quotes their comment and every line comment; the review route names the request the
agent must answer; every answer says how many attempts remain and warns before the last; a
decision that ends the contract reaches the agent at its next stop and on the long poll, with
the terminal receipt; a decision or a comment on a decided review changes nothing and says
why."""

from __future__ import annotations

from datetime import timedelta
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.utils import timezone

from governor.lib.errors import Conflict
from governor.models import Event, Project
from governor.services.reviews import StaleReceipt, review_comment_add, review_decide
from reviews.models import LineComment, Review
from tests.api.test_contracts import readme_contract
from tests.api.test_turn_stop_reads import assert_read_once, turn_stop
from tests.conftest import AgentClient

pytestmark = pytest.mark.django_db

FEEDBACK = "Say which Python version it needs.\nAnd keep the heading short."


@pytest.fixture
def delivery(project: Project) -> Project:
    project.delivery_review = "required"
    project.save(update_fields=["delivery_review"])
    return project


def begin(agent: AgentClient, session: dict[str, Any], max_attempts: int = 3) -> None:
    response = agent.post(f"/sessions/{session['id']}/contracts",
                          readme_contract(max_attempts=max_attempts))
    assert response.status_code == 201, response.content


def stop(agent: AgentClient, session: dict[str, Any]) -> dict[str, Any]:
    response = agent.post(f"/sessions/{session['id']}/turn-stop")
    assert response.status_code == 200, response.content
    return dict(response.json())


def deliver(agent: AgentClient, session: dict[str, Any], workspace: Path,
            text: str = "# Demo\n\n## Install\n\npip install demo\n") -> Review:
    (workspace / "README.md").write_text(text)
    answer = stop(agent, session)
    assert answer["action"] == "allow" and "not certified yet" in answer["message"], answer
    return Review.objects.get(stage="delivery", status="pending")


def request_revision(reviewer: Any, review: Review, *, comments: bool = True) -> None:
    if comments:
        review_comment_add(user=reviewer, review=review, path="README.md", spot="n3",
                           body="Which Python?")
        review_comment_add(user=reviewer, review=review, path="README.md", spot="n5",
                           body="Pin the version:\npip install demo==1.0")
    review_decide(user=reviewer, review=review, receipt=review.receipt,
                  decision="revision-requested", feedback=FEEDBACK)


def attempts(session: dict[str, Any]) -> int:
    return Event.objects.filter(session_id=session["id"], type="reliability/attempt").count()


def review_route(agent: AgentClient, session: dict[str, Any], query: str = "") -> dict[str, Any]:
    response = agent.get(f"/sessions/{session['id']}/review{query}")
    assert response.status_code == 200, response.content
    return dict(response.json())


def test_rule_6_7_issue_40_a_stop_on_the_tree_a_person_asked_to_change_makes_no_attempt(
        delivery: Project, agent: AgentClient, session: dict[str, Any], workspace: Path,
        reviewer: Any) -> None:
    begin(agent, session)
    review = deliver(agent, session, workspace)
    request_revision(reviewer, review)
    answer = stop(agent, session)  # nothing changed
    assert answer["action"] == "steer" and answer["attempt"] is None
    message = answer["message"]
    assert "A person reviewed your delivered change and asked for changes" in message
    assert "made no attempt and used none of the repair budget" in message
    assert "> Say which Python version it needs.\n> And keep the heading short." in message
    assert "- README.md:3: Which Python?" in message
    assert "- README.md:5: Pin the version:\n  pip install demo==1.0" in message
    assert "1 of 3 attempts used: 2 remain." in message
    assert f"/reviews/{review.pk}/" in message
    assert attempts(session) == 1  # no attempt spent
    assert Review.objects.filter(stage="delivery").count() == 1  # no new delivery review
    # Steered once: the next stop on the same tree is allowed, with the same request, and
    # still spends nothing — stopping can neither burn the budget nor loop.
    again = stop(agent, session)
    assert again["action"] == "allow" and again["message"] == message
    verify = agent.post(f"/sessions/{session['id']}/verify").json()
    assert verify["decision"] == "revision-requested" and verify["attempt"] is None
    assert "- README.md:3: Which Python?" in verify["message"]
    assert attempts(session) == 1
    assert agent.get(f"/sessions/{session['id']}").json()["state"] == "active"


def test_rule_6_7_issue_40_a_changed_tree_is_an_attempt_and_its_delivery_answers_the_request(
        delivery: Project, agent: AgentClient, session: dict[str, Any], workspace: Path,
        reviewer: Any) -> None:
    begin(agent, session)
    first = deliver(agent, session, workspace)
    request_revision(reviewer, first)
    second = deliver(agent, session, workspace,
                     "# Demo\n\nNeeds Python 3.11.\n\n## Install\n\npip install demo==1.0\n")
    assert second.proposal["attempt"] == 2 and attempts(session) == 2
    # The route shows the new pending review, and beside it the request it answers.
    answer = review_route(agent, session)
    assert answer["review"]["id"] == str(second.pk) and answer["review"]["status"] == "pending"
    request = answer["revision_request"]
    assert request["id"] == str(first.pk) and request["feedback"] == FEEDBACK
    assert [(c["path"], c["line"], c["body"]) for c in request["comments"]] == [
        ("README.md", 3, "Which Python?"), ("README.md", 5, "Pin the version:\npip install "
                                                         "demo==1.0")]
    assert answer["message"] is None  # nothing to do but wait for the person


def test_issue_40_the_review_route_returns_the_request_to_answer_with_what_to_do(
        delivery: Project, agent: AgentClient, session: dict[str, Any], workspace: Path,
        reviewer: Any) -> None:
    begin(agent, session)
    review = deliver(agent, session, workspace)
    request_revision(reviewer, review)
    answer = review_route(agent, session, "?wait=1")  # the long poll: decided, so at once
    assert answer["review"]["status"] == "revision-requested"
    assert answer["review"]["feedback"] == FEEDBACK and len(answer["review"]["comments"]) == 2
    assert answer["revision_request"]["id"] == answer["review"]["id"]
    assert "- README.md:3: Which Python?" in answer["message"]
    assert "1 of 3 attempts used: 2 remain." in answer["message"]
    assert answer["terminal"] is None


def test_rule_7_issue_40_answers_count_the_attempts_left_and_warn_before_the_last(
        delivery: Project, agent: AgentClient, session: dict[str, Any], workspace: Path,
        reviewer: Any) -> None:
    begin(agent, session, max_attempts=2)
    failed = stop(agent, session)  # README.md does not exist yet: attempt 1 fails
    assert "1 of 2 attempts used: 1 remains, and it is the last — if it fails, or a person " \
           "asks for changes to what it delivers, the contract ends exhausted." \
           in failed["message"]
    review = deliver(agent, session, workspace)  # attempt 2 of 2 passes
    pending = stop(agent, session)
    assert "This was your last attempt (2 of 2): if the person asks for changes, the " \
           "contract ends exhausted." in pending["message"]
    request_revision(reviewer, review, comments=False)
    ended = stop(agent, session)
    assert ended["action"] == "steer" and ended["terminal"]["status"] == "exhausted"
    assert ended["message"].startswith(
        "The completion contract is exhausted: a person asked for changes to the delivered "
        "change, and the repair budget of 2 attempts is spent.")
    assert "> Say which Python version it needs." in ended["message"]
    assert f"Cite the terminal receipt {ended['terminal']['receipt']}." in ended["message"]
    assert stop(agent, session) == {"action": "allow", "message": ""}  # told once


def test_rule_7_issue_40_with_two_attempts_left_the_delivery_says_so(
        delivery: Project, agent: AgentClient, session: dict[str, Any], workspace: Path) -> None:
    begin(agent, session)
    (workspace / "README.md").write_text("# Demo\n\n## Install\n")
    assert "If the person asks for changes, 2 of 3 attempts remain." \
        in stop(agent, session)["message"]


def test_rule_7_4_issue_40_an_approval_reaches_the_agent_certified_with_the_receipt(
        delivery: Project, agent: AgentClient, session: dict[str, Any], workspace: Path,
        reviewer: Any) -> None:
    begin(agent, session)
    review = deliver(agent, session, workspace)
    review_decide(user=reviewer, review=review, receipt=review.receipt, decision="approved",
                  feedback="Nice and short.")
    polled = review_route(agent, session, "?wait=1")  # the long poll's answer
    terminal = polled["terminal"]
    assert polled["review"]["status"] == "approved" and terminal["status"] == "certified"
    assert f"cite the terminal receipt {terminal['receipt']}" in polled["message"]
    assert polled["message"].startswith("A person reviewed the delivered change and approved it.")
    answer = stop(agent, session)
    assert answer["action"] == "steer" and answer["terminal"] == terminal
    assert answer["message"] == polled["message"] and "> Nice and short." in answer["message"]
    assert stop(agent, session) == {"action": "allow", "message": ""}  # steered once


def test_rule_7_4_issue_40_a_rejection_reaches_the_agent_exhausted_with_the_reason(
        delivery: Project, agent: AgentClient, session: dict[str, Any], workspace: Path,
        reviewer: Any) -> None:
    begin(agent, session)
    review = deliver(agent, session, workspace)
    review_decide(user=reviewer, review=review, receipt=review.receipt, decision="rejected",
                  feedback="The user asked to keep the README as it was.")
    answer = stop(agent, session)
    assert answer["action"] == "steer" and answer["terminal"]["status"] == "exhausted"
    assert "exhausted: a person rejected the delivered change" in answer["message"]
    assert "> The user asked to keep the README as it was." in answer["message"]
    assert stop(agent, session)["action"] == "allow"
    # A verify after it gives the same terminal in the same words, never "the last allowed
    # attempt still failed" (every check passed).
    verify = agent.post(f"/sessions/{session['id']}/verify").json()
    assert verify["decision"] == "exhausted" and verify["message"] == answer["message"]


def test_issue_40_a_revision_request_on_a_decided_review_changes_nothing_and_says_why(
        delivery: Project, agent: AgentClient, session: dict[str, Any], workspace: Path,
        reviewer: Any) -> None:
    begin(agent, session)
    review = deliver(agent, session, workspace)
    review_decide(user=reviewer, review=review, receipt=review.receipt, decision="approved")
    events = Event.objects.filter(session_id=session["id"]).count()
    with pytest.raises(StaleReceipt, match="this proposal was already approved, so it is not "
                                           "the session's current pending proposal and a "
                                           "revision request changes nothing; nothing was "
                                           "recorded"):
        review_decide(user=reviewer, review=review, receipt=review.receipt,
                      decision="revision-requested", feedback="Wait, one more thing")
    with pytest.raises(Conflict, match="it was already approved — so a comment would reach "
                                       "nobody: nothing was added"):
        review_comment_add(user=reviewer, review=review, path="README.md", spot="n1",
                           body="late")
    assert Event.objects.filter(session_id=session["id"]).count() == events
    assert not LineComment.objects.exists()
    review.refresh_from_db()
    assert review.status == "approved" and review.feedback == ""
    assert agent.get(f"/sessions/{session['id']}").json()["state"] == "certified"


def test_issue_40_the_review_route_reads_nothing_new_for_the_intent_stages(
        project: Project, agent: AgentClient, session: dict[str, Any]) -> None:
    answer = review_route(agent, session)
    assert answer == {"review": None, "revision_request": None, "terminal": None,
                      "message": None}


def test_issue_40_the_stops_of_the_revision_loop_read_the_state_and_the_reviews_once(
        delivery: Project, agent: AgentClient, session: dict[str, Any], workspace: Path,
        reviewer: Any) -> None:
    begin(agent, session)
    review = deliver(agent, session, workspace)
    request_revision(reviewer, review)
    answer, tables = turn_stop(agent, session)  # on the tree the person reviewed
    assert answer["action"] == "steer" and answer["attempt"] is None
    assert_read_once(tables)
    second = deliver(agent, session, workspace, "# Demo\n\n## Install\n\npip install demo==1\n")
    review_decide(user=reviewer, review=second, receipt=second.receipt, decision="approved")
    answer, tables = turn_stop(agent, session)  # told of the approval
    assert answer["terminal"]["status"] == "certified"
    assert_read_once(tables)


def test_security_issue_40_an_abstain_citing_a_revision_request_is_not_told_as_its_decision(
        delivery: Project, agent: AgentClient, session: dict[str, Any], workspace: Path,
        reviewer: Any) -> None:
    """Attack: the agent reads the revision request's decision receipt on its review route and
    abstains with a reason that names it. The terminal is its own abstain: it must not be told
    (to the agent, or on the review route) as the person's decision having spent the budget."""
    begin(agent, session)
    review = deliver(agent, session, workspace)
    request_revision(reviewer, review, comments=False)
    receipt = review_route(agent, session)["review"]["decision_receipt"]
    abstained = agent.post(f"/sessions/{session['id']}/abstain",
                           {"reason": f"I give up (decision {receipt})."}).json()
    assert abstained["terminal"]["status"] == "abstained"
    route = review_route(agent, session)
    assert route["terminal"] is None and route["message"] is None
    answer = stop(agent, session)
    assert answer["action"] == "allow" and "exhausted" not in answer["message"]
    verify = agent.post(f"/sessions/{session['id']}/verify").json()
    assert verify["decision"] == "abstained" and "exhausted" not in verify["message"]


def test_rule_7_4_issue_40_a_delivery_expiring_with_the_budget_spent_steers_the_stop_that_finds_it(
        delivery: Project, agent: AgentClient, session: dict[str, Any], workspace: Path) -> None:
    """The review's time passed with nobody deciding, and nothing recorded it before the agent
    stopped: the stop records the expiry, which ends the contract exhausted (the budget is
    spent), and must tell the agent so then — not allow with an empty message and tell it at a
    stop that may never come."""
    begin(agent, session, max_attempts=1)
    review = deliver(agent, session, workspace)
    Review.objects.filter(pk=review.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    answer = stop(agent, session)
    assert answer["action"] == "steer" and answer["terminal"]["status"] == "exhausted"
    assert answer["message"].startswith(
        "The completion contract is exhausted: the delivery review expired undecided, and the "
        "repair budget of 1 attempts is spent.")
    assert f"Cite the terminal receipt {answer['terminal']['receipt']}." in answer["message"]
    assert stop(agent, session) == {"action": "allow", "message": ""}  # told once


def test_rule_6_7_issue_40_a_last_delivery_expired_reads_exhausted_on_the_review_route(
        delivery: Project, agent: AgentClient, session: dict[str, Any], workspace: Path,
        reviewer: Any) -> None:
    """The last attempt's delivery expired undecided (its time passed; nothing recorded it yet)
    after an earlier revision request: the review route must answer the terminal the expiry
    writes, not the earlier request with "the contract is active again"."""
    begin(agent, session, max_attempts=2)
    first = deliver(agent, session, workspace)
    request_revision(reviewer, first, comments=False)
    second = deliver(agent, session, workspace, "# Demo\n\n## Install\n\npip install demo==1\n")
    Review.objects.filter(pk=second.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    for query in ("", "?wait=1"):
        answer = review_route(agent, session, query)
        assert answer["review"]["id"] == str(second.pk)
        assert answer["review"]["status"] == "expired"
        assert answer["terminal"] is not None and answer["terminal"]["status"] == "exhausted", \
            answer["message"]
        assert answer["message"].startswith(
            "The completion contract is exhausted: the delivery review expired undecided")
        assert "active again" not in answer["message"]
    assert agent.get(f"/sessions/{session['id']}").json()["state"] == "exhausted"


def test_issue_40_decisions_made_before_the_upgrade_count_as_told(
        delivery: Project, agent: AgentClient, session: dict[str, Any], workspace: Path,
        reviewer: Any) -> None:
    """The upgrade (reviews 0009): a delivery decided before the agent could be told of it counts
    as told at its decision, so the agent's next stop is not steered with old news."""
    begin(agent, session)
    review = deliver(agent, session, workspace)
    review_decide(user=reviewer, review=review, receipt=review.receipt, decision="approved")
    Review.objects.filter(pk=review.pk).update(agent_told_at=None)  # as before the column
    import_module("reviews.migrations.0009_review_agent_told_at").decided_reviews_told(apps, None)
    review.refresh_from_db()
    assert review.agent_told_at == review.decided_at
    assert stop(agent, session) == {"action": "allow", "message": ""}

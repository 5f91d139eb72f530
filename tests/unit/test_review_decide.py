"""rules §6 and §13 as one pure rule: `governor.domain.review.decide`."""

from __future__ import annotations

from dataclasses import replace

import pytest

from governor.domain.review import (
    REFUSED_CARRIED,
    REFUSED_EXPIRED,
    REFUSED_OWN_AGENT,
    REFUSED_STALE,
    REFUSED_UNKNOWN,
    REFUSED_UNSIGNED,
    DecisionFacts,
    TokenPart,
    decide,
    took_part,
)

APPROVAL = DecisionFacts(decision="approved", status="pending", expired=False,
                         receipt_is_current=True, signed=False, signatures_required=False,
                         own_part=None, carried_is_theirs=None, approvals_before=0,
                         approved_before=False, required_approvals=1)


def test_rule_6_an_approval_of_the_current_receipt_decides_a_stage_of_one_approval() -> None:
    verdict = decide(APPROVAL)
    assert (verdict.decided, verdict.refused, verdict.approvals) == (True, None, 1)


def test_rule_6_n_approvals_need_n_distinct_reviewers() -> None:
    two = replace(APPROVAL, required_approvals=2)
    assert decide(two).decided is False and decide(two).refused is None
    assert decide(replace(two, approvals_before=1)).decided is True
    again = replace(two, approvals_before=0, approved_before=True)  # the same reviewer twice
    assert decide(again).decided is False


@pytest.mark.parametrize(("facts", "kind"), [
    (replace(APPROVAL, receipt_is_current=False), REFUSED_STALE),
    (replace(APPROVAL, status="approved"), REFUSED_STALE),
    (replace(APPROVAL, status="cancelled"), REFUSED_STALE),
    (replace(APPROVAL, expired=True), REFUSED_EXPIRED),
    (replace(APPROVAL, status="expired"), REFUSED_EXPIRED),
    (replace(APPROVAL, signatures_required=True), REFUSED_UNSIGNED),
    (replace(APPROVAL, own_part="your agent token 'a' began the contract"), REFUSED_OWN_AGENT),
    (replace(APPROVAL, own_part="your agent token 'a' created the session"), REFUSED_OWN_AGENT),
    (replace(APPROVAL, carried_is_theirs=False), REFUSED_CARRIED),
    (replace(APPROVAL, decision="maybe"), REFUSED_UNKNOWN),
])
def test_rule_6_a_refused_decision_decides_nothing_and_says_why(
        facts: DecisionFacts, kind: str) -> None:
    verdict = decide(facts)
    assert (verdict.decided, verdict.refused) == (False, kind)
    assert verdict.reason


def test_rule_6_a_revision_or_rejection_ends_the_stage_and_is_open_to_the_token_owner() -> None:
    for decision in ("revision-requested", "rejected"):
        facts = replace(APPROVAL, decision=decision,
                        own_part="your agent token 'a' began the contract",
                        signatures_required=True, required_approvals=3)
        assert decide(facts).decided is True
        assert decide(replace(facts, receipt_is_current=False)).refused == REFUSED_STALE


def test_rule_13_a_carried_approval_counts_once_when_it_is_the_reviewers_own() -> None:
    verdict = decide(replace(APPROVAL, carried_is_theirs=True, required_approvals=2))
    assert (verdict.decided, verdict.approvals) == (False, 1)


def part(token_id: int, name: str, did: str) -> TokenPart:
    return {"token": {"id": token_id, "name": name}, "did": did}


PARTS = [part(1, "ada's agent", "created the session"), part(2, "ci-bot", "began the contract"),
         part(3, "helper", "made attempt 1"), part(2, "ci-bot", "made attempt 2")]


def test_rule_17_10_took_part_names_each_owned_token_and_everything_it_did() -> None:
    assert took_part(PARTS, {2}) == ("your agent token 'ci-bot' began the contract and made "
                                     "attempt 2")
    assert took_part(PARTS, {3}) == "your agent token 'helper' made attempt 1"
    assert took_part(PARTS, {1, 3}) == ("your agent token 'ada's agent' created the session; "
                                        "your agent token 'helper' made attempt 1")
    assert took_part(PARTS, {4}) is None and took_part([], {1}) is None


def test_rule_17_10_the_refusal_says_which_token_took_part_and_how() -> None:
    words = took_part(PARTS, {2})
    verdict = decide(replace(APPROVAL, own_part=words))
    assert verdict.refused == REFUSED_OWN_AGENT
    assert verdict.reason == ("your agent token 'ci-bot' began the contract and made attempt 2, "
                              "so you may not approve this proposal: another reviewer must; "
                              "nothing was approved")

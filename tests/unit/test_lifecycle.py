"""rules §3 (the fold of governor events) and §7 (attempts, repair, terminals)."""

from __future__ import annotations

import copy
import json
from functools import reduce
from typing import Any

import pytest

from governor.domain.attempts import (
    abstain_reason,
    attempt_payload,
    decide_attempt,
    decide_delivery,
    terminal_payload,
    turn_stop_after_attempt,
    turn_stop_without_attempt,
)
from governor.domain.canonical import receipt
from governor.domain.contracts import ContractError, contract_document, validate_proposal
from governor.domain.lifecycle import (
    LifecycleError,
    apply,
    fold,
    initial_state,
    read_contract,
    state_name,
)
from governor.domain.messages import (
    IMPORTED,
    REVIEW_PENDING_ALLOW_MESSAGE,
    repair_message,
    terminal_message,
)


def current_contract_of(state: Any) -> dict[str, Any] | None:
    record = state["contract"]
    return read_contract(record["data"], record["seq"]) if record else None


PASS = {"id": "a", "kind": "file_exists", "passed": True, "evidence": "a exists."}
FAIL = {"id": "b", "kind": "file_contains", "passed": False, "evidence": "b does not contain 'x'."}
TREE = {"id": "gittree:sha256:" + "ab12" * 16, "exclusions": "sha256:" + "e" * 64}


def contract_data(contract_id: str = "ct-1", version: int = 3) -> dict[str, Any]:
    proposal = validate_proposal(
        {
            "objective": "o",
            "claims": [
                {
                    "id": "c",
                    "statement": "s",
                    "importance": "critical",
                    "verification": "deterministic",
                    "check_ids": ["a"],
                }
            ],
            "checks": [{"id": "a", "kind": "file_exists", "path": "a"}],
        },
        max_checks=20,
        max_attempts_cap=3,
    )
    return contract_document(proposal, contract_id=contract_id, version=version, started_at_seq=4)


def event(seq: int, kind: str, data: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"seq": seq, "type": f"reliability/{kind}", "origin": "governor", "data": data, **extra}


def attempt(
    seq: int, number: int, contract_id: str = "ct-1", results: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    payload = attempt_payload(
        contract_id=contract_id, attempt=number, trigger="manual", results=results or [FAIL],
        tree=TREE,
    )
    return event(seq, "attempt", payload)


def terminal(seq: int, status: str = "certified", contract_id: str = "ct-1") -> dict[str, Any]:
    return event(
        seq, "terminal", terminal_payload(contract_id=contract_id, status=status, reason="r")
    )


def agent(seq: int) -> dict[str, Any]:
    return {"seq": seq, "type": "turn/start", "origin": "agent", "data": {"turn": 1}}


# --- §3 fold ------------------------------------------------------------------------------


def test_rule_3_an_empty_log_is_idle() -> None:
    state = fold([])
    assert state == initial_state()
    assert state_name(state) == "idle"


def test_rule_3_a_contract_opens_and_its_attempts_accumulate() -> None:
    state = fold([agent(0), event(5, "contract", contract_data()), attempt(6, 1), attempt(7, 2)])
    assert state_name(state) == "active"
    assert state["open"] is True
    assert state["contract"] is not None and state["contract"]["seq"] == 5
    assert [a["data"]["attempt"] for a in state["attempts"]] == [1, 2]


@pytest.mark.parametrize("status", ["certified", "exhausted", "abstained"])
def test_rule_3_a_terminal_closes_the_contract(status: str) -> None:
    state = fold([event(5, "contract", contract_data()), terminal(6, status)])
    assert state["open"] is False
    assert state_name(state) == status


def test_rule_3_a_new_contract_replaces_the_current_one_and_clears_attempts_and_terminal() -> None:
    state = fold(
        [
            event(5, "contract", contract_data()),
            attempt(6, 1),
            terminal(7),
            event(8, "contract", contract_data("ct-2")),
        ]
    )
    assert current_contract_of(state) is not None
    assert current_contract_of(state)["contractId"] == "ct-2"  # type: ignore[index]
    assert state["attempts"] == [] and state["terminal"] is None
    assert state_name(state) == "active"


def test_rule_3_attempts_and_terminals_of_another_contract_do_not_count() -> None:
    state = fold(
        [
            event(5, "contract", contract_data()),
            attempt(6, 1, "ct-old"),
            terminal(7, contract_id="ct-old"),
        ]
    )
    assert state["attempts"] == [] and state["terminal"] is None
    assert state_name(state) == "active"


def test_rule_3_attempts_without_any_contract_do_not_count() -> None:
    assert fold([attempt(1, 1), terminal(2)]) == initial_state()


def test_rule_3_at_most_one_contract_without_a_terminal() -> None:
    with pytest.raises(LifecycleError, match="has no terminal"):
        fold([event(5, "contract", contract_data()), event(6, "contract", contract_data("ct-2"))])


def test_rule_7_terminal_is_written_at_most_once_per_contract() -> None:
    with pytest.raises(LifecycleError, match="second terminal"):
        fold([event(5, "contract", contract_data()), terminal(6), terminal(7, "abstained")])


def test_rule_7_no_attempt_after_the_terminal() -> None:
    with pytest.raises(LifecycleError, match="ended"):
        fold([event(5, "contract", contract_data()), terminal(6), attempt(7, 1)])


def test_rule_7_manual_and_turn_stop_attempts_share_one_counter() -> None:
    second = event(
        7,
        "attempt",
        attempt_payload(contract_id="ct-1", attempt=2, trigger="turn-stop", results=[FAIL],
                        tree=TREE),
    )
    state = fold([event(5, "contract", contract_data()), attempt(6, 1), second])
    assert [a["data"]["trigger"] for a in state["attempts"]] == ["manual", "turn-stop"]
    with pytest.raises(LifecycleError, match="expected 3"):
        apply(state, attempt(8, 2))


def test_rule_3_a_draft_or_review_replaces_the_latest_of_its_kind() -> None:
    log = [
        event(1, "contract-draft", {"receipt": "d1"}),
        event(2, "intent-review", {"r": 1}),
        event(3, "contract-draft", {"receipt": "d2"}),
        event(4, "contract-review", {"r": 2}),
        event(5, "intent-review", {"r": 3}),
    ]
    state = fold(log)
    assert state["latestDraft"] == {"seq": 3, "imported": False, "data": {"receipt": "d2"}}
    assert state["latestIntentReview"]["data"] == {"r": 3}  # type: ignore[index]
    assert state["latestContractReview"]["data"] == {"r": 2}  # type: ignore[index]


def test_rule_3_the_latest_verification_of_each_profile_is_kept() -> None:
    log = [
        event(1, "code-verification", {"profile": "tests", "passed": False}),
        event(2, "code-verification", {"profile": "lint", "passed": True}),
        event(3, "code-verification", {"profile": "tests", "passed": True}),
    ]
    latest = fold(log)["latestVerifications"]
    assert {profile: record["seq"] for profile, record in latest.items()} == {"tests": 3, "lint": 2}


def test_rule_3_imported_governor_events_are_folded_and_marked() -> None:
    state = fold([event(5, "contract", contract_data(), imported=True)])
    assert state["contract"] is not None and state["contract"]["imported"] is True
    assert state_name(state) == "active"


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_rule_3_contract_versions_1_to_5_are_readable(version: int) -> None:
    old = {
        "contractId": "old",
        "version": version,
        "startedAtSeq": 2,
        "checks": [{"id": "a", "kind": "file_exists", "path": "a"}],
    }
    state = fold([event(3, "contract", old, imported=True)])
    view = current_contract_of(state)
    assert view is not None
    assert (view["version"], view["maxAttempts"], view["claims"]) == (version, 3, [])


@pytest.mark.parametrize(
    "data",
    [
        {"contractId": "x", "version": 6, "startedAtSeq": 0, "checks": []},
        {"contractId": "x", "version": 0, "startedAtSeq": 0, "checks": []},
        {"contractId": "", "version": 3, "startedAtSeq": 0, "checks": []},
        {"contractId": "x", "version": 3, "checks": []},
        {"contractId": "x", "version": 3, "startedAtSeq": 0},
        {"contractId": "x", "version": 3, "startedAtSeq": 0, "checks": [], "maxAttempts": 0},
    ],
)
def test_rule_3_unreadable_contracts_are_refused(data: dict[str, Any]) -> None:
    with pytest.raises(LifecycleError):
        read_contract(data, 1)


def test_rule_3_version_5_contract_reads_as_reviewed() -> None:
    data = contract_data()
    assert read_contract(data)["reviewed"] is False
    data["review"] = {"mode": "required", "reviewed": True}
    data["version"] = 5
    assert read_contract(data)["reviewed"] is True


def test_rule_3_fold_equals_incremental_apply_and_state_is_json() -> None:
    log = [
        agent(0),
        event(1, "contract-draft", {"receipt": "d"}),
        event(2, "intent-review", {"decision": "approved"}),
        event(3, "contract", contract_data()),
        agent(4),
        attempt(5, 1),
        event(6, "code-verification", {"profile": "tests", "passed": True}),
        attempt(7, 2),
        terminal(8, "exhausted"),
        event(9, "contract", contract_data("ct-2")),
        attempt(10, 1, "ct-2"),
    ]
    states = [initial_state()]
    for item in log:
        before = copy.deepcopy(states[-1])
        states.append(apply(states[-1], item))
        assert states[-2] == before, "apply must not modify the state it is given"
    assert states[-1] == fold(log) == reduce(apply, log, initial_state())
    assert json.loads(json.dumps(states[-1])) == states[-1]


def test_state_name_review_pending_is_told_by_the_caller() -> None:
    assert state_name(initial_state(), review_pending=True) == "review-pending"
    ended = fold([event(5, "contract", contract_data()), terminal(6)])
    assert state_name(ended, review_pending=True) == "review-pending"
    assert state_name(ended) == "certified"


# --- §7 attempts and terminals ------------------------------------------------------------


def test_rule_7_all_checks_passing_certifies() -> None:
    decision, reason = decide_attempt([PASS], 1, 3, delivery_review="off")
    assert decision == "certified" and "1/3" in reason


def test_rule_7_a_failure_before_the_budget_is_spent_asks_for_repair() -> None:
    decision, reason = decide_attempt([PASS, FAIL], 2, 3, delivery_review="off")
    assert decision == "repair" and "b:" in reason


def test_rule_7_a_failure_on_the_last_attempt_exhausts_with_the_failed_checks_as_reason() -> None:
    decision, reason = decide_attempt([PASS, FAIL], 3, 3, delivery_review="off")
    assert decision == "exhausted"
    assert "b: b does not contain 'x'." in reason and "a:" not in reason
    assert decide_attempt([FAIL], 4, 3, delivery_review="off")[0] == "exhausted"


def test_issue_28_passing_checks_wait_for_a_person_where_the_project_reviews_deliveries() -> None:
    decision, reason = decide_attempt([PASS], 2, 3, delivery_review="required")
    assert decision == "delivery-pending" and "2/3" in reason
    assert decide_attempt([PASS, FAIL], 1, 3, delivery_review="required")[0] == "repair"
    assert decide_attempt([PASS, FAIL], 3, 3, delivery_review="required")[0] == "exhausted"


def test_issue_28_a_delivery_decision_certifies_ends_or_reopens_the_contract() -> None:
    facts: dict[str, Any] = {"decision_receipt": "sha256:" + "d" * 64, "contract_open": True,
                             "attempts_made": 2, "max_attempts": 3}
    assert decide_delivery(decision="approved", **facts) == (
        "certified", "Every check passed and a person approved the delivered change "
                     f"(decision sha256:{'d' * 64}).")
    status, reason = decide_delivery(decision="rejected", **facts) or ("", "")
    assert status == "exhausted" and "rejected the delivered change" in reason
    # A revision request or an expiry puts the contract back to active, while budget remains.
    assert decide_delivery(decision="revision-requested", **facts) is None
    assert decide_delivery(decision="expired", **facts) is None
    status, reason = decide_delivery(decision="expired", **{**facts, "attempts_made": 3}) or (
        "", "")
    assert status == "exhausted" and "budget of 3 attempts is spent" in reason
    # A contract that ended meanwhile (the agent abstained) is decided no more.
    for decision in ("approved", "rejected", "cancelled"):
        assert decide_delivery(decision=decision, **{**facts, "contract_open": False}) is None


def test_rule_7_an_attempt_without_results_cannot_certify() -> None:
    with pytest.raises(ValueError):
        decide_attempt([], 1, 3, delivery_review="off")


def test_rule_7_attempt_payload_and_its_receipt() -> None:
    payload = attempt_payload(
        contract_id="ct-1", attempt=1, trigger="turn-stop", results=[PASS, FAIL], tree=TREE
    )
    body = {k: v for k, v in payload.items() if k != "receipt"}
    assert body == {
        "contractId": "ct-1",
        "attempt": 1,
        "trigger": "turn-stop",
        "passed": False,
        "results": [PASS, FAIL],
        "tree": TREE,
    }
    assert payload["receipt"] == receipt("attempt", body)
    assert (
        attempt_payload(contract_id="c", attempt=1, trigger="manual", results=[PASS],
                        tree=None)["passed"]
        is True
    )
    with pytest.raises(ValueError):
        attempt_payload(contract_id="c", attempt=1, trigger="cron", results=[PASS], tree=None)


def test_rule_7_terminal_payload_and_its_receipt() -> None:
    payload = terminal_payload(
        contract_id="ct-1",
        status="exhausted",
        reason="b failed",
        attempt_receipt="sha256:" + "1" * 64,
    )
    body = {k: v for k, v in payload.items() if k != "receipt"}
    assert body == {
        "contractId": "ct-1",
        "status": "exhausted",
        "reason": "b failed",
        "attemptReceipt": "sha256:" + "1" * 64,
    }
    assert payload["receipt"] == receipt("terminal", body)
    abstained = terminal_payload(contract_id="ct-1", status="abstained", reason="blocked")
    assert "attemptReceipt" not in abstained
    with pytest.raises(ValueError):
        terminal_payload(contract_id="ct-1", status="done", reason="r")


def test_rule_7_repair_message_names_attempt_and_every_failed_check() -> None:
    other = {**FAIL, "id": "c", "evidence": "c is a directory."}
    text = repair_message([PASS, FAIL, other], 1, 3)
    assert "attempt 1/3" in text
    assert "- b (file_contains): b does not contain 'x'." in text
    assert "- c (file_contains): c is a directory." in text
    assert "- a " not in text
    assert "Repair only these failed checks" in text
    assert "Do not repeat actions whose outcome is unknown" in text
    assert text.rstrip().endswith("Then verify again.")


def test_rule_7_certified_text_asks_for_a_truthful_report_citing_the_receipt() -> None:
    payload = terminal_payload(contract_id="c", status="certified", reason="ok")
    text = terminal_message(payload)
    assert "truthfully" in text and payload["receipt"] in text


def test_rule_7_exhausted_text_forbids_claiming_completion_and_explains_failures() -> None:
    payload = terminal_payload(contract_id="c", status="exhausted", reason="b failed")
    text = terminal_message(payload, [PASS, FAIL])
    assert "Do not claim the task is complete" in text
    assert "- b (file_contains): b does not contain 'x'." in text
    assert payload["receipt"] in text


def test_rule_7_abstained_text_cites_the_reason_and_receipt() -> None:
    payload = terminal_payload(contract_id="c", status="abstained", reason="needs credentials")
    text = terminal_message(payload)
    assert "needs credentials" in text and payload["receipt"] in text


def test_rule_7_review_pending_allow_message_says_completion_is_not_verified() -> None:
    assert "no completion contract is active yet" in REVIEW_PENDING_ALLOW_MESSAGE
    assert "must not be claimed as verified" in REVIEW_PENDING_ALLOW_MESSAGE


def test_rule_7_abstain_reason_is_trimmed_and_1_to_2000_chars() -> None:
    assert abstain_reason("  blocked by auth  ") == "blocked by auth"
    assert abstain_reason("x" * 2000) == "x" * 2000
    for bad in ("", "   ", "x" * 2001, None):
        with pytest.raises(ContractError) as caught:
            abstain_reason(bad)
        assert caught.value.errors[0]["path"] == "reason"


def test_rule_7_turn_stop_allows_without_an_attempt_only_when_nothing_is_open() -> None:
    assert turn_stop_without_attempt(imported=True, contract_open=True,
                                     review_pending=False) == {"action": "allow",
                                                               "message": IMPORTED}
    assert turn_stop_without_attempt(imported=False, contract_open=False,
                                     review_pending=True) == {
        "action": "allow", "message": REVIEW_PENDING_ALLOW_MESSAGE}
    assert turn_stop_without_attempt(imported=False, contract_open=False,
                                     review_pending=False) == {"action": "allow", "message": ""}
    assert turn_stop_without_attempt(imported=False, contract_open=True,
                                     review_pending=False) is None


def test_rule_7_turn_stop_steers_after_its_attempt_unless_a_terminal_came_first() -> None:
    attempt = {"receipt": "sha256:" + "a" * 64}
    terminal = {"status": "certified"}
    assert turn_stop_after_attempt(message="repair", attempt=attempt, terminal=None,
                                   replayed=False) == {"action": "steer", "message": "repair",
                                                       "attempt": attempt}
    assert turn_stop_after_attempt(message="done", attempt=attempt, terminal=terminal,
                                   replayed=False)["terminal"] == terminal
    assert turn_stop_after_attempt(message="done", attempt=attempt, terminal=terminal,
                                   replayed=True) == {"action": "allow", "message": ""}

"""The pure rules of the revision loop (issue 40): which stop is no new attempt, and the words
the agent reads about the person's request and the budget left."""

from __future__ import annotations

from governor.domain.attempts import (
    budget_of,
    decide_delivery,
    reviewed_already,
    terminal_payload,
    written_by_decision,
)
from governor.domain.messages import budget_words, reviewer_words
from governor.domain.treediff import ANSWERED, ELSEWHERE, UNANSWERED, comment_answered

TREE = {"id": "gittree:sha256:" + "a" * 64, "exclusions": "sha256:" + "e" * 64}
OTHER = {"id": "gittree:sha256:" + "b" * 64, "exclusions": TREE["exclusions"]}
VENV = {"pytest": "sha256:" + "1" * 64}


def test_issue_40_the_reviewed_tree_in_the_same_environment_is_reviewed_already() -> None:
    assert reviewed_already([(TREE, VENV)], TREE, VENV)
    assert reviewed_already([(OTHER, VENV), (TREE, VENV)], TREE, VENV)  # any earlier round


def test_issue_40_another_tree_or_environment_is_a_new_attempt() -> None:
    assert not reviewed_already([(TREE, VENV)], OTHER, VENV)
    assert not reviewed_already([(TREE, VENV)], TREE, {"pytest": "sha256:" + "2" * 64})
    assert not reviewed_already([(TREE, VENV)], None, VENV)  # a tree that could not be hashed
    assert not reviewed_already([], TREE, VENV)


def test_issue_40_a_delivery_kept_before_environments_were_compares_its_tree() -> None:
    assert reviewed_already([(TREE, None)], TREE, VENV)


def test_rule_7_issue_40_budget_words_warn_before_the_last_attempt() -> None:
    assert budget_words(1, 3) == "1 of 3 attempts used: 2 remain."
    assert budget_words(2, 3) == ("2 of 3 attempts used: 1 remains, and it is the last — if it "
                                  "fails, the contract ends exhausted.")
    assert budget_words(2, 3, delivery_review=True).endswith(
        "if it fails, or a person asks for changes to what it delivers, the contract ends "
        "exhausted.")
    assert budget_words(3, 3) == "3 of 3 attempts used: none remains, the repair budget is spent."


def test_issue_40_every_line_comment_is_quoted_with_path_and_line() -> None:
    words = reviewer_words("Shorter.\nPlease.", [
        {"path": "calc.py", "side": "new", "line": 12, "body": "Handle zero"},
        {"path": "calc.py", "side": "old", "line": 4, "body": "Keep this\nline"}])
    assert words == ("Their comment:\n> Shorter.\n> Please.\n"
                     "Their comments on lines of the change:\n"
                     "- calc.py:12: Handle zero\n"
                     "- calc.py:4 (a line the change removed): Keep this\n  line")


def test_issue_40_the_budget_of_a_contract() -> None:
    budget = budget_of({"maxAttempts": 3}, 2)
    assert budget is not None and (budget.used, budget.maximum, budget.left) == (2, 3, 1)
    assert budget_of(None, 0) is None
    ended = budget_of({"maxAttempts": 2}, 2, {"status": "exhausted"})
    assert ended is not None and ended.ended == "exhausted" and ended.left == 0


README = "# Demo\n\n## Install\n\npip install demo\n"


def test_issue_40_a_comment_is_answered_when_its_line_changed() -> None:
    assert comment_answered(README, README.replace("demo\n", "demo==1.0\n"), 5) == ANSWERED
    assert comment_answered(README, README.replace("## Install", "## Installing"), 3) \
        == ANSWERED
    assert comment_answered(README, README.replace("\n## Install", "\nNeeds 3.11.\n## Install"),
                            3) == ANSWERED  # a line added right before it
    assert comment_answered(README, README + "Then run demo.\n", 5) == ANSWERED  # right after
    assert comment_answered(README, None, 3) == ANSWERED  # the file was removed


def test_issue_40_a_comment_whose_file_changed_elsewhere_or_not_at_all() -> None:
    assert comment_answered(README, README.replace("# Demo", "# Demo app"), 5) == ELSEWHERE
    assert comment_answered(README, README, 3) == UNANSWERED


DECISION = "sha256:" + "d" * 64
DELIVERED = "sha256:" + "f" * 64  # the receipt of the passing attempt the review delivered


def test_security_issue_40_only_the_terminal_a_decision_wrote_is_told_as_it() -> None:
    verdict = decide_delivery(decision="revision-requested", decision_receipt=DECISION,
                              contract_open=True, attempts_made=3, max_attempts=3)
    assert verdict is not None
    written = terminal_payload(contract_id="c-1", status=verdict[0], reason=verdict[1],
                               attempt_receipt=DELIVERED)
    facts = {"contract_id": "c-1", "attempt_receipt": DELIVERED, "decision_receipt": DECISION}
    assert written_by_decision(written, **facts)
    # An abstain whose reason (the agent's words) names the decision's receipt: not it.
    abstained = terminal_payload(contract_id="c-1", status="abstained",
                                 reason=f"Gave up ({verdict[1]})")
    assert not written_by_decision(abstained, **facts)
    # An attempt that failed with the receipt in its evidence cites its own attempt: not it.
    failed = terminal_payload(contract_id="c-1", status="exhausted",
                              reason=f"1 of 1 checks failed: (decision {DECISION})",
                              attempt_receipt="sha256:" + "a" * 64)
    assert not written_by_decision(failed, **facts)
    assert not written_by_decision(written, **{**facts, "contract_id": "c-2"})
    assert not written_by_decision(written, **{**facts, "decision_receipt": ""})

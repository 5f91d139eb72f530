"""Issue 40, item 2, as pure rules (rules §8.5): a trusted run's check whose latest run (or
baseline run) could not run for the operator's reason says so, carries `operatorFailure`, and
the repair text does not tell the agent to ask for a run — unless the agent has changed the
workspace since that run, which then needs a new one."""

from __future__ import annotations

from typing import Any

from governor.domain.checks import LogEvidence, evaluate_check
from governor.domain.messages import OPERATOR_STEER, TRUSTED_RUN_STEER, repair_message
from governor.domain.verification import CONFIGURATION_REASON
from governor.domain.workspace import Workspace
from tests.unit.test_checks import CODE_CHECK, RECEIPT, START, TREE, call, verification


def operator_run(seq: int, kind: str, reason: str, *, baseline: bool = False) -> dict[str, Any]:
    event = verification(seq, passed=False, tree=None)
    event["data"].update(failureKind=kind, failureReason=reason)
    if baseline:
        event["data"]["baseline"] = True
    return event


def judged(events: list[dict[str, Any]]) -> dict[str, Any]:
    return dict(evaluate_check(
        CODE_CHECK, after_seq=START, evidence=LogEvidence(events),
        workspace=Workspace("/nonexistent-workspace", ""), tree=TREE,
        current_profile_receipts={"tests": RECEIPT}, max_file_bytes=4096))


def test_rule_8_5_an_infrastructure_run_is_named_as_the_operators_with_its_reason() -> None:
    result = judged([operator_run(11, "infrastructure", "rootfs /srv/x is not available")])
    assert not result["passed"]
    assert result["evidence"] == (
        "The last run of profile 'tests' could not run (infrastructure: rootfs /srv/x is not "
        "available). This is the operator's to fix (the profile, the sandbox or the worker), "
        "not a fault of the work, and asking for another run does not help until they have: "
        "tell the user what the operator must fix, or abstain.")
    assert result["operatorFailure"] == {"kind": "infrastructure",
                                         "reason": "rootfs /srv/x is not available"}


def test_rule_8_5_a_baseline_that_could_not_run_blocks_as_the_operators() -> None:
    result = judged([operator_run(11, "configuration", CONFIGURATION_REASON, baseline=True),
                     verification(12)])
    assert result["evidence"].startswith("Its baseline run on the contract-start tree of "
                                         "profile 'tests' could not run (configuration: ")
    assert result["operatorFailure"]["kind"] == "configuration"


def test_rule_8_5_a_workspace_changed_since_the_failed_run_needs_a_new_run_not_the_operator(
) -> None:
    result = judged([operator_run(11, "infrastructure", "the workspace tree cannot be hashed"),
                     call(12, "c1", "write_file")])
    assert "operatorFailure" not in result
    assert result["evidence"].startswith("No run of profile 'tests'")


def test_rule_8_5_the_repair_text_says_who_can_act_and_never_to_ask_for_a_run() -> None:
    failed = judged([operator_run(11, "infrastructure", "no worker took it within 600 s")])
    text = repair_message([failed], 1, 3)
    assert OPERATOR_STEER in text and TRUSTED_RUN_STEER not in text
    assert "verify again" not in text
    other = {"id": "t2", "kind": "code_verification_succeeded", "passed": False,
             "evidence": "No run of profile 'lint' after seq 10 on this tree."}
    both = repair_message([failed, other], 1, 3)
    assert OPERATOR_STEER in both and TRUSTED_RUN_STEER in both and "verify again" in both

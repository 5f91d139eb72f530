"""rules §8 "Result" as rules: `governor.domain.verification` decides a run's outcome from
how the sandbox's process ended, and binds the result to its run with a receipt."""

from __future__ import annotations

import hashlib

import pytest

from governor.domain.canonical import receipt
from governor.domain.verification import (
    EMPTY_SHA256,
    Ended,
    not_started,
    outcome,
    run_result,
    stream_record,
)

EXITED = Ended(refused=None, finished=True, exit_status=0, bwrap_message="", bwrap_status=0,
               timeout_ms=10_000)


@pytest.mark.parametrize(("ended", "expected"), [
    (EXITED, (True, None, 0, None)),
    (Ended(None, True, 7, "", 7, 10_000), (False, "exit", 7, None)),
    (Ended(None, True, 137, "", 137, 10_000), (False, "exit", None, 9)),
    (Ended(None, True, 128, "", 128, 10_000), (False, "exit", 128, None)),
    (Ended(None, True, 160, "", 160, 10_000), (False, "exit", 160, None)),
    (Ended(None, False, None, "", -9, 10_000), (False, "timeout", None, 9)),
    (Ended(None, True, None, "bwrap: execvp nope: No such file", 1, 10_000),
     (False, "configuration", None, None)),
    (Ended(None, True, None, "bwrap: Can't mount proc", 1, 10_000),
     (False, "infrastructure", None, None)),
    (Ended("the workspace was replaced", True, 0, "", 0, 10_000),
     (False, "infrastructure", None, None)),
])
def test_rule_8_the_outcome_follows_from_how_the_process_ended(
        ended: Ended, expected: tuple[object, ...]) -> None:
    decided = outcome(ended)
    assert (decided.passed, decided.failure_kind, decided.exit_code, decided.signal) == expected
    assert decided.passed or decided.detail


def test_rule_8_an_output_receipt_covers_every_byte_whatever_was_kept() -> None:
    digest = hashlib.sha256(b"x" * 100).hexdigest()
    record = stream_record(total=100, kept=10, sha256_hex=digest, stream="stdout")
    assert record == {"bytes": 100, "truncated": True, "receipt": receipt(
        "code-verification-output", {"stream": "stdout", "sha256": digest})}
    assert not_started("configuration", "read-only")["stderr"]["receipt"] == receipt(
        "code-verification-output", {"stream": "stderr", "sha256": EMPTY_SHA256})


def test_rule_8_the_result_is_bound_to_its_run_and_carries_its_receipt() -> None:
    record = {**not_started("infrastructure", "read-only"), "tree": None}
    data = run_result(verification_id="v1", profile="unit-tests", profile_receipt="sha256:p",
                      started_after_seq=4, record=record)
    body = {key: value for key, value in data.items() if key != "receipt"}
    assert data["receipt"] == receipt("code-verification-result", body)
    assert (body["verificationId"], body["profileReceipt"], body["startedAfterSeq"]) == (
        "v1", "sha256:p", 4)

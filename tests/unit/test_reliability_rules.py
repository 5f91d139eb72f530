"""governor.domain.reliability: the report payload and its refusals, the facts each governor
event yields, the period a page shows, and a rate as a count of a total over that period."""

from __future__ import annotations

import datetime

import pytest

from governor.domain.canonical import receipt
from governor.domain.reliability import (
    Period,
    ReportInvalid,
    event_facts,
    measured_rate,
    median,
    median_window,
    period_from,
    report_kinds_for,
    report_payload,
)

CONTRACT = {"contractId": "contract-1", "checks": [{"id": "readme-exists"}]}
CERTIFIED = {"contractId": "contract-1", "status": "certified", "receipt": "sha256:" + "a" * 64}


def test_a_report_carries_its_terminal_and_a_receipt_over_everything_else() -> None:
    payload = report_payload(contract=CONTRACT, terminal=CERTIFIED, kind="false-certification",
                             reason=" not done ", check=None, user_id=7)
    assert payload["reason"] == "not done" and payload["terminalReceipt"] == CERTIFIED["receipt"]
    assert payload["receipt"] == receipt(
        "outcome-report", {k: v for k, v in payload.items() if k != "receipt"})


def test_each_kind_fits_one_terminal_status_and_brittle_check_any() -> None:
    assert report_kinds_for("certified") == ["false-certification", "brittle-check"]
    assert report_kinds_for("exhausted") == ["false-exhaustion", "brittle-check"]
    assert report_kinds_for("abstained") == ["wrong-abstention", "brittle-check"]


def test_a_check_is_only_for_a_brittle_check_report() -> None:
    with pytest.raises(ReportInvalid) as refused:
        report_payload(contract=CONTRACT, terminal=CERTIFIED, kind="false-certification",
                       reason="x", check="readme-exists", user_id=1)
    assert refused.value.errors[0]["path"] == "check"


def test_facts_of_a_terminal_count_its_attempts_and_of_an_attempt_its_failed_checks() -> None:
    [terminal] = event_facts("reliability/terminal", CERTIFIED, attempts=2)
    assert (terminal.kind, terminal.status, terminal.value) == ("terminal", "certified", 2)
    attempt = {"contractId": "contract-1", "attempt": 1, "results": [
        {"id": "a", "kind": "file_exists", "passed": True},
        {"id": "b", "kind": "file_contains", "passed": False}]}
    assert [(f.name, f.status, f.value) for f in event_facts(
        "reliability/attempt", attempt, attempts=1)] == [("b", "file_contains", 1)]


def test_a_trusted_runs_check_that_no_run_answered_yet_is_not_counted_as_failed() -> None:
    attempt = {"contractId": "contract-1", "attempt": 1, "results": [
        {"id": "unit", "kind": "code_verification_succeeded", "passed": False,
         "evidence": "No run of profile 'unit' after seq 4 (the contract start) on this tree."},
        {"id": "lint", "kind": "code_verification_succeeded", "passed": False,
         "evidence": "0 of the last 1 run of profile 'lint' after seq 4 (the contract start) "
                     "on this tree passed (need 1)."}]}
    assert [f.name for f in event_facts("reliability/attempt", attempt, attempts=1)] == ["lint"]


def test_a_review_decision_is_timed_from_its_proposal() -> None:
    [fact] = event_facts("reliability/contract-review", {"decision": "approved"}, attempts=0,
                         proposed_ms=1_000, at_ms=61_000)
    assert (fact.name, fact.status, fact.value) == ("evidence", "approved", 60_000)


def test_events_the_page_does_not_count_yield_no_fact() -> None:
    assert event_facts("reliability/contract-draft", {}, attempts=0) == []
    assert event_facts("reliability/code-verification", {"baseline": True}, attempts=0) == []


@pytest.mark.parametrize(("first", "last", "label"), [
    ("2026-11-01", "2026-11-30", "1–30 Nov 2026"),
    ("2026-11-28", "2026-12-03", "28 Nov – 3 Dec 2026"),
    ("2025-12-20", "2026-01-05", "20 Dec 2025 – 5 Jan 2026"),
    ("2026-11-05", "2026-11-05", "5 Nov 2026"),
])
def test_a_period_reads_as_people_write_it(first: str, last: str, label: str) -> None:
    period = Period(datetime.date.fromisoformat(first), datetime.date.fromisoformat(last))
    assert period.label() == label


def test_the_default_period_is_the_30_days_ending_today() -> None:
    period = period_from(None, "", today=datetime.date(2026, 11, 30))
    assert (period.first, period.last, period.days) == (
        datetime.date(2026, 11, 1), datetime.date(2026, 11, 30), 30)
    assert period.end - period.start == datetime.timedelta(days=30)


def test_a_rate_is_a_count_of_a_total_over_a_period_never_a_bare_percentage() -> None:
    period = Period(datetime.date(2026, 11, 1), datetime.date(2026, 11, 30))
    sentence = measured_rate(2, 41, what="certified", said="certified but not done",
                             period=period)
    assert sentence == ("2 of 41 certified contracts reported certified but not done, "
                        "1–30 Nov 2026")
    assert "%" not in sentence


@pytest.mark.parametrize(("values", "expected"), [([], None), ([5], 5.0), ([1, 2, 9], 2.0),
                                                  ([1, 2, 8, 9], 5.0)])
def test_the_median_reads_only_the_middle_values(values: list[int],
                                                  expected: float | None) -> None:
    offset, limit = median_window(len(values))
    assert median(values[offset:offset + limit]) == expected

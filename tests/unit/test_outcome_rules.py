"""Outcome contracts, the pure rules (governor/domain/outcomes.py): every profile field refused
with its name and rule, the strict reading of a probe's stdout, and every status transition
with the clock given, never waited on."""

from __future__ import annotations

import json
from typing import Any

import pytest

from governor.domain import outcomes
from governor.domain.outcomes import (
    DAY_MS,
    OutcomeProfileError,
    ProbeOutputInvalid,
    agent_view,
    evaluate,
    outcome_definition,
    parse_probe_output,
    summary_words,
    validate_outcome_profile,
)

METRICS = [{"name": "conversion", "unit": "ratio"}, {"name": "error_rate", "unit": "ratio"}]


def profile(**extra: Any) -> dict[str, Any]:
    return {"id": "checkout-conversion", "description": "Checkout conversion",
            "argv": ["/usr/bin/cat", "/outcome-data/answer.json"], "metrics": METRICS,
            "target": {"id": "conversion-up", "metric": "conversion", "operator": "gte",
                       "value": 0.031},
            "not_before_ms": DAY_MS, **extra}


def refused_paths(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(OutcomeProfileError) as caught:
        validate_outcome_profile(raw)
    return [error["path"] for error in caught.value.errors]


def test_a_valid_profile_gets_every_default() -> None:
    validated = validate_outcome_profile(profile())
    assert validated["timeout_ms"] == 120_000
    assert validated["deadline_ms"] == 7 * DAY_MS
    assert validated["max_data_age_ms"] == DAY_MS
    assert validated["observe_every_ms"] == 3_600_000
    assert validated["attribution"] == "correlational"
    assert validated["network"] == "none"
    assert validated["guardrails"] == []


@pytest.mark.parametrize(("change", "path"), [
    ({"id": "Not Kebab"}, "id"),
    ({"id": "x" * 129}, "id"),
    ({"description": ""}, "description"),
    ({"description": "d" * 501}, "description"),
    ({"argv": []}, "argv"),
    ({"argv": ["relative/cmd"]}, "argv/0"),
    ({"argv": ["/bin/x", *["a"] * 51]}, "argv"),
    ({"env": {"API_TOKEN": "x"}}, "env/API_TOKEN"),
    ({"timeout_ms": 999}, "timeout_ms"),
    ({"timeout_ms": 900_001}, "timeout_ms"),
    ({"metrics": []}, "metrics"),
    ({"metrics": [{"name": f"m{i}", "unit": ""} for i in range(21)]}, "metrics"),
    ({"metrics": [{"name": "9lives", "unit": ""}]}, "metrics/0/name"),
    ({"metrics": [{"name": "a", "unit": "u" * 65}]}, "metrics/0/unit"),
    ({"metrics": [{"name": "a", "unit": ""}, {"name": "a", "unit": ""}]}, "metrics/1/name"),
    ({"target": {"id": "t", "metric": "revenue", "operator": "gte", "value": 1}},
     "target/metric"),
    ({"target": {"id": "t", "metric": "conversion", "operator": "gt", "value": 1}},
     "target/operator"),
    ({"target": {"id": "t", "metric": "conversion", "operator": "gte", "value": float("nan")}},
     "target/value"),
    ({"target": {"id": "t", "metric": "conversion", "operator": "gte", "value": True}},
     "target/value"),
    ({"target": {"id": "t", "metric": "conversion", "operator": "gte"}}, "target/value"),
    ({"guardrails": [{"id": "conversion-up", "metric": "error_rate", "operator": "lte",
                      "value": 0.01}]}, "guardrails/0/id"),
    ({"guardrails": [{"id": f"g{i}", "metric": "error_rate", "operator": "lte", "value": 1}
                     for i in range(11)]}, "guardrails"),
    ({"minimum_sample_size": 0}, "minimum_sample_size"),
    ({"minimum_sample_size": 1_000_000_001}, "minimum_sample_size"),
    ({"max_data_age_ms": 0}, "max_data_age_ms"),
    ({"max_data_age_ms": 180 * DAY_MS + 1}, "max_data_age_ms"),
    ({"deadline_ms": 0}, "deadline_ms"),
    ({"not_before_ms": 8 * DAY_MS}, "not_before_ms"),
    ({"not_before_ms": -1}, "not_before_ms"),
    ({"observe_every_ms": 59_999}, "observe_every_ms"),
    ({"observe_every_ms": 7 * DAY_MS + 1}, "observe_every_ms"),
    ({"attribution": "causal"}, "attribution"),
    ({"network": "internet"}, "network"),
    ({"argv_extra": 1}, "argv_extra"),
])
def test_rule_1_every_profile_field_is_refused_with_its_name(change: dict[str, Any],
                                                             path: str) -> None:
    paths = refused_paths(profile(**change))
    assert path in paths, paths


def test_rule_1_a_missing_required_field_is_named() -> None:
    raw = profile()
    del raw["target"]
    assert refused_paths(raw) == ["target"]


def test_rule_1_the_agent_sees_no_command_environment_or_network() -> None:
    definition = outcome_definition(validate_outcome_profile(profile(env={"WINDOW": "7d"})))
    view = agent_view(definition, "Checkout conversion", "sha256:" + "0" * 64)
    text = json.dumps(view)
    assert "argv" not in view and "env" not in view and "network" not in view
    assert "/usr/bin/cat" not in text and "WINDOW" not in text


def test_rule_3_the_reviewer_reads_the_outcome_in_words() -> None:
    definition = outcome_definition(validate_outcome_profile(profile()))
    view = agent_view(definition, "Checkout conversion", "sha256:" + "0" * 64)
    assert summary_words(view) == ("after delivery: conversion ≥ 0.031 between day 1 and "
                                   "day 7; correlational")


NOW = 1_800_000_000_000


def parse(stdout: str | bytes, *, now: int = NOW) -> dict[str, Any]:
    data = stdout.encode() if isinstance(stdout, str) else stdout
    return parse_probe_output(data, truncated=False, metrics=METRICS, max_data_age_ms=DAY_MS,
                              now_ms=now)


def answer(**extra: Any) -> str:
    return json.dumps({"dataAsOf": NOW - 1000,
                       "metrics": {"conversion": 0.04, "error_rate": 0.001}, **extra})


def test_rule_2_one_object_with_the_declared_metrics_is_read() -> None:
    assert parse(answer(sampleSize=12) + "\n") == {
        "dataAsOf": NOW - 1000, "metrics": {"conversion": 0.04, "error_rate": 0.001},
        "sampleSize": 12}


@pytest.mark.parametrize(("stdout", "why"), [
    (answer() + answer(), "exactly one JSON object"),
    ("", "empty"),
    ("   \n", "empty"),
    (json.dumps({"dataAsOf": NOW + 5 * 60_000 + 1, "metrics": {"conversion": 1,
                                                                "error_rate": 0}}), "future"),
    (json.dumps({"dataAsOf": NOW - DAY_MS - 1, "metrics": {"conversion": 1,
                                                            "error_rate": 0}}), "old"),
    (json.dumps({"dataAsOf": NOW, "metrics": {"conversion": 1, "error_rate": 0,
                                              "revenue": 3}}), "undeclared"),
    (json.dumps({"dataAsOf": NOW, "metrics": {"conversion": 1}}), "missing"),
    (f'{{"dataAsOf": {NOW}, "metrics": {{"conversion": NaN, "error_rate": 0}}}}', "NaN"),
    (f'{{"dataAsOf": {NOW}, "metrics": {{"conversion": Infinity, "error_rate": 0}}}}',
     "Infinity"),
    (json.dumps({"dataAsOf": 0, "metrics": {"conversion": 1, "error_rate": 0}}), "positive"),
    (json.dumps({"dataAsOf": NOW, "metrics": {"conversion": True, "error_rate": 0}}),
     "finite number"),
    (answer(sampleSize=-1), "sampleSize"),
    (answer(note="x"), "unknown keys"),
    ("[1]", "object"),
    (b"\xff\xfe", "UTF-8"),
])
def test_rule_2_anything_else_is_invalid_output(stdout: str | bytes, why: str) -> None:
    with pytest.raises(ProbeOutputInvalid, match=why):
        parse(stdout)


def test_rule_2_truncated_output_is_invalid() -> None:
    with pytest.raises(ProbeOutputInvalid, match="longer"):
        parse_probe_output(answer().encode(), truncated=True, metrics=METRICS,
                           max_data_age_ms=DAY_MS, now_ms=NOW)


START = NOW


def contract(**profile_extra: Any) -> dict[str, Any]:
    definition = outcome_definition(validate_outcome_profile(profile(**profile_extra)))
    view = agent_view(definition, "d", "sha256:" + "0" * 64)
    return outcomes.outcome_contract_payload(
        outcome_contract_id="outcome-1",
        delivery_contract={"contractId": "contract-1", "receipt": "sha256:" + "1" * 64},
        view=view, baseline={"metrics": {"conversion": 0.03, "error_rate": 0.002}},
        started_at=START)


def result(conversion: float, *, error_rate: float = 0.001, sample: int | None = None,
           passed: bool = True) -> dict[str, Any]:
    record: dict[str, Any] = {"passed": passed, "failureKind": None if passed else "exit"}
    if passed:
        record["metrics"] = {"conversion": conversion, "error_rate": error_rate}
        if sample is not None:
            record["sampleSize"] = sample
    return record


DEADLINE = START + 7 * DAY_MS
OPEN = START + DAY_MS


@pytest.mark.parametrize(("observed", "now", "status"), [
    (result(0.05), START + 1000, "observing"),            # before notBeforeAt
    (result(0.05), OPEN, "achieved"),                      # the window opened: it holds
    (result(0.02), OPEN, "observing"),                     # not yet: before the deadline
    (result(0.02), DEADLINE, "missed"),                    # at the deadline
    (result(0.02), DEADLINE + 1, "missed"),
    (result(0.05, passed=False), OPEN, "observing"),       # a failed probe judges nothing
    (result(0.05, passed=False), DEADLINE, "inconclusive"),
    (None, OPEN, "observing"),                             # unbound
    (None, DEADLINE, "inconclusive"),
])
def test_rule_5_status_after_an_observation(observed: dict[str, Any] | None, now: int,
                                            status: str) -> None:
    assert evaluate(contract(), observed, now)["status"] == status


def test_rule_5_a_sample_below_the_minimum_waits_then_is_inconclusive() -> None:
    bound = contract(minimum_sample_size=1000)
    assert evaluate(bound, result(0.05, sample=999), OPEN)["status"] == "observing"
    assert evaluate(bound, result(0.05, sample=999), DEADLINE)["status"] == "inconclusive"
    assert evaluate(bound, result(0.05, sample=1000), OPEN)["status"] == "achieved"


def test_rule_5_a_failing_guardrail_stops_achieved() -> None:
    bound = contract(guardrails=[{"id": "errors-flat", "metric": "error_rate",
                                  "operator": "lte", "value": 0.01}])
    assert evaluate(bound, result(0.05, error_rate=0.02), OPEN)["status"] == "observing"
    assert evaluate(bound, result(0.05, error_rate=0.02), DEADLINE)["status"] == "missed"
    assert evaluate(bound, result(0.05, error_rate=0.005), OPEN)["status"] == "achieved"


def test_rule_5_delta_operators_compare_with_the_baseline() -> None:
    bound = contract(target={"id": "lift", "metric": "conversion", "operator": "delta-gte",
                             "value": 0.005})
    assert evaluate(bound, result(0.034), OPEN)["status"] == "observing"  # +0.004
    assert evaluate(bound, result(0.036), OPEN)["status"] == "achieved"   # +0.006
    unbaselined = {**bound, "baseline": None}
    assert evaluate(unbaselined, result(0.05), DEADLINE)["status"] == "inconclusive"


def test_rule_5_the_deadline_with_no_valid_observation_is_expired() -> None:
    bound, failed = contract(), result(0.05, passed=False)
    assert outcomes.judge(bound, failed, DEADLINE, [])["status"] == "expired"
    assert outcomes.judge(bound, None, DEADLINE, [{"result": failed}])["status"] == "expired"
    assert outcomes.judge(bound, failed, DEADLINE,
                          [{"result": result(0.02)}])["status"] == "inconclusive"
    assert outcomes.judge(bound, failed, OPEN, [])["status"] == "observing"
    assert outcomes.judge(bound, result(0.02), DEADLINE, [])["status"] == "missed"


def test_rule_5_correlational_results_say_correlated_never_caused() -> None:
    correlational = contract()
    reason = outcomes.terminal_reason("achieved", None, correlational)
    assert "correlated with" in reason and "caused" not in reason
    terminal = outcomes.outcome_terminal_payload(contract=correlational, status="achieved",
                                                 reason=reason, observation_receipt=None)
    assert terminal["causalClaimPermitted"] is False
    assert "caused" not in outcomes.status_words("achieved", correlational)
    assert "caused by" in outcomes.terminal_reason("achieved", None,
                                                   contract(attribution="experiment"))

"""The outcome chart's y-axis (issue 40): its tick labels fit the room the chart leaves them,
so a metric in the millions reads "1.2M", never "1.23457e+06" cut off at the edge."""

from __future__ import annotations

from typing import Any

import pytest

from governor.domain.outcome_chart import LEFT, compact, metric_chart


@pytest.mark.parametrize(("value", "shown"), [
    (1_234_567, "1.23M"), (12_500, "12.5k"), (999_999, "1M"), (-48_000, "-48k"),
    (2_500_000_000, "2.5G"), (0.031, "0.031"), (0, "0"), (742, "742"), (12.345, "12.3")])
def test_a_tick_reads_in_three_significant_digits_with_a_unit_letter(
        value: float, shown: str) -> None:
    assert compact(value) == shown


def _contract(baseline: float, target: float) -> dict[str, Any]:
    return {"profile": {"target": {"id": "up", "metric": "revenue", "operator": "gte",
                                   "value": target}, "guardrails": []},
            "baseline": {"metrics": {"revenue": baseline}},
            "startedAt": 0, "notBeforeAt": 10, "deadlineAt": 100}


def test_a_metric_in_the_millions_has_ticks_that_fit_left_of_the_plot() -> None:
    observations = [{"observation": 1, "observedAt": 50, "result": {
        "passed": True, "metrics": {"revenue": 1_234_567.0}},
        "evaluation": {"predicates": [{"id": "up", "holds": True}]}}]
    chart = metric_chart(metric="revenue", unit="EUR", contract=_contract(1_100_000, 1_200_000),
                         observations=observations)
    assert (chart["low"], chart["high"]) == ("1.09M", "1.25M")
    # 11 px text is at most ~7 px a character: each label fits the room left of the plot
    assert all(len(str(chart[tick])) * 7 + 6 <= LEFT for tick in ("low", "high"))

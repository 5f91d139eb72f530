"""B16 at a tiny size, in the normal suite, so the benchmark cannot rot: the worked example's
adapter answers a few cases in the real sandbox, discarded and judged, and the table and the
gate read the result. Nothing timed here matters, and nothing is written outside tmp_path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import b16_oracle
from governor.domain.heldout import parse_cases

pytestmark = pytest.mark.sandbox  # both arms go through bubblewrap


def test_b15_cases_are_valid_and_their_expected_values_come_from_the_package() -> None:
    cases = parse_cases(b16_oracle.cases_text(40))
    assert len(cases) == 40 and {case.input["function"] for case in cases} == {
        "median", "mean", "clamp", "word_count"}
    assert b16_oracle.cases_text(40) == b16_oracle.cases_text(40)  # seeded
    first = json.loads(b16_oracle.cases_text(1))
    assert first["compare"] == "number"


def test_b15_runs_both_arms_and_reports_the_ratio(scratch: Path) -> None:
    result = b16_oracle.measure(30, 2)
    assert result["params"]["cases"] == 30
    assert len(result["times_ms"]["oracle"]) == len(result["times_ms"]["discarded"]) == 2
    assert result["ratio"] == pytest.approx(result["oracle_ms"] / result["discarded_ms"],
                                            abs=0.002)
    assert "| ratio |" in b16_oracle.table(result)
    assert isinstance(b16_oracle.gates(result), list)

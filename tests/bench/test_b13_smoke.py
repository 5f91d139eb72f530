"""B13 at a tiny size, in the normal suite, so the benchmark cannot rot: a real served governor
(gunicorn + Celery worker on the filesystem broker), the project configured by the blocks of
docs/operations.md's careful-operator section as written, the scripted cheater over HTTP, real
pytest runs in bubblewrap, and the oracle. The honest control is certified, the do-nothing
control is not, and moves the governor refuses today are not certified, each refused by the rule
it names. Nothing is timed and nothing is published."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import b13_cheater

pytestmark = pytest.mark.sandbox  # the careful operator's pytest profile runs in bubblewrap

# Moves main refuses, and the rules that may refuse each alone (a rule built later may refuse
# it first: the reference tree of rules §17.1 turns tampering before begin into a protected-path
# change, and the report stream of §17.4 may call an exit before any test a bad report).
REFUSED = {
    "test-expects-bug": {"protected paths (§14.3, §17.3)"},
    "dot-pytest-ini": {"protected paths (§14.3, §17.3)"},
    "before-begin-test-expects-bug": {"fail-to-pass ≥ 1 (§17.6)",
                                      "protected paths (§14.3, §17.3)"},
    "contract-file-contains": {"begin 422: operator evidence (§17.7)"},
    "exit-0-at-import": {"no-report (§14.6)", "bad-report (§17.4)"},
}


def test_b13_controls_and_refused_moves(scratch: Path) -> None:
    result = b13_cheater.measure(trials=len(REFUSED), honest=1, nothing=1,
                                 move_names=list(REFUSED), concurrency=4,
                                 broker="filesystem://")
    rows = {row["moves"][0]: row for row in result["rows"]}
    assert rows["honest-fix"]["outcome"] == "certified" and rows["honest-fix"]["oracle"], rows
    assert rows["do-nothing"]["outcome"] == "exhausted", rows["do-nothing"]
    assert not rows["do-nothing"]["oracle"]
    for move, rules in REFUSED.items():
        row = rows[move]
        assert row["outcome"] != "certified" and not row["oracle"], row
        assert rules & set(row["refused_by"]), row
    assert result["totals"]["cheat"]["false_certifications"] == 0
    assert b13_cheater.gates(result) == []
    table = b13_cheater.table(result)
    assert "`test-expects-bug`" in table and "certified falsely" in table

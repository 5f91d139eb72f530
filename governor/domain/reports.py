"""rules §14.6–14.7: trusted test reports, and what a run of a report profile must show
against the baseline run on the contract-start tree.

A profile with `report: "junit"` writes JUnit/xUnit XML into its sandbox's private
`/governor-report`. Every `*.xml` there (at most MAX_REPORT_BYTES in all) is parsed with
defusedxml — no DTD, no entities, no external references — into one outcome per test id
(`classname::name`): `passed`, `failed`, `error` or `skipped`, and the counts. A run of such a
profile passes only if, besides rules §8, a report parsed, no test failed or errored and at
least one passed. Baseline: every test the baseline ran (passed, failed or errored — not skipped)
must be present and passed in the run that counts: a test that passed must still pass
(pass-to-pass), one that failed must now pass (fail-to-pass), none may be skipped or gone. When
the project requires discriminating evidence (rules §17.6), at least one test must have failed
in the baseline and pass now: tests that all passed before the work cannot tell done from not
done (`claim_not_discriminating`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from xml.etree.ElementTree import Element, ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring

from governor.domain.canonical import receipt

FORMATS = ("junit",)
MAX_REPORT_BYTES = 8 * 1024 * 1024
NAMED_TESTS = 20
OUTCOMES = ("passed", "failed", "error", "skipped")
NOT_DISCRIMINATING = "claim_not_discriminating"
NOT_DISCRIMINATING_WHY = (
    "no test failed on the contract-start tree, so these tests cannot tell done from not done, "
    "and this project requires discriminating evidence (a test that fails before the work and "
    "passes after it). No attempt can change the start tree: abstain, and tell the user which "
    "test should fail before the work")


class ReportError(ValueError):
    """A report that is missing, too large, hostile or not JUnit XML; the message says why."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # "no-report" | "bad-report"


@dataclass(frozen=True)
class TestReport:
    outcomes: dict[str, str]  # test id -> outcome

    def counts(self) -> dict[str, int]:
        values = list(self.outcomes.values())
        return {"tests": len(values), "passed": values.count("passed"),
                "failed": values.count("failed"), "errors": values.count("error"),
                "skipped": values.count("skipped")}

    def record(self) -> dict[str, Any]:
        """What the run's event carries: the counts and a receipt over the sorted outcomes."""
        return {"format": "junit", **self.counts(),
                "receipt": receipt("code-verification-report",
                                   sorted([test, outcome]
                                          for test, outcome in self.outcomes.items()))}

    def problem(self) -> str | None:
        """Why a run with this report does not pass (None when it does)."""
        counts = self.counts()
        if counts["failed"] or counts["errors"]:
            return (f"{counts['failed']} failed and {counts['errors']} errored of "
                    f"{counts['tests']} tests: {named(self.outcomes, ('failed', 'error'))}")
        if counts["passed"] == 0:
            return (f"no test passed ({counts['tests']} tests, {counts['skipped']} skipped)"
                    + (f": {named(self.outcomes, ('skipped',))}" if counts["skipped"] else ""))
        return None


def named(outcomes: Mapping[str, str], wanted: Sequence[str]) -> str:
    found = sorted(test for test, outcome in outcomes.items() if outcome in wanted)
    more = len(found) - NAMED_TESTS
    return ", ".join(found[:NAMED_TESTS]) + (f" and {more} more" if more > 0 else "")


def _outcome(case: Element) -> str:
    tags = {child.tag for child in case}
    if "error" in tags:
        return "error"
    if "failure" in tags:
        return "failed"
    if "skipped" in tags:
        return "skipped"
    return "passed"


def parse_reports(files: Sequence[tuple[str, bytes]]) -> TestReport:
    """The report the `*.xml` files (name, bytes) hold; ReportError when none is there or any
    is unusable."""
    if not files:
        raise ReportError("no-report", "the command wrote no *.xml report into /governor-report")
    total = sum(len(data) for _name, data in files)
    if total > MAX_REPORT_BYTES:
        raise ReportError("bad-report", f"the reports hold {total} bytes; at most "
                                        f"{MAX_REPORT_BYTES}")
    outcomes: dict[str, str] = {}
    for name, data in files:
        try:
            root = fromstring(data, forbid_dtd=True, forbid_entities=True,
                              forbid_external=True)
        except (DefusedXmlException, ParseError, ValueError) as exc:
            raise ReportError("bad-report", f"{name} is not usable XML: {exc}") from None
        if root.tag not in ("testsuites", "testsuite"):
            raise ReportError("bad-report", f"{name} is not a JUnit report (its root is "
                                            f"<{root.tag}>)")
        for case in root.iter("testcase"):
            test = f"{case.get('classname', '')}::{case.get('name', '')}"
            outcomes[test] = _outcome(case)
    return TestReport(outcomes)


def against_baseline(baseline: Mapping[str, str], counted: Mapping[str, str], *,
                     discriminating: bool = False) -> tuple[bool, str]:
    """Rule 14.7: (held, evidence) for a counted run's outcomes against the baseline's; with
    `discriminating` (rule 17.6) it also needs fail-to-pass ≥ 1."""
    ran = {test: outcome for test, outcome in baseline.items() if outcome != "skipped"}
    fail_to_pass = [test for test, outcome in ran.items() if outcome in ("failed", "error")]
    pass_to_pass = [test for test, outcome in ran.items() if outcome == "passed"]
    now = {test: counted.get(test, "missing") for test in ran}
    f2p = sum(1 for test in fail_to_pass if now[test] == "passed")
    p2p = sum(1 for test in pass_to_pass if now[test] == "passed")
    text = (f"fail-to-pass {f2p} of {len(fail_to_pass)}, pass-to-pass {p2p} of "
            f"{len(pass_to_pass)}")
    broken = sorted(test for test in ran if now[test] != "passed")
    if not broken and discriminating and f2p == 0:
        return False, f"{text}; {NOT_DISCRIMINATING}: {NOT_DISCRIMINATING_WHY}"
    if not broken:
        return True, text
    shown = ", ".join(f"{test} ({now[test]})" for test in broken[:NAMED_TESTS])
    more = len(broken) - NAMED_TESTS
    return False, (f"{text}; not passed now: {shown}" + (f" and {more} more" if more > 0
                                                          else ""))

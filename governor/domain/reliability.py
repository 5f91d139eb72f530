"""How reliable the agents are (issue 31): reported outcomes and the facts the reliability page
counts, as plain functions over plain data.

**Reported outcomes.** After a contract ended, a reviewer of its project may say the governor
got it wrong: certified but not done, exhausted but done, should not have abstained, or one
check was brittle. A report is a governor event `reliability/outcome-report`::

    {contractId, terminalReceipt, terminalStatus, kind, check? (brittle-check only), reason,
     reportedBy: {kind: "reviewer", userId}, receipt}
    receipt("outcome-report", it without receipt)

Each kind applies to one terminal status (`REPORT_KINDS`); `brittle-check` to any, naming one
of the contract's checks. The reason is 1..2000 characters after trimming, and is in the event
(it is the evidence the report stands on, chained and exported with it).

**Facts.** Every governor event this server writes yields the rows the reliability page counts
(`event_facts`): one per contract, terminal, failed check of an attempt (a trusted run's check
no run counts for yet has not run, so it has not failed: not counted), trusted run (baseline
runs excluded: they show the state before the work), review decision and report. They are
written with the event and never changed, so a page over any period is a few aggregate queries.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict, cast

from governor.domain.canonical import receipt
from governor.domain.checks import awaits_run
from governor.domain.fields import FieldsInvalid

OUTCOME_REPORT = "reliability/outcome-report"
MAX_REASON_CHARS = 2000
MAX_PERIOD_DAYS = 366
DEFAULT_PERIOD_DAYS = 30

# kind → (the terminal status it applies to, or None for any; what the reviewer says)
REPORT_KINDS: dict[str, tuple[str | None, str]] = {
    "false-certification": ("certified", "certified but not done"),
    "false-exhaustion": ("exhausted", "exhausted but done"),
    "wrong-abstention": ("abstained", "should not have abstained"),
    "brittle-check": (None, "a check was brittle"),
}
# The terminal status each report kind's rate is measured against.
REPORT_DENOMINATORS = {"false-certification": "certified", "false-exhaustion": "exhausted",
                       "wrong-abstention": "abstained", "brittle-check": "ended"}

CONTRACT = "reliability/contract"
ATTEMPT = "reliability/attempt"
TERMINAL = "reliability/terminal"
CODE_VERIFICATION = "reliability/code-verification"
REVIEW_STAGES = {"reliability/intent-review": "intent",
                 "reliability/contract-review": "evidence",
                 "reliability/delivery-review": "delivery"}


class ReportInvalid(FieldsInvalid):
    def __init__(self, path: str, message: str) -> None:
        super().__init__([{"path": path, "message": message}])


def report_kinds_for(status: str) -> list[str]:
    """The report kinds a terminal of `status` can receive, in REPORT_KINDS order."""
    return [kind for kind, (applies, _) in REPORT_KINDS.items() if applies in (None, status)]


class ReportedBy(TypedDict):
    kind: str
    userId: int


class OutcomeReport(TypedDict):
    """`reliability/outcome-report`: a reviewer's word on how an ended contract turned out."""

    contractId: str
    terminalReceipt: str
    terminalStatus: str
    kind: str
    check: NotRequired[str]
    reason: str
    reportedBy: ReportedBy
    receipt: str


def report_payload(*, contract: Mapping[str, Any], terminal: Mapping[str, Any], kind: Any,
                   reason: object, check: object, user_id: int) -> OutcomeReport:
    """The `reliability/outcome-report` data for a report on `terminal` (of `contract`), or
    `ReportInvalid` naming the field and the reason."""
    if kind not in REPORT_KINDS:
        raise ReportInvalid("kind", f"must be one of {', '.join(REPORT_KINDS)}")
    applies, said = REPORT_KINDS[kind]
    status = terminal.get("status")
    if applies is not None and status != applies:
        raise ReportInvalid("kind", f'"{said}" is for a {applies} contract; this one is {status}')
    if type(reason) is not str or not reason.strip():
        raise ReportInvalid("reason", "is required: say what the governor got wrong")
    text = reason.strip()
    if len(text) > MAX_REASON_CHARS:
        raise ReportInvalid("reason", f"is {len(text)} characters; at most {MAX_REASON_CHARS}")
    payload: dict[str, object] = {
        "contractId": contract["contractId"], "terminalReceipt": terminal["receipt"],
        "terminalStatus": status, "kind": kind,
    }
    if kind == "brittle-check":
        ids = [str(item.get("id")) for item in contract.get("checks", [])
               if isinstance(item, dict)]
        if type(check) is not str or not check:
            raise ReportInvalid("check", "is required for a brittle check: name the check")
        if check not in ids:
            raise ReportInvalid("check", f"{check!r} is not a check of contract "
                                         f"{contract['contractId']}")
        payload["check"] = check
    elif check not in (None, ""):
        raise ReportInvalid("check", "is only for a brittle-check report")
    payload["reason"] = text
    payload["reportedBy"] = {"kind": "reviewer", "userId": user_id}
    payload["receipt"] = receipt("outcome-report", payload)
    return cast(OutcomeReport, payload)


@dataclass(frozen=True)
class Fact:
    """One row the reliability page counts (see the module docstring)."""

    kind: str  # contract | terminal | check | run | review | report
    name: str = ""  # check id, profile id, review stage, report kind
    status: str = ""  # terminal status, check kind, run outcome, review decision, status reported
    value: int | None = None  # terminal: attempts; run: duration ms; review: ms to decide
    contract_id: str = ""


def event_facts(event_type: str, data: Mapping[str, Any], *, attempts: int,
                proposed_ms: int | None = None, at_ms: int = 0) -> list[Fact]:
    """The facts a governor event yields. `attempts`: the current contract's attempts after
    the event (a terminal's count); `proposed_ms`: when a decided review's proposal was made."""
    contract_id = str(data.get("contractId") or "")
    if event_type == CONTRACT:
        reviewed = isinstance(data.get("review"), dict) and data["review"].get("reviewed") is True
        return [Fact("contract", "reviewed" if reviewed else "unreviewed",
                     contract_id=contract_id)]
    if event_type == TERMINAL:
        return [Fact("terminal", status=str(data.get("status")), value=attempts,
                     contract_id=contract_id)]
    if event_type == ATTEMPT:
        results: Sequence[object] = data.get("results") or []
        return [Fact("check", str(result.get("id")), str(result.get("kind")),
                     value=int(data.get("attempt") or 0), contract_id=contract_id)
                for result in results
                if isinstance(result, dict) and not result.get("passed") and not awaits_run(result)]
    if event_type == CODE_VERIFICATION:
        if data.get("baseline") is True:
            return []
        outcome = "passed" if data.get("passed") is True else str(data.get("failureKind")
                                                                   or "failed")
        duration = data.get("durationMs")
        return [Fact("run", str(data.get("profile")), outcome,
                     value=duration if type(duration) is int else None)]
    if event_type in REVIEW_STAGES:
        waited = None if proposed_ms is None else max(0, at_ms - proposed_ms)
        return [Fact("review", REVIEW_STAGES[event_type], str(data.get("decision")),
                     value=waited)]
    if event_type == OUTCOME_REPORT:
        return [Fact("report", str(data.get("kind")), str(data.get("terminalStatus")),
                     contract_id=contract_id)]
    return []


# --- the period a page shows -----------------------------------------------------------------

@dataclass(frozen=True)
class Period:
    """Whole days, `first` to `last` inclusive, in UTC."""

    first: datetime.date
    last: datetime.date

    @property
    def start(self) -> datetime.datetime:
        return datetime.datetime.combine(self.first, datetime.time(), tzinfo=datetime.UTC)

    @property
    def end(self) -> datetime.datetime:
        """The first instant after the period."""
        return self.start + datetime.timedelta(days=(self.last - self.first).days + 1)

    @property
    def days(self) -> int:
        return (self.last - self.first).days + 1

    def label(self) -> str:
        """'1–30 Nov 2026', '28 Nov – 3 Dec 2026', '20 Dec 2025 – 5 Jan 2026'."""
        first, last = self.first, self.last
        if (first.year, first.month) == (last.year, last.month):
            days = f"{first.day}" if first == last else f"{first.day}–{last.day}"
            return f"{days} {last:%b %Y}"
        if first.year == last.year:
            return f"{first.day} {first:%b} – {last.day} {last:%b %Y}"
        return f"{first.day} {first:%b %Y} – {last.day} {last:%b %Y}"


def period_from(raw_first: object, raw_last: object, *, today: datetime.date) -> Period:
    """The period the query names (`from`, `to`: YYYY-MM-DD, both optional): by default the
    DEFAULT_PERIOD_DAYS days ending today. Refusals name the field."""
    def parse(name: str, raw: object) -> datetime.date | None:
        if raw in (None, ""):
            return None
        try:
            return datetime.date.fromisoformat(str(raw))
        except ValueError:
            raise ReportInvalid(name, f"{str(raw)[:40]!r} is not a date (YYYY-MM-DD)") from None

    last = parse("to", raw_last) or today
    first = parse("from", raw_first) or last - datetime.timedelta(days=DEFAULT_PERIOD_DAYS - 1)
    if first > last:
        raise ReportInvalid("from", f"{first} is after to ({last})")
    if (last - first).days + 1 > MAX_PERIOD_DAYS:
        raise ReportInvalid("from", f"the period is {(last - first).days + 1} days; at most "
                                    f"{MAX_PERIOD_DAYS}")
    return Period(first, last)


def measured_rate(count: int, total: int, *, what: str, said: str, period: Period) -> str:
    """A rate as a count of a total over a period — never a bare percentage:
    '2 of 41 certified contracts reported certified but not done, 1–30 Nov 2026'."""
    noun = "contract" if total == 1 else "contracts"
    return f"{count} of {total} {what} {noun} reported {said}, {period.label()}"


def median_window(count: int) -> tuple[int, int]:
    """(offset, limit) of the middle value(s) of `count` ordered values: one when the count is
    odd, two when it is even (none when it is 0)."""
    if count <= 0:
        return 0, 0
    return (count - 1) // 2, 1 if count % 2 else 2


def median(middle: Sequence[int]) -> float | None:
    """The median from the middle value(s) `median_window` selects (None when empty)."""
    if not middle:
        return None
    return sum(middle) / len(middle)

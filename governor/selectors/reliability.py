"""The reliability page's reads (issue 31): over a period, what the governed agents of one
project did and how it turned out, from the day counts (`ReliabilityDay`) and, for medians and
reports, `ReliabilityFact` rows — a fixed number of aggregate queries whatever the number of
sessions (benchmark B12). Nothing here writes."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, Sum

from governor.domain import reliability
from governor.domain.reliability import REPORT_DENOMINATORS, REPORT_KINDS, Period
from governor.models import (
    AgentToken,
    Change,
    Event,
    Project,
    ReliabilityDay,
    ReliabilityFact,
    Session,
)

TOP_CHECKS = 10
REVIEW_STAGES = ("intent", "evidence", "delivery")
DECISIONS = ("approved", "revision-requested", "rejected", "expired", "cancelled")
OUTCOMES = ("certified_first", "certified_repair", "exhausted", "abstained")
OUTCOME_LABELS = {"certified_first": "Certified at the first attempt",
                  "certified_repair": "Certified after repair",
                  "exhausted": "Exhausted", "abstained": "Abstained"}


def _token_row(tokens: dict[int, dict[str, Any]], key: int) -> dict[str, Any]:
    if key not in tokens:
        tokens[key] = {"token_key": key, "token": None, "sessions": 0, "contracts": 0,
                       **dict.fromkeys(OUTCOMES, 0), "false_certification": 0}
    return tokens[key]


def reliability_summary(project: Project, period: Period) -> dict[str, Any]:
    """Everything the page, its CSV and its JSON show, in a fixed number of queries. Sessions
    and contracts count when they began in the period; outcomes, runs, decisions and failed
    checks when they happened in it; a report counts in the period of the terminal it is about,
    whenever it was made."""
    days = ReliabilityDay.objects.filter(project=project, day__gte=period.first,
                                         day__lte=period.last)
    facts = ReliabilityFact.objects.filter(project=project, at__gte=period.start,
                                           at__lt=period.end)
    tokens: dict[int, dict[str, Any]] = {}

    # 1. sessions, contracts, terminals, runs and review decisions, from the day counts
    sessions = 0
    contracts = {"total": 0, "reviewed": 0, "unreviewed": 0}
    outcomes = dict.fromkeys(OUTCOMES, 0)
    runs: dict[str, dict[str, Any]] = {}
    reviews: dict[str, dict[str, Any]] = {
        stage: {"stage": stage, "total": 0, "decisions": dict.fromkeys(DECISIONS, 0),
                "median_ms": None} for stage in REVIEW_STAGES}
    for row in (days.exclude(kind="check").values("kind", "name", "status", "token_key")
                .annotate(n=Sum("count"), first=Sum("first")).order_by()):
        kind, n = row["kind"], int(row["n"])
        token = _token_row(tokens, row["token_key"])
        if kind == "session":
            sessions += n
            token["sessions"] += n
        elif kind == "contract":
            contracts["total"] += n
            contracts[row["name"] if row["name"] in contracts else "unreviewed"] += n
            token["contracts"] += n
        elif kind == "terminal":
            status, first = row["status"], int(row["first"])
            if status == "certified":
                counted = {"certified_first": first, "certified_repair": n - first}
            else:
                counted = {status: n} if status in outcomes else {}
            for name, count in counted.items():
                outcomes[name] += count
                token[name] += count
        elif kind == "run":
            profile = runs.setdefault(row["name"], {"profile": row["name"], "runs": 0,
                                                    "failures": 0, "kinds": defaultdict(int)})
            profile["runs"] += n
            if row["status"] != "passed":
                profile["failures"] += n
                profile["kinds"][row["status"]] += n
        elif kind == "review" and row["name"] in reviews:
            stage = reviews[row["name"]]
            stage["total"] += n
            if row["status"] in stage["decisions"]:
                stage["decisions"][row["status"]] += n

    # 2. median time to decide, per stage: the middle one or two values in the order of an
    # index (project, kind, name, value, at), one query each
    for stage in reviews.values():
        offset, limit = reliability.median_window(stage["total"])
        middle = (facts.filter(kind="review", name=stage["stage"], value__isnull=False)
                  .order_by("value").values_list("value", flat=True)[offset:offset + limit])
        stage["median_ms"] = reliability.median([int(value or 0) for value in middle])

    # 3. the checks that fail most
    checks = [{"check": row["name"], "kind": row["status"], "failures": int(row["failures"])}
              for row in days.filter(kind="check").values("name", "status")
              .annotate(failures=Sum("count")).order_by("-failures", "name")[:TOP_CHECKS]]

    # 4. reports on the contracts whose terminal was written in the period (`value`: when)
    reported: dict[str, dict[str, int]] = {kind: {"contracts": 0, "reports": 0}
                                           for kind in REPORT_KINDS}
    for row in (ReliabilityFact.objects.filter(
            project=project, kind="report", value__gte=int(period.start.timestamp() * 1000),
            value__lt=int(period.end.timestamp() * 1000))
                .values("name", "token_id")
                .annotate(contracts=Count("contract_id", distinct=True), reports=Count("pk"))
                .order_by()):
        if row["name"] in reported:
            reported[row["name"]]["contracts"] += row["contracts"]
            reported[row["name"]]["reports"] += row["reports"]
        if row["name"] == "false-certification":
            _token_row(tokens, row["token_id"] or 0)["false_certification"] += row["contracts"]

    # 5. the tokens' names
    for pk, name, prefix in AgentToken.objects.filter(pk__in=list(tokens)).values_list(
            "pk", "name", "prefix"):
        tokens[pk]["token"] = f"{name} ({prefix}…)"

    certified = outcomes["certified_first"] + outcomes["certified_repair"]
    totals = {"certified": certified, "exhausted": outcomes["exhausted"],
              "abstained": outcomes["abstained"], "ended": sum(outcomes.values())}
    reports = []
    for kind, (_, said) in REPORT_KINDS.items():
        of = REPORT_DENOMINATORS[kind]
        count = reported[kind]["contracts"]
        reports.append({"kind": kind, "said": said, "contracts": count,
                        "reports": reported[kind]["reports"], "of": of, "total": totals[of],
                        "sentence": reliability.measured_rate(
                            count, totals[of], what=of, said=said, period=period)})
    return {
        "project": project.slug, "period": {"from": period.first.isoformat(),
                                            "to": period.last.isoformat(),
                                            "label": period.label(), "days": period.days},
        "sessions": sessions, "contracts": contracts,
        "outcomes": outcomes, "ended": totals["ended"],
        "reviews": list(reviews.values()),
        "runs": sorted(({**run, "kinds": dict(sorted(run["kinds"].items()))}
                        for run in runs.values()),
                       key=lambda run: (-run["failures"], run["profile"])),
        "checks": checks,
        "tokens": sorted(({key: value for key, value in row.items() if key != "token_key"}
                          for row in tokens.values()),
                         key=lambda row: (-row["sessions"] - row["contracts"],
                                          row["token"] or "")),
        "reports": reports,
        "false_certification": reports[0],
        "gate": gated_changes(project, period),
    }


def gated_changes(project: Project, period: Period) -> dict[str, Any]:
    """rules §19: the changes gated at the pull request in the period (by when they were
    gated), in one query: decided ones by verdict, the not-certified ones by each rule a
    finding named, and how many were in observe mode (counted in the verdicts too)."""
    counted: dict[str, Any] = {"total": 0, "certified": 0, "not_certified": 0, "running": 0,
                               "observe": 0, "by_rule": {}}
    rows = (Change.objects.filter(project=project, created_at__gte=period.start,
                                  created_at__lt=period.end)
            .values("verdict", "observe", "rules").annotate(n=Count("id")).order_by())
    for row in rows:
        n = int(row["n"])
        counted["total"] += n
        counted["observe"] += n if row["observe"] else 0
        verdict = row["verdict"] or "running"
        counted[verdict.replace("-", "_")] += n
        for rule in row["rules"] or []:
            counted["by_rule"][rule] = counted["by_rule"].get(rule, 0) + n
    counted["by_rule"] = dict(sorted(counted["by_rule"].items()))
    return counted


def session_reports(session: Session, status: Mapping[str, Any]) -> dict[str, object]:
    """The reports on `session` (every contract's, oldest first, with who made them), and what
    a new report can say about its ended contract (`status`: its `session_status`)."""
    rows = list(Event.objects.filter(session=session, type=reliability.OUTCOME_REPORT)
                .order_by("seq").values("seq", "time", "data"))
    names = dict(get_user_model().objects.filter(
        pk__in={row["data"].get("reportedBy", {}).get("userId") for row in rows})
        .values_list("pk", "username"))
    reports = [{**row["data"], "seq": row["seq"], "time": row["time"],
                "said": REPORT_KINDS.get(row["data"].get("kind"), ("", "?"))[1],
                "reporter": names.get(row["data"].get("reportedBy", {}).get("userId"))}
               for row in rows]
    terminal, contract = status.get("terminal"), status.get("contract")
    reportable = terminal is not None and contract is not None and not terminal["imported"]
    return {"reports": reports, "report_kinds": [
        (kind, REPORT_KINDS[kind][1]) for kind in reliability.report_kinds_for(
            str(terminal["status"]))] if reportable and terminal else [],
            "report_checks": [str(check.get("id")) for check in contract.get("checks", [])]
            if reportable and contract else []}

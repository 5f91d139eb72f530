"""The reliability page's reads (issue 31): over a period, what the governed agents of one
project did and how it turned out, from `ReliabilityFact` rows and sessions — a fixed number of
aggregate queries whatever the number of rows (benchmark B12). Nothing here writes."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Count, Exists, OuterRef, Q

from governor.domain import reliability
from governor.domain.reliability import REPORT_DENOMINATORS, REPORT_KINDS, Period
from governor.models import Event, Project, ReliabilityFact, Session

TOP_CHECKS = 10
REVIEW_STAGES = ("intent", "evidence", "delivery")
DECISIONS = ("approved", "revision-requested", "rejected", "expired", "cancelled")
OUTCOMES = ("certified_first", "certified_repair", "exhausted", "abstained")
OUTCOME_LABELS = {"certified_first": "Certified at the first attempt",
                  "certified_repair": "Certified after repair",
                  "exhausted": "Exhausted", "abstained": "Abstained"}


def _token_row(tokens: dict[Any, dict[str, Any]], key: Any, name: Any,
               prefix: Any) -> dict[str, Any]:
    if key not in tokens:
        tokens[key] = {"token": None if key is None else f"{name} ({prefix}…)",
                       "sessions": 0, "contracts": 0, **dict.fromkeys(OUTCOMES, 0),
                       "false_certification": 0}
    return tokens[key]


def reliability_summary(project: Project, period: Period) -> dict[str, Any]:
    """Everything the page, its CSV and its JSON show. Contracts count when they began in the
    period; outcomes, runs, decisions and failed checks when they happened in it; a report
    counts against the period its terminal fell in."""
    facts = ReliabilityFact.objects.filter(project=project, at__gte=period.start,
                                           at__lt=period.end)
    tokens: dict[Any, dict[str, Any]] = {}

    # 1. sessions, per agent token
    sessions = 0
    for row in (Session.objects.filter(project=project, imported=False,
                                       created_at__gte=period.start, created_at__lt=period.end)
                .values("created_by", "created_by__name", "created_by__prefix")
                .annotate(n=Count("pk")).order_by()):
        sessions += row["n"]
        _token_row(tokens, row["created_by"], row["created_by__name"],
                   row["created_by__prefix"])["sessions"] += row["n"]

    # 2. contracts, terminals, runs and review decisions, grouped (checks are counted apart:
    # their ids are many)
    contracts = {"total": 0, "reviewed": 0, "unreviewed": 0}
    outcomes = dict.fromkeys(OUTCOMES, 0)
    runs: dict[str, dict[str, Any]] = {}
    reviews: dict[str, dict[str, Any]] = {stage: {"stage": stage, "total": 0, "timed": 0,
                       "decisions": dict.fromkeys(DECISIONS, 0), "median_ms": None}
               for stage in REVIEW_STAGES}
    for row in (facts.filter(kind__in=("contract", "terminal", "run", "review"))
                .values("kind", "name", "status", "token", "token__name", "token__prefix")
                .annotate(n=Count("pk"), first=Count("pk", filter=Q(value=1)),
                          timed=Count("value")).order_by()):
        kind, n = row["kind"], row["n"]
        token = _token_row(tokens, row["token"], row["token__name"], row["token__prefix"])
        if kind == "contract":
            contracts["total"] += n
            contracts[row["name"] if row["name"] in contracts else "unreviewed"] += n
            token["contracts"] += n
        elif kind == "terminal":
            status = row["status"]
            if status == "certified":
                counted = {"certified_first": row["first"], "certified_repair": n - row["first"]}
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
        elif row["name"] in reviews:
            stage = reviews[row["name"]]
            stage["total"] += n
            stage["timed"] += row["timed"]
            if row["status"] in stage["decisions"]:
                stage["decisions"][row["status"]] += n

    # 3. median time to decide, per stage: the middle one or two values, one query each
    for stage in reviews.values():
        offset, limit = reliability.median_window(stage["timed"])
        middle = (facts.filter(kind="review", name=stage["stage"], value__isnull=False)
                  .order_by("value").values_list("value", flat=True)[offset:offset + limit])
        stage["median_ms"] = reliability.median([int(value or 0) for value in middle])

    # 4. the checks that fail most
    checks = [{"check": row["name"], "kind": row["status"], "failures": row["failures"],
               "contracts": row["contracts"]}
              for row in facts.filter(kind="check").values("name", "status")
              .annotate(failures=Count("pk"), contracts=Count("contract_id", distinct=True))
              .order_by("-failures", "name")[:TOP_CHECKS]]

    # 5. reports on the contracts that ended in the period, whenever they were made
    ended_in_period = facts.filter(kind="terminal", session=OuterRef("session"),
                                   contract_id=OuterRef("contract_id"))
    reported: dict[str, dict[str, int]] = {kind: {"contracts": 0, "reports": 0}
                                           for kind in REPORT_KINDS}
    for row in (ReliabilityFact.objects.filter(project=project, kind="report")
                .filter(Exists(ended_in_period))
                .values("name", "token", "token__name", "token__prefix")
                .annotate(contracts=Count("contract_id", distinct=True), reports=Count("pk"))
                .order_by()):
        if row["name"] in reported:
            reported[row["name"]]["contracts"] += row["contracts"]
            reported[row["name"]]["reports"] += row["reports"]
        if row["name"] == "false-certification":
            _token_row(tokens, row["token"], row["token__name"],
                       row["token__prefix"])["false_certification"] += row["contracts"]

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
        "tokens": sorted(tokens.values(), key=lambda row: (-row["sessions"] - row["contracts"],
                                                           row["token"] or "")),
        "reports": reports,
        "false_certification": reports[0],
    }


def session_reports(session: Session, status: dict[str, Any]) -> dict[str, Any]:
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

"""The reliability page (issue 31) and reported outcomes: for a project's reviewers and
operators, how often "done" was really done over a period, with its CSV and JSON; and the form
on an ended session's timeline where a reviewer reports how it really turned out. They parse,
authorise, read through governor/selectors or write through one service, and render. Included
from governor/urls.py under `projects/`; the report form posts to `sessions/<id>/reports`."""

from __future__ import annotations

import csv
import datetime
import io
import json
import uuid
from collections.abc import Iterator
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_POST

from governor import pages_changes
from governor.domain.reliability import REPORT_KINDS, ReportInvalid, period_from
from governor.lib.errors import Conflict, Invalid, NotFound
from governor.lib.live import MemberRequest
from governor.selectors.access import (
    is_reviewer,
    member_projects,
    project_for_member,
    session_for_member,
)
from governor.selectors.reliability import OUTCOME_LABELS, OUTCOMES, reliability_summary
from governor.services.outcomes import outcome_report

app_name = "projects"
FORMATS = {"html", "csv", "json"}


def _not_a_member(request: HttpRequest, slug: str) -> HttpResponse:
    """A clear page, not a bare "Not Found": the project does not exist for this user (it is
    not told apart from one they are not a member of)."""
    return render(request, "projects/not_member.html", {"slug": slug}, status=404)


@login_required
@require_GET
def project_list(request: MemberRequest) -> HttpResponse:
    """The projects the user reviews or operates, each with its reliability page."""
    projects = member_projects(request.user).order_by("slug")
    return render(request, "projects/list.html", {"projects": projects})


@login_required
@require_GET
def reliability(request: MemberRequest, slug: str) -> HttpResponse:
    try:
        project = project_for_member(request.user, slug)
    except NotFound:
        return _not_a_member(request, slug)
    wanted = request.GET.get("format", "html")
    try:
        if wanted not in FORMATS:
            raise ReportInvalid("format", f"must be one of {', '.join(sorted(FORMATS))}")
        period = period_from(request.GET.get("from"), request.GET.get("to"),
                             today=datetime.datetime.now(datetime.UTC).date())
    except ReportInvalid as exc:
        if wanted in ("csv", "json"):
            return HttpResponse(json.dumps({"error": {"code": "VALIDATION", "message": str(exc),
                                                      "details": exc.errors}}),
                                status=422, content_type="application/json")
        return render(request, "projects/reliability.html",
                      {"project": project, "refusal": exc.errors,
                       "query": {"from": request.GET.get("from", ""),
                                 "to": request.GET.get("to", "")}}, status=400)
    summary = reliability_summary(project, period)
    filename = f"reliability-{project.slug}-{period.first}-{period.last}"
    if wanted == "json":
        response = HttpResponse(json.dumps(summary, indent=2) + "\n",
                                content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="{filename}.json"'
        return response
    if wanted == "csv":
        response = HttpResponse(_csv(summary), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{filename}.csv"'
        return response
    return render(request, "projects/reliability.html", {
        "project": project, "summary": summary, "bars": _outcome_bars(summary),
        "query": {"from": period.first.isoformat(), "to": period.last.isoformat()},
        "downloads": {name: f"?from={period.first}&to={period.last}&format={name}"
                      for name in ("csv", "json")}})


def _percent(part: int, whole: int) -> float:
    return round(100 * part / whole, 1) if whole else 0.0


def _outcome_bars(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """One bar per outcome: its label, count, share of the ended contracts (the bar's width)
    and a pattern, so the chart reads without colour."""
    ended = summary["ended"]
    return [{"name": name, "label": OUTCOME_LABELS[name], "count": summary["outcomes"][name],
             "width": _percent(summary["outcomes"][name], ended), "of": ended}
            for name in OUTCOMES]


def _csv_rows(summary: dict[str, Any]) -> Iterator[list[Any]]:
    """One measure a row: section, item, measure, value (the JSON holds the same numbers)."""
    period = summary["period"]
    yield ["section", "item", "measure", "value"]
    yield ["period", "", "from", period["from"]]
    yield ["period", "", "to", period["to"]]
    yield ["sessions", "", "started", summary["sessions"]]
    for name, count in summary["contracts"].items():
        yield ["contracts", name, "begun", count]
    for name in OUTCOMES:
        yield ["outcomes", name, "contracts", summary["outcomes"][name]]
    for stage in summary["reviews"]:
        for decision, count in stage["decisions"].items():
            yield ["reviews", stage["stage"], decision, count]
        yield ["reviews", stage["stage"], "median_ms_to_decide",
               "" if stage["median_ms"] is None else stage["median_ms"]]
    for run in summary["runs"]:
        yield ["runs", run["profile"], "runs", run["runs"]]
        yield ["runs", run["profile"], "failures", run["failures"]]
        for kind, count in run["kinds"].items():
            yield ["runs", run["profile"], f"failures_{kind}", count]
    for check in summary["checks"]:
        yield ["checks", check["check"], "failures", check["failures"]]
    for token in summary["tokens"]:
        name = token["token"] or "(no token)"
        for measure in ("sessions", "contracts", *OUTCOMES, "false_certification"):
            yield ["tokens", name, measure, token[measure]]
    for report in summary["reports"]:
        yield ["reports", report["kind"], "contracts", report["contracts"]]
        yield ["reports", report["kind"], f"of_{report['of']}", report["total"]]
    gate = summary["gate"]
    for measure in ("total", "certified", "not_certified", "running", "observe"):
        yield ["gate", "", measure, gate[measure]]
    for rule, count in gate["by_rule"].items():
        yield ["gate", rule, "not_certified", count]


def _csv(summary: dict[str, Any]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    for row in _csv_rows(summary):
        # A cell a spreadsheet would run as a formula (a check id like "=1+1") is quoted.
        writer.writerow([f"'{cell}" if isinstance(cell, str) and cell and cell[0] in "=+-@\t\r"
                         else cell for cell in row])
    return out.getvalue()


@login_required
@require_POST
def report_post(request: MemberRequest, session_id: uuid.UUID) -> HttpResponse:
    """A reviewer's report on an ended session (the form on its timeline)."""
    try:
        session = session_for_member(request.user, session_id)
    except NotFound:
        return render(request, "projects/report_refused.html", {"errors": [
            {"path": "session", "message": "no such session in a project you review"}]},
            status=404)
    if not is_reviewer(request.user, session.project_id):
        return render(request, "projects/report_refused.html", {
            "session": session, "errors": [{"path": "user", "message":
                                            "only a reviewer of this project can report"}]},
            status=403)
    try:
        payload = outcome_report(session=session, user=request.user,
                                 kind=request.POST.get("kind"),
                                 reason=request.POST.get("reason"),
                                 check=request.POST.get("check"))
    except (Invalid, Conflict) as exc:
        return render(request, "projects/report_refused.html",
                      {"session": session, "errors": exc.details or [{"path": "",
                                                                      "message": exc.message}],
                       "posted": request.POST},
                      status=409 if isinstance(exc, Conflict) else 400)
    messages.success(request, f'Reported "{REPORT_KINDS[payload["kind"]][1]}": recorded in the '
                              "session log and counted on the reliability page.")
    return redirect(reverse("sessions:timeline", args=[session.pk]) + "#reports")


urlpatterns = [
    path("", project_list, name="list"),
    path("<slug:slug>/reliability", reliability, name="reliability"),
    path("<slug:slug>/changes/", pages_changes.change_list, name="changes"),
    path("<slug:slug>/changes/<uuid:change_id>/", pages_changes.change_page, name="change"),
]

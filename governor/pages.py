"""The session pages (docs/architecture.md): the sessions list, the timeline and its live part, the
changes and the downloads, for the members of a session's project. They parse, authorise, read
through governor/selectors and render. Included from governor/urls.py under `sessions/`."""

from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.paginator import Paginator
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseForbidden,
    StreamingHttpResponse,
)
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_POST

from governor.domain.export import export_filename
from governor.domain.treediff import as_text
from governor.forms import SessionFilter
from governor.lib.downloads import NDJSON, attachment, file_response
from governor.lib.errors import ServiceError, Unavailable
from governor.lib.highlight import highlighted_lines
from governor.lib.live import MemberRequest, Shown, live_answer, live_url, signed_in_live
from governor.lib.notify import session_topic
from governor.lib.waits import off_thread
from governor.models import Session
from governor.selectors.access import is_reviewer, member_projects, session_for_member
from governor.selectors.heldout import session_suites
from governor.selectors.outcomes import outcome_panel, outcome_version
from governor.selectors.reliability import session_reports
from governor.selectors.reviews import budget_panel
from governor.selectors.sessions import session_status
from governor.selectors.timeline import (
    ALL_DIFFED,
    SESSIONS_PER_PAGE,
    SESSIONS_SCANNED,
    attempt_changes,
    changes_between,
    contract_shown,
    conversation_window,
    events_window,
    session_runs,
    sessions_described,
    sessions_listed,
    timeline_version,
)
from governor.selectors.treediff import DIFF_BLOB_BYTES, tree_file
from governor.services.exports import export_bytes
from governor.services.outcome_contracts import outcome_observe
from reviews.models import Review
from reviews.views import diff_view

app_name = "sessions"




# --- live parts: a fragment of a page that waits on the server for its next change ------------



























def _seq(request: HttpRequest, name: str) -> int | None:
    """The seq the query parameter `name` names (`before`, `since`); None when absent or not
    one."""
    raw = request.GET.get(name, "")
    return int(raw) if raw.isascii() and raw.isdigit() else None






def _live_runs(session: Session, *, since: int | None, delay: int = 0) -> dict[str, object]:
    """The timeline's live part: the runs, and how many events were appended since the page
    was loaded (at seq `since`). Its version is read before what it shows, so a change in
    between is shown at the next wait, never missed."""
    next_seq, version = timeline_version(session.pk)
    since = next_seq if since is None else since
    return {"session": session, **session_runs(session), "appended": max(0, next_seq - since),
            "live": {"url": live_url("sessions:timeline_live", session.pk, version=version,
                                     since=since), "delay": delay}}


def _outcome_part(session: Session, *, reviewer: bool, delay: int = 0) -> dict[str, object]:
    """The outcome panel; while an observation asked for is on its way, a live part that
    waits for it (its version read before what it shows, as the runs' is)."""
    outcome = outcome_panel(session)
    live = None
    if outcome and outcome["requested"]:
        version = outcome_version(session)
        outcome = outcome_panel(session)
        live = {"url": live_url("sessions:outcome_live", session.pk, version=version),
                "delay": delay}
    return {"session": session, "outcome": outcome, "outcome_live": live,
            "is_reviewer": reviewer}


@login_required
@require_GET
def session_timeline(request: MemberRequest, session_id: uuid.UUID) -> HttpResponse:
    return _timeline(request, session_for_member(request.user, session_id))


def _timeline(request: MemberRequest, session: Session, *, observe_refused: str = "",
              status_code: int = 200) -> HttpResponse:
    status = session_status(session)
    reviews = (Review.objects.filter(session=session).defer("plan", "proposal")
               .select_related("decided_by")
               .prefetch_related("approvals__user", "signatures__passkey",
                                 "signatures__user").order_by("created_at"))
    reviewer = is_reviewer(request.user, session.project_id)
    context = {
        "session": session, "status": status, "contract": contract_shown(status),
        "reviews": reviews,
        **events_window(session, _seq(request, "before")), **conversation_window(session),
        "changes": changes_between(session, status), "diff_view": diff_view(request),
        "attempt_changes": attempt_changes(session, status["contract"], status["attempts"]),
        **budget_panel(session, status),
        **(live_runs := _live_runs(session, since=None)), **session_reports(session, status),
        **_outcome_part(session, reviewer=reviewer), "observe_refused": observe_refused,
        "heldout_suites": session_suites(
            session, [row["run"] for row in live_runs["runs"]]),  # type: ignore[attr-defined]
    }
    return render(request, "sessions/timeline.html", context, status=status_code)


@login_required
@require_POST
def session_outcome_observe(request: MemberRequest, session_id: uuid.UUID) -> HttpResponse:
    """A reviewer asks for an outcome observation now; back to the timeline's outcome panel."""
    session = session_for_member(request.user, session_id)
    if not is_reviewer(request.user, session.project_id):
        return HttpResponseForbidden("only the project's reviewers may observe the outcome")
    try:
        outcome_observe(session=session, trigger="reviewer")
    except ServiceError as exc:  # a broker that is down is the server's, not the request's
        return _timeline(request, session, observe_refused=str(exc),
                         status_code=503 if isinstance(exc, Unavailable) else 409)
    return redirect(reverse("sessions:timeline", args=[session.pk]) + "#outcome")


@signed_in_live
async def session_timeline_live(request: HttpRequest, user: User,
                                session_id: uuid.UUID) -> HttpResponse:
    """The timeline's live part (`sessions/partials/runs.html`) once the session changes."""
    session = await off_thread(request, session_for_member, user, session_id)
    since = _seq(request, "since")
    return await live_answer(
        request, user=user, topics=[session_topic(session.pk)],
        shown=lambda: Shown(timeline_version(session.pk)[1]),
        fragment=lambda delay: render(request, "sessions/partials/runs.html",
                                      _live_runs(session, since=since, delay=delay)))


@signed_in_live
async def session_outcome_live(request: HttpRequest, user: User,
                               session_id: uuid.UUID) -> HttpResponse:
    """The outcome panel's live part, while an observation asked for is on its way."""
    session = await off_thread(request, session_for_member, user, session_id)
    return await live_answer(
        request, user=user, topics=[session_topic(session.pk)],
        shown=lambda: Shown(outcome_version(session)),
        fragment=lambda delay: render(request, "sessions/partials/outcome.html", _outcome_part(
            session, reviewer=is_reviewer(user, session.project_id), delay=delay)))


@login_required
@require_GET
def session_changes(request: MemberRequest, session_id: uuid.UUID) -> HttpResponse:
    """Every change between the contract-start tree and the tree judged, each diffed."""
    session = session_for_member(request.user, session_id)
    changes = changes_between(session, session_status(session), diffed=ALL_DIFFED, listed=None)
    return render(request, "sessions/changes.html", {"session": session, "changes": changes,
                                                     "diff_view": diff_view(request)})


@login_required
@require_GET
def session_tree_file(request: MemberRequest, session_id: uuid.UUID, tree: str,
                      file_path: str) -> HttpResponse:
    """A file of a kept tree of the session, as an attachment (never rendered)."""
    session = session_for_member(request.user, session_id)
    return file_response(*tree_file(session, tree, file_path))


@login_required
@require_GET
def session_tree_view(request: MemberRequest, session_id: uuid.UUID, tree: str,
                      file_path: str) -> HttpResponse:
    """A file of a kept tree of the session as a page: highlighted, every line numbered and
    anchored (#L<n>), with the download beside it."""
    session = session_for_member(request.user, session_id)
    entry, data = tree_file(session, tree, file_path)
    text = as_text(data) if len(data) <= DIFF_BLOB_BYTES else None
    return render(request, "sessions/file.html", {
        "session": session, "tree": tree, "entry": entry, "size": len(data),
        "lines": None if text is None else highlighted_lines(entry.path, text),
        "binary": as_text(data) is None})


@login_required
@require_GET
def session_export(request: MemberRequest, session_id: uuid.UUID) -> StreamingHttpResponse:
    session = session_for_member(request.user, session_id)
    return attachment(export_bytes(session), export_filename(str(session.id)), NDJSON)




@login_required
@require_GET
def session_list(request: MemberRequest) -> HttpResponse:
    """The sessions of the member's projects, newest first, filtered."""
    projects = member_projects(request.user).order_by("slug")
    form = SessionFilter(request.GET or None, projects)
    valid = form.is_bound and form.is_valid()
    rows = sessions_listed(projects, narrow=form.filter if valid else None,
                           state=form.cleaned_data.get("state", "") if valid else "")
    page = Paginator(rows, SESSIONS_PER_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "sessions/list.html", {
        "form": form, "page": page, "rows": sessions_described(list(page.object_list)),
        "query": query.urlencode(), "scanned": SESSIONS_SCANNED})


urlpatterns = [
    path("", session_list, name="list"),
    path("<uuid:session_id>/", session_timeline, name="timeline"),
    path("<uuid:session_id>/live", session_timeline_live, name="timeline_live"),
    path("<uuid:session_id>/export", session_export, name="export"),
    path("<uuid:session_id>/changes", session_changes, name="changes"),
    path("<uuid:session_id>/outcome/observe", session_outcome_observe, name="observe"),
    path("<uuid:session_id>/outcome/live", session_outcome_live, name="outcome_live"),
    path("<uuid:session_id>/trees/<str:tree>/files/<path:file_path>", session_tree_file,
         name="tree_file"),
    path("<uuid:session_id>/trees/<str:tree>/view/<path:file_path>", session_tree_view,
         name="tree_view"),
]

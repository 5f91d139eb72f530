"""The session timeline page (ARCHITECTURE §6): what happened in one session, for the members of
its project. Included from governor/urls.py under `sessions/`."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import wraps
from typing import Any, cast

from django import forms
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseForbidden,
    HttpResponseNotAllowed,
    StreamingHttpResponse,
)
from django.shortcuts import render
from django.urls import path, reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_GET
from django_htmx.middleware import HtmxDetails

from governor.domain import conversation, lifecycle
from governor.lib.downloads import NDJSON, attachment, file_response
from governor.lib.errors import NotFound, TooManyWaits
from governor.lib.notify import session_topic
from governor.lib.waits import MAX_WAIT_SECONDS, long_poll, off_thread
from governor.models import AgentToken, Event, Project, Session, SessionState
from governor.selectors.access import is_reviewer, member_projects, session_for_member
from governor.selectors.sessions import session_status
from governor.selectors.treediff import TreeChanges, tree_changes, tree_file
from governor.services.events import lifecycle_of
from governor.services.exports import export_bytes, export_filename
from reviews.models import Review
from verification.models import RunState, VerificationRun

app_name = "sessions"


class HtmxHttpRequest(HttpRequest):
    """A request as django-htmx's middleware leaves it: `request.htmx` says whether htmx sent it
    and which element it targets."""

    htmx: HtmxDetails


# --- live parts: a fragment of a page that waits on the server for its next change ------------

LIVE_WAIT_SECONDS = 30  # how long one wait of a page's live part lasts before "unchanged" (204)
LIVE_FALLBACK_SECONDS = 5  # how often a page re-reads when its person holds every wait slot


@dataclass(frozen=True)
class Shown:
    """What a live part shows, as a version to compare, and in how many seconds it changes
    with time alone (a proposal whose time runs out), if it does."""

    version: str
    changes_in: float | None = None


def version_of(*parts: Any) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def live_url(name: str, *args: Any, version: str, **query: Any) -> str:
    """The address a live part waits on: what it shows (`version`) and how long to wait."""
    params = urlencode({**query, "version": version, "wait": LIVE_WAIT_SECONDS})
    return f"{reverse(name, args=args)}?{params}"


async def live_answer(request: HttpRequest, *, user: AbstractBaseUser, topics: Sequence[str],
                      shown: Callable[[], Shown],
                      fragment: Callable[[int], HttpResponse]) -> HttpResponse:
    """The answer to a live part's `?version=…&wait=…`: the fresh `fragment` (200) as soon as
    `shown()` differs from the version the page shows, woken by `topics` (the one long poll,
    governor.lib.waits, with its re-check as the safety net); 204 when nothing changed by
    the end of the wait, so htmx keeps the page as it is and asks again. A person holds at most
    GOVERNOR_MAX_WAITS_PER_USER waits; beyond that the fragment is answered at once, asking to be
    re-read in LIVE_FALLBACK_SECONDS (`fragment(delay)`)."""
    raw = request.GET.get("wait", "0")
    if not (raw.isascii() and raw.isdigit()) or int(raw) > MAX_WAIT_SECONDS:
        return HttpResponseBadRequest(f"wait: whole seconds from 0 to {MAX_WAIT_SECONDS} "
                                      f"expected, not {raw!r}", content_type="text/plain")
    before = request.GET.get("version", "")
    try:
        return await long_poll(
            request, waiter=user, seconds=int(raw), topics=topics, read=shown,
            settled=lambda now: now.version != before, changes_in=lambda now: now.changes_in,
            answer=lambda now: HttpResponse(status=204) if now.version == before else fragment(0))
    except TooManyWaits:
        return await off_thread(request, fragment, LIVE_FALLBACK_SECONDS)


def signed_in_live(view: Callable[..., Any]) -> Callable[..., Any]:
    """A live part's view, called as `view(request, user, …)`: GET only, for a signed-in person.
    Anyone else gets a 403 that tells htmx to reload the page (`HX-Refresh`), whose own login
    check then sends them to sign in; a redirect would put the login form into the live
    part."""
    @wraps(view)
    async def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method != "GET":
            return HttpResponseNotAllowed(["GET"])
        user = await request.auser()
        if not isinstance(user, AbstractBaseUser) or not user.is_authenticated:
            return HttpResponseForbidden("sign in to follow this page",
                                         headers={"HX-Refresh": "true"},
                                         content_type="text/plain")
        response: HttpResponse = await view(request, user, *args, **kwargs)
        return response
    return wrapper


EVENTS_PER_PAGE = 200
SHORT_HASH_CHARS = 12
CONVERSATION_EVENTS = 300
SESSIONS_PER_PAGE = 50
SESSIONS_SCANNED = 500
USER_REQUESTS = 5
TIMELINE_DIFFED = 20  # changed files diffed on the timeline; the changes page lists them all
TIMELINE_LISTED = 50
ALL_DIFFED = 1000
USER_MESSAGES_READ = 100  # plugins may put many reminders in the user's place between requests


def check_parameters(check: dict[str, Any]) -> dict[str, Any]:
    """A check as a reviewer reads it: id, kind and every other field as exact JSON text, so
    whitespace, quotes and types stay visible."""
    return {
        "id": check.get("id"), "kind": check.get("kind"),
        "parameters": [(name, json.dumps(value, ensure_ascii=False))
                       for name, value in check.items() if name not in ("id", "kind")],
    }


def _runs(session: Session) -> dict[str, Any]:
    runs = list(VerificationRun.objects.filter(session=session).select_related("profile")
                .order_by("created_at"))
    rows = []
    for run in runs:
        result = run.result if isinstance(run.result, dict) else {}
        duration = result.get("durationMs")
        if duration is None and run.started_at and run.finished_at:
            duration = int((run.finished_at - run.started_at).total_seconds() * 1000)
        rows.append({
            "run": run, "profile": run.profile.profile_id, "state": run.state,
            "finished": run.state == RunState.FINISHED, "passed": result.get("passed") is True,
            "failure_kind": result.get("failureKind"), "exit_code": result.get("exitCode"),
            "signal": result.get("signal"), "duration_ms": duration,
            "tree": result.get("tree"), "tree_before": result.get("treeBefore"),
            "output_tail": run.output_tail if run.profile.show_output_to_reviewers else None,
        })
    live = any(run.state in (RunState.QUEUED, RunState.RUNNING) for run in runs)
    return {"runs": rows, "runs_live": live}


def _events_page(session: Session, before: int | None) -> dict[str, Any]:
    events = Event.objects.filter(session=session).defer("data", "raw").order_by("-seq")
    if before is not None:
        events = events.filter(seq__lt=before)
    rows = list(events[:EVENTS_PER_PAGE + 1])
    has_older = len(rows) > EVENTS_PER_PAGE
    rows = rows[:EVENTS_PER_PAGE][::-1]
    return {
        "events": [{
            "seq": event.seq, "type": event.type, "origin": event.origin,
            "time": _event_time(event.time),
            "short_hash": event.hash[:SHORT_HASH_CHARS], "hash": event.hash,
            "imported": bool(event.meta and event.meta.get("imported"))
                        and event.type.startswith("reliability/"),
        } for event in rows],
        "older_before": rows[0].seq if has_older and rows else None,
        "paged": before is not None,
    }


def _event_time(milliseconds: int) -> datetime | None:
    """The agent's informational clock; a value no calendar holds is shown as unknown, and so
    is 0, which is what an event sent without a time is stored as."""
    if not milliseconds:
        return None
    try:
        return datetime.fromtimestamp(milliseconds / 1000, tz=UTC)
    except (ValueError, OverflowError, OSError):
        return None


def _conversation(session: Session) -> dict[str, Any]:
    """The latest `CONVERSATION_EVENTS` messages, tool round trips and governor events, read in
    one query whatever their number."""
    rows = list(Event.objects.filter(session=session, type__in=conversation.TYPES)
                .only("seq", "type", "time", "data").order_by("-seq")[:CONVERSATION_EVENTS + 1])
    shown = rows[:CONVERSATION_EVENTS][::-1]
    events = [{"seq": row.seq, "type": row.type, "time": _event_time(row.time),
               "data": row.data} for row in shown]
    return {"conversation": conversation.entries(events),
            "conversation_cut": shown[0].seq if len(rows) > CONVERSATION_EVENTS else None}


def user_requests(session: Session, *, up_to_seq: int | None = None) -> list[dict[str, Any]]:
    """The last `USER_REQUESTS` messages the person typed (not those a plugin put in their
    place), up to `up_to_seq`, oldest first, each capped."""
    events = Event.objects.filter(session=session, type=conversation.USER_MESSAGE)
    if up_to_seq is not None:
        events = events.filter(seq__lte=up_to_seq)
    found = []
    for event in events.only("seq", "time", "data").order_by("-seq")[:USER_MESSAGES_READ]:
        text = conversation.user_request(event.data)
        if text is not None:
            found.append({"seq": event.seq, "time": _event_time(event.time),
                          "body": conversation.capped(text)})
        if len(found) == USER_REQUESTS:
            break
    return found[::-1]


def _seq(request: HttpRequest, name: str) -> int | None:
    """The seq the query parameter `name` names (`before`, `since`); None when absent or not
    one."""
    raw = request.GET.get(name, "")
    return int(raw) if raw.isascii() and raw.isdigit() else None


def _contract(status: dict[str, Any]) -> dict[str, Any] | None:
    contract = status["contract"]
    if contract is None:
        return None
    review = contract.get("review") or {}
    return {**contract, "reviewed": review.get("reviewed") is True,
            "checks_shown": [check_parameters(check) for check in contract.get("checks", [])]}


def _timeline_version(session_id: Any) -> tuple[int, str]:
    """The session's next seq, and the version of what its timeline's live part shows: the
    events appended and the state of each run."""
    next_seq = SessionState.objects.filter(session_id=session_id).values_list(
        "next_seq", flat=True).get()
    runs = list(VerificationRun.objects.filter(session_id=session_id).order_by("created_at")
                .values_list("pk", "state"))
    return next_seq, version_of(next_seq, runs)


def _live_runs(session: Session, *, since: int | None, delay: int = 0) -> dict[str, Any]:
    """The timeline's live part: the runs, and how many events were appended since the page
    was loaded (at seq `since`). Its version is read before what it shows, so a change in
    between is shown at the next wait, never missed."""
    next_seq, version = _timeline_version(session.pk)
    since = next_seq if since is None else since
    return {"session": session, **_runs(session), "appended": max(0, next_seq - since),
            "live": {"url": live_url("sessions:timeline_live", session.pk, version=version,
                                     since=since), "delay": delay}}


@login_required
@require_GET
def session_timeline(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    session = session_for_member(request.user, session_id)
    status = session_status(session)
    reviews = (Review.objects.filter(session=session).defer("plan", "proposal")
               .select_related("decided_by")
               .prefetch_related("approvals__user").order_by("created_at"))
    context = {
        "session": session, "status": status, "contract": _contract(status),
        "reviews": reviews,
        "is_reviewer": is_reviewer(request.user, session.project_id),
        **_events_page(session, _seq(request, "before")), **_conversation(session),
        "changes": _changes(session, status),
        **_live_runs(session, since=None),
    }
    return render(request, "sessions/timeline.html", context)


@signed_in_live
async def session_timeline_live(request: HttpRequest, user: AbstractBaseUser,
                                session_id: uuid.UUID) -> HttpResponse:
    """The timeline's live part (`sessions/partials/runs.html`) once the session changes."""
    session = await off_thread(request, session_for_member, user, session_id)
    since = _seq(request, "since")
    return await live_answer(
        request, user=user, topics=[session_topic(session.pk)],
        shown=lambda: Shown(_timeline_version(session.pk)[1]),
        fragment=lambda delay: render(request, "sessions/partials/runs.html",
                                      _live_runs(session, since=since, delay=delay)))


def judged_trees(status: dict[str, Any]) -> tuple[str, str] | None:
    """(contract-start tree, tree judged last) of the session's contract, when both exist."""
    contract = status.get("contract") or {}
    start = (contract.get("startTree") or {}).get("id")
    judged = ((status.get("terminal") or {}).get("tree") or {}).get("id") or next(
        (attempt["tree"]["id"] for attempt in reversed(status.get("attempts") or [])
         if attempt.get("tree")), None)
    return (start, judged) if start and judged else None


def changes_so_far(session: Session) -> TreeChanges | None:
    """The changes of the session's latest contract from its start tree to the tree its last
    attempt judged, read from the folded lifecycle (one query): what the evidence page of a
    later proposal shows."""
    folded = lifecycle_of(SessionState.objects.only("lifecycle").get(session=session))
    contract = folded["contract"]
    return _changes(session, {"contract": contract["data"] if contract else None,
                              "attempts": [attempt["data"] for attempt in folded["attempts"]]})


def _changes(session: Session, status: dict[str, Any], *, diffed: int = TIMELINE_DIFFED,
             listed: int | None = TIMELINE_LISTED) -> TreeChanges | None:
    trees = judged_trees(status)
    if trees is None:
        return None
    try:
        return tree_changes(session, *trees, diffed=diffed, listed=listed)
    except NotFound:  # a tree recorded before trees were kept
        return None


@login_required
@require_GET
def session_changes(request: HttpRequest, session_id: uuid.UUID) -> HttpResponse:
    """Every change between the contract-start tree and the tree judged, each diffed."""
    session = session_for_member(request.user, session_id)
    changes = _changes(session, session_status(session), diffed=ALL_DIFFED, listed=None)
    return render(request, "sessions/changes.html", {"session": session, "changes": changes})


@login_required
@require_GET
def session_tree_file(request: HttpRequest, session_id: uuid.UUID, tree: str,
                      file_path: str) -> HttpResponse:
    """A file of a kept tree of the session, as an attachment (never rendered)."""
    session = session_for_member(request.user, session_id)
    return file_response(*tree_file(session, tree, file_path))


@login_required
@require_GET
def session_export(request: HttpRequest, session_id: uuid.UUID) -> StreamingHttpResponse:
    session = session_for_member(request.user, session_id)
    return attachment(export_bytes(session), export_filename(session), NDJSON)


class SessionFilter(forms.Form):
    """The sessions list's filters, all optional; the choices are the member's own."""

    q = forms.CharField(required=False, max_length=100, label="Session id or receipt",
                        help_text="A whole session id, or a proposal or decision receipt "
                                  "(sha256:…).")
    project = forms.ModelChoiceField(queryset=Project.objects.none(), required=False,
                                     empty_label="any")
    state = forms.ChoiceField(required=False,
                              choices=[("", "any")] + [(s, s) for s in lifecycle.STATE_NAMES])
    token = forms.ModelChoiceField(queryset=AgentToken.objects.none(), required=False,
                                   label="Agent token", empty_label="any")
    since = forms.DateField(required=False, label="Created on or after",
                            widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, label="Created on or before",
                            widget=forms.DateInput(attrs={"type": "date"}))

    def __init__(self, data: Any, projects: QuerySet[Project]) -> None:
        super().__init__(data)
        cast("forms.ModelChoiceField[Project]", self.fields["project"]).queryset = projects
        cast("forms.ModelChoiceField[AgentToken]", self.fields["token"]).queryset = (
            AgentToken.objects.filter(project__in=projects).select_related("project"))

    def filter(self, sessions: QuerySet[Any, Any]) -> QuerySet[Any, Any]:
        data = self.cleaned_data
        if data["project"]:
            sessions = sessions.filter(project=data["project"])
        if data["token"]:
            sessions = sessions.filter(created_by=data["token"])
        if data["since"]:
            sessions = sessions.filter(created_at__date__gte=data["since"])
        if data["until"]:
            sessions = sessions.filter(created_at__date__lte=data["until"])
        text = data["q"].strip()
        if text.startswith("sha256:"):
            sessions = sessions.filter(pk__in=Review.objects.filter(
                Q(receipt=text) | Q(decision_receipt=text)).values("session_id"))
        elif text:
            try:
                sessions = sessions.filter(pk=uuid.UUID(text))
            except ValueError:
                self.add_error("q", "Not a session id (a UUID) or a receipt (sha256:…).")
                return sessions.none()
        return sessions


@login_required
@require_GET
def session_list(request: HttpRequest) -> HttpResponse:
    """The sessions of the member's projects, newest first, filtered. The state is computed
    from each session's projection, so the state filter looks at the newest
    `SESSIONS_SCANNED` sessions the other filters leave."""
    user: Any = request.user
    projects = member_projects(user).order_by("slug")
    form = SessionFilter(request.GET or None, projects)
    sessions: QuerySet[Any, Any] = (Session.objects.filter(project__in=projects)
                .select_related("project", "created_by", "state").defer("state__trace")
                .annotate(pending=Exists(Review.objects.filter(session=OuterRef("pk"),
                                                               status="pending")))
                .order_by("-created_at"))
    if form.is_bound and form.is_valid():
        sessions = form.filter(sessions)
    wanted = form.cleaned_data.get("state") if form.is_bound and form.is_valid() else ""
    rows = []
    for session in sessions[:SESSIONS_SCANNED]:
        state = lifecycle.state_name(session.state.lifecycle or lifecycle.initial_state(),
                                     review_pending=session.pending)
        if not wanted or state == wanted:
            rows.append({"session": session, "state": state})
    page = Paginator(rows, SESSIONS_PER_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "sessions/list.html", {
        "form": form, "page": page, "rows": page.object_list, "query": query.urlencode(),
        "scanned": SESSIONS_SCANNED})


urlpatterns = [
    path("", session_list, name="list"),
    path("<uuid:session_id>/", session_timeline, name="timeline"),
    path("<uuid:session_id>/live", session_timeline_live, name="timeline_live"),
    path("<uuid:session_id>/export", session_export, name="export"),
    path("<uuid:session_id>/changes", session_changes, name="changes"),
    path("<uuid:session_id>/trees/<str:tree>/files/<path:file_path>", session_tree_file,
         name="tree_file"),
]

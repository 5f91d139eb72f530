"""What the session pages show (the timeline, its live part, the changes, the sessions list):
read in a fixed number of queries whatever the log's length."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypedDict

from django.db.models import Exists, OuterRef, QuerySet, Subquery

from governor.domain import conversation, lifecycle
from governor.domain.changes import (
    PROTECTED_CHECK_ID,
    WorkspaceChange,
    offending,
    workspace_changes,
)
from governor.domain.verification import OPERATOR_KINDS
from governor.lib.errors import NotFound
from governor.lib.live import version_of
from governor.models import Event, Project, Session, SessionState
from governor.selectors.sessions import lifecycle_of
from governor.selectors.treediff import TreeChanges, kept_manifests, sections_read, tree_changes
from reviews.models import Review
from verification.models import RunState, VerificationRun

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


class UserRequest(TypedDict):
    seq: int
    time: datetime | None
    body: conversation.Capped


class AttemptChanges(TypedDict):
    protected: list[WorkspaceChange]
    other: list[WorkspaceChange]
    total: int


def check_parameters(check: Mapping[str, object]) -> dict[str, object]:
    """A check as a reviewer reads it: id, kind and every other field as exact JSON text, so
    whitespace, quotes and types stay visible."""
    return {
        "id": check.get("id"), "kind": check.get("kind"),
        "parameters": [(name, json.dumps(value, ensure_ascii=False))
                       for name, value in check.items() if name not in ("id", "kind")],
    }


def session_runs(session: Session) -> dict[str, object]:
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
            "baseline": run.baseline, "report": result.get("report"),
            "stream": result.get("stream"), "overlay": result.get("overlay"),
            # Who can act on a failure the work did not cause (domain/verification.py): the
            # operator, told why — the run's detail, which names the command the agent's
            # `failureReason` does not.
            "operator_failure": result.get("failureKind") in OPERATOR_KINDS,
            "failure_reason": (run.detail or result.get("failureReason") or "")
            if result.get("failureKind") in OPERATOR_KINDS else "",
            "output_tail": run.output_tail if run.profile.show_output_to_reviewers else None,
        })
    live = any(run.state in (RunState.QUEUED, RunState.RUNNING) for run in runs)
    return {"runs": rows, "runs_live": live}


def events_window(session: Session, before: int | None) -> dict[str, object]:
    events = Event.objects.filter(session=session).defer("data", "raw").order_by("-seq")
    if before is not None:
        events = events.filter(seq__lt=before)
    rows = list(events[:EVENTS_PER_PAGE + 1])
    has_older = len(rows) > EVENTS_PER_PAGE
    rows = rows[:EVENTS_PER_PAGE][::-1]
    return {
        "events": [{
            "seq": event.seq, "type": event.type, "origin": event.origin,
            "time": event_time(event.time),
            "short_hash": event.hash[:SHORT_HASH_CHARS], "hash": event.hash,
            "imported": bool(event.meta and event.meta.get("imported"))
                        and event.type.startswith("reliability/"),
        } for event in rows],
        "older_before": rows[0].seq if has_older and rows else None,
        "paged": before is not None,
    }


def event_time(milliseconds: int) -> datetime | None:
    """The agent's informational clock; a value no calendar holds is shown as unknown, and so
    is 0, which is what an event sent without a time is stored as."""
    if not milliseconds:
        return None
    try:
        return datetime.fromtimestamp(milliseconds / 1000, tz=UTC)
    except (ValueError, OverflowError, OSError):
        return None


def conversation_window(session: Session) -> dict[str, object]:
    """The latest `CONVERSATION_EVENTS` messages, tool round trips and governor events, read in
    one query whatever their number."""
    rows = list(Event.objects.filter(session=session, type__in=conversation.TYPES)
                .only("seq", "type", "time", "data").order_by("-seq")[:CONVERSATION_EVENTS + 1])
    shown = rows[:CONVERSATION_EVENTS][::-1]
    events = [{"seq": row.seq, "type": row.type, "time": event_time(row.time),
               "data": row.data} for row in shown]
    return {"conversation": conversation.entries(events),
            "conversation_cut": shown[0].seq if len(rows) > CONVERSATION_EVENTS else None}


def user_requests(session: Session, *, up_to_seq: int | None = None) -> list[UserRequest]:
    """The last `USER_REQUESTS` messages the person typed (not those a plugin put in their
    place), up to `up_to_seq`, oldest first, each capped."""
    events = Event.objects.filter(session=session, type=conversation.USER_MESSAGE)
    if up_to_seq is not None:
        events = events.filter(seq__lte=up_to_seq)
    found: list[UserRequest] = []
    for event in events.only("seq", "time", "data").order_by("-seq")[:USER_MESSAGES_READ]:
        text = conversation.user_request(event.data)
        if text is not None:
            found.append({"seq": event.seq, "time": event_time(event.time),
                          "body": conversation.capped(text)})
        if len(found) == USER_REQUESTS:
            break
    return found[::-1]


def contract_shown(status: Mapping[str, Any]) -> dict[str, object] | None:
    contract = status["contract"]
    if contract is None:
        return None
    review = contract.get("review") or {}
    return {**contract, "reviewed": review.get("reviewed") is True,
            "checks_shown": [check_parameters(check) for check in contract.get("checks", [])]}


def timeline_version(session_id: uuid.UUID) -> tuple[int, str]:
    """The session's next seq, and the version of what its timeline's live part shows: the
    events appended and the state of each run."""
    next_seq = SessionState.objects.filter(session_id=session_id).values_list(
        "next_seq", flat=True).get()
    runs = list(VerificationRun.objects.filter(session_id=session_id).order_by("created_at")
                .values_list("pk", "state"))
    return next_seq, version_of(next_seq, runs)


def judged_trees(status: Mapping[str, Any]) -> tuple[str, str] | None:
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
    return changes_between(session, {"contract": contract["data"] if contract else None,
                              "attempts": [attempt["data"] for attempt in folded["attempts"]]})


def changes_between(session: Session, status: Mapping[str, Any], *, diffed: int = TIMELINE_DIFFED,
             listed: int | None = TIMELINE_LISTED) -> TreeChanges | None:
    trees = judged_trees(status)
    if trees is None:
        return None
    try:
        return tree_changes(session, *trees, diffed=diffed, listed=listed)
    except NotFound:  # a tree recorded before trees were kept
        return None


def sessions_listed(projects: QuerySet[Project], *,
                    narrow: Callable[[QuerySet[Any, Any]], QuerySet[Any, Any]] | None = None,
                    state: str = "") -> list[dict[str, Any]]:
    """The sessions of `projects`, newest first, narrowed by the list's filters (`narrow`),
    each with its state; only those in `state` when one is asked for. The state is computed
    from each session's projection, so the state filter looks at the newest
    `SESSIONS_SCANNED` sessions the other filters leave."""
    sessions: QuerySet[Any, Any] = (Session.objects.filter(project__in=projects)
                .select_related("project", "created_by", "state").defer("state__trace")
                .annotate(pending=Exists(Review.objects.filter(session=OuterRef("pk"),
                                                               status="pending")),
                          latest_review=Subquery(Review.objects.filter(session=OuterRef("pk"))
                                                 .order_by("-created_at").values("pk")[:1]))
                .order_by("-created_at"))
    if narrow is not None:
        sessions = narrow(sessions)
    rows = []
    for session in sessions[:SESSIONS_SCANNED]:
        shown = lifecycle.state_name(session.state.lifecycle or lifecycle.initial_state(),
                                     review_pending=session.pending)
        if not state or shown == state:
            rows.append({"session": session, "state": shown})
    return rows


# How the list names a session with neither a contract nor a pending proposal, after its last
# proposal's decision: what really happened, rather than "idle".
AFTER_DECISION = {"rejected": "proposal rejected", "revision-requested": "revision requested",
                  "expired": "proposal expired", "cancelled": "proposal withdrawn"}


def sessions_described(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A page of `sessions_listed` rows with each session's objective (its contract's, else
    its latest proposal's) and, for an idle one, what its last decision was: one query."""
    latest = {review.pk: review for review in Review.objects.filter(
        pk__in=[row["session"].latest_review for row in rows if row["session"].latest_review])
        .only("pk", "status", "proposal")}
    described = []
    for row in rows:
        session = row["session"]
        review = latest.get(session.latest_review)
        contract = (session.state.lifecycle or {}).get("contract") or {}
        objective = (contract.get("data") or {}).get("objective") or (
            review.proposal.get("objective") if review is not None else "")
        label = row["state"]
        if label == "idle" and review is not None:
            label = AFTER_DECISION.get(review.status, label)
        described.append({**row, "objective": objective or "", "label": label})
    return described


def attempt_changes(session: Session, contract: Mapping[str, Any] | None,
                    attempts: Sequence[Mapping[str, Any]]) -> dict[int, AttemptChanges]:
    """What each attempt changed since the contract start (rules §14.1), the paths the
    contract protects first: by attempt number, {"protected", "other"} lists of changes (the
    first TIMELINE_LISTED of all) and the total. The manifests are read in one query."""
    if not contract or not contract.get("startTree"):
        return {}
    manifests = kept_manifests(session.project_id, [contract["startTree"]]
                               + [attempt.get("tree") for attempt in attempts])
    start = manifests.get((contract["startTree"]["id"], contract["startTree"]["exclusions"]))
    if start is None:
        return {}
    protected = next((check for check in contract.get("checks", [])
                      if check.get("id") == PROTECTED_CHECK_ID), None)
    shown: dict[int, AttemptChanges] = {}
    for attempt in attempts:
        tree = attempt.get("tree") or {}
        now = manifests.get((str(tree.get("id")), str(tree.get("exclusions"))))
        if now is None:
            continue
        changes = sections_read(session.project_id, start, now, workspace_changes(start, now))
        opened = {change.path for change in offending(protected, changes)} if protected else set()
        listed = changes[:TIMELINE_LISTED]
        shown[attempt["attempt"]] = {
            "protected": [change for change in listed if change.path in opened],
            "other": [change for change in listed if change.path not in opened],
            "total": len(changes)}
    return shown

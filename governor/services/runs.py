"""Verification runs: queue, claim, keep the lease, run in the sandbox, record.
The profiles they run are saved by `governor/services/profiles.py`; the task that
runs one is `verification/tasks.py`, queued here by name."""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from governor.domain import lifecycle
from governor.domain.changes import PROTECTED_CHECK_ID, protected_check
from governor.domain.documents import Check, ContractDocument
from governor.domain.heldout import (
    MAX_ORACLE_OUTPUT_BYTES,
    Case,
    SuiteError,
    oracle_judged,
    oracle_stdin,
)
from governor.domain.profiles import operator_environment, workspace_environment
from governor.domain.runner_control import in_force
from governor.domain.tree import tree_reference
from governor.domain.verification import (
    OPERATOR_KINDS,
    environment_changed_record,
    failure_reason,
    infrastructure_record,
    run_result,
)
from governor.domain.workspace import (
    WorkspaceError,
    open_bound_directory,
    open_directory,
)
from governor.lib import metrics
from governor.lib.errors import Conflict, NotFound, Unavailable
from governor.lib.heldout import heldout_directory
from governor.lib.materialise import tree_changes_apply
from governor.lib.notify import announce_on_commit, run_topic, session_topic
from governor.lib.queue import task_send_on_commit
from governor.lib.reports import report_directory, report_judged
from governor.models import Session, SessionState, WorkspaceKind
from governor.selectors.heldout import (
    suite_agent_view,
    suite_version_cases,
    suite_version_files,
    suites_current,
)
from governor.selectors.snapshots import tree_named
from governor.services.changes import change_judge
from governor.services.events import (
    governor_event_append,
    session_locked,
)
from governor.services.trees import (
    EnvironmentChanged,
    Overlay,
    RunTree,
    TreeUnavailable,
    kept_run_tree,
    operator_environment_problems,
    run_tree,
    tree_written,
)
from verification.models import (
    RunState,
    VerificationRun,
    VerifierProfile,
)
from verification.sandbox import run_sandboxed

log = logging.getLogger(__name__)
RUN_TASK = "verification.tasks.run_verification"
OUTPUT_TAIL_CHARS = 8192
LEASE_OWNER_EXPIRY = "expiry"  # the lease holder while a lost run is being ended


# --- runs ---------------------------------------------------------------------------------------

def run_request(*, session: Session, profile_id: str, tree: str | None = None) -> VerificationRun:
    """Queue a run of the named profile. The agent names a profile, never a command; a snapshot
    session also names its latest snapshot (`tree`, §11.3), which the run runs on."""
    if session.imported:
        raise Conflict("this session was imported: its log is history and runs no verifiers")
    tree_named(session, tree)
    profile = VerifierProfile.objects.filter(project=session.project,
                                             profile_id=profile_id).first()
    if profile is None:
        raise NotFound(f"no verifier profile {profile_id!r} in project {session.project.slug}")
    definition = profile.definition()
    run = VerificationRun.objects.create(session=session, profile=profile,
                                         profile_receipt=profile.receipt,
                                         definition=definition, tree=tree or "",
                                         **suites_current(session.project, definition))

    def unqueued(exc: Exception) -> None:
        run.delete()  # it never started: nothing to record
        log.warning("broker unavailable, run of %s refused: %s", profile_id, exc)
        raise Unavailable("the task broker is unavailable, so the verification cannot be "
                          "queued; the session log is intact — try again later") from None

    task_send_on_commit(RUN_TASK, str(run.pk), on_failure=unqueued)
    runs_baseline_retry(session=session, profile=profile)
    announce_on_commit(session_topic(session.pk))
    return run


def runs_request_baseline(*, session: Session, contract: ContractDocument) -> list[VerificationRun]:
    """§14.7: when a contract whose checks name a report profile activates, one run of each such
    profile on its start tree, marked `baseline` — what the tests did before the work; never
    evidence. Queued once the activation commits; a broker that is down leaves the run queued,
    and it ends as `infrastructure` when no worker takes it (the check then says so)."""
    start = contract.get("startTree")
    if start is None:
        return []
    named = {str(check["profile"]) for check in contract["checks"]
             if check.get("kind") == "code_verification_succeeded"}
    queued = []
    judged = Q(report__gt="") | Q(oracle__gt="")  # a report (§14.7) or per-case verdicts (§18.3)
    for profile in VerifierProfile.objects.filter(judged, project=session.project,
                                                  profile_id__in=named).order_by("profile_id"):
        definition = profile.definition()
        run = VerificationRun.objects.create(
            session=session, profile=profile, profile_receipt=profile.receipt,
            definition=definition, tree=start["id"],
            tree_exclusions=start["exclusions"], baseline=True,
            **suites_current(session.project, definition))
        task_send_on_commit(RUN_TASK, str(run.pk), on_failure=_baseline_unqueued(run))
        queued.append(run)
    if queued:
        announce_on_commit(session_topic(session.pk))
    return queued


def _baseline_due(session: Session, contract: ContractDocument,
                  profile: VerifierProfile) -> bool:
    """Whether the open `contract` needs a new baseline run of the report `profile` (issue 40:
    a contract is never stuck on a baseline that could not run): its latest one on the
    contract-start tree, if any, is not queued or running and either belongs to an earlier
    contract, ran an edited profile (another receipt), or failed for the operator's reason."""
    start = contract.get("startTree")
    if start is None or not profile.report:
        return False
    latest = (VerificationRun.objects.filter(
        session=session, profile=profile, baseline=True, tree=start["id"],
        tree_exclusions=start["exclusions"]).order_by("-created_at").first())
    if latest is None or latest.state != RunState.FINISHED:
        return latest is None
    result = latest.result if isinstance(latest.result, dict) else {}
    return ((latest.event_seq or 0) <= int(contract["startedAtSeq"])
            or latest.profile_receipt != profile.receipt
            or result.get("failureKind") in OPERATOR_KINDS)


def _open_contract(session_id: Any) -> ContractDocument | None:
    folded = SessionState.objects.filter(session_id=session_id).values_list(
        "lifecycle", flat=True).first() or {}
    return folded["contract"]["data"] if folded.get("open") else None


def runs_baseline_retry(*, session: Session, profile: VerifierProfile) -> VerificationRun | None:
    """A new baseline run of `profile` for the session's open contract when one is due
    (`_baseline_due`): asked for with the agent's own run of it, and when the profile is
    edited."""
    contract = _open_contract(session.pk)
    if contract is None or not any(
            check.get("kind") == "code_verification_succeeded"
            and check.get("profile") == profile.profile_id for check in contract["checks"]):
        return None
    if not _baseline_due(session, contract, profile):
        return None
    start = contract["startTree"]
    assert start is not None
    run = VerificationRun.objects.create(
        session=session, profile=profile, profile_receipt=profile.receipt,
        definition=profile.definition(), tree=start["id"],
        tree_exclusions=start["exclusions"], baseline=True)
    task_send_on_commit(RUN_TASK, str(run.pk), on_failure=_baseline_unqueued(run))
    announce_on_commit(session_topic(session.pk))
    log.info("baseline run %s of %s queued again for session %s", run.pk, profile.profile_id,
             session.pk)
    return run


def runs_baseline_retry_edited(*, profile: VerifierProfile) -> list[VerificationRun]:
    """After `profile` was edited: a new baseline run for every open contract of its project
    that names it and whose baseline is due (`runs_baseline_retry`)."""
    if not profile.report:
        return []
    # Only a session with a baseline run of it can hold a contract whose baseline is due: any
    # other contract naming it got its first one at activation.
    sessions = Session.objects.filter(pk__in=VerificationRun.objects.filter(
        profile=profile, baseline=True).values("session_id"), imported=False)
    return [run for session in sessions
            if (run := runs_baseline_retry(session=session, profile=profile)) is not None]


def _baseline_unqueued(run: VerificationRun) -> Callable[[Exception], None]:
    def unqueued(exc: Exception) -> None:
        log.warning("baseline run %s of %s not queued: %s", run.pk, run.profile.profile_id, exc)
    return unqueued


def _lease_end() -> datetime:
    return timezone.now() + timedelta(seconds=settings.GOVERNOR_RUN_LEASE_SECONDS)


def run_claim(run_id: str) -> VerificationRun | None:
    """Compare-and-set queued → running. None when another worker has it or it already ran: a
    redelivered task never runs a command twice."""
    run = VerificationRun.objects.filter(pk=run_id).first()
    if run is None:
        return None
    now = timezone.now()
    claimed = VerificationRun.objects.filter(pk=run_id, state=RunState.QUEUED).update(
        state=RunState.RUNNING, started_at=now, attempts=F("attempts") + 1,
        lease_owner=f"{socket.gethostname()}:{os.getpid()}", lease_expires_at=_lease_end(),
    )
    if not claimed:
        return None
    if run.session_id is None:  # a gated change's run (rules §19.2): no log to be fresh in
        run.refresh_from_db()
        return run
    # Freshness (rule 4.10) is judged from here: any workspace change logged after this seq
    # makes the result stale, however late the run finishes.
    last_seq = SessionState.objects.filter(session_id=run.session_id).values_list(
        "next_seq", flat=True).get() - 1
    VerificationRun.objects.filter(pk=run_id).update(started_after_seq=last_seq)
    run.refresh_from_db()
    announce_on_commit(session_topic(run.session_id))
    return run


@contextmanager
def run_lease_kept(run: VerificationRun) -> Iterator[None]:
    """Renew the claimed run's lease every third of its length while the body runs, from a
    heartbeat thread: a run whose worker dies is then known lost within seconds, however long
    its profile may run. A failed renewal is retried at the next beat."""
    stop = threading.Event()

    def renew() -> None:
        try:
            while not stop.wait(settings.GOVERNOR_RUN_LEASE_SECONDS / 3):
                try:
                    VerificationRun.objects.filter(
                        pk=run.pk, state=RunState.RUNNING, lease_owner=run.lease_owner,
                    ).update(lease_expires_at=_lease_end())
                except DatabaseError as exc:
                    log.warning("run %s: renewing the lease failed: %s", run.pk, exc)
                    connection.close()
        finally:
            connection.close()

    heartbeat = threading.Thread(target=renew, name=f"lease {run.pk}", daemon=True)
    heartbeat.start()
    try:
        yield
    finally:
        stop.set()
        heartbeat.join()


def run_perform(run: VerificationRun) -> None:
    """Execute a claimed run under a kept lease. Whatever fails on the way — recording the
    result included — still ends the run, as an `infrastructure` failure that says why: never a
    pass, and never left for the lease to call it lost."""
    with run_lease_kept(run):
        try:
            run_execute(run)
        except Exception as exc:  # noqa: BLE001 - any failure ends the run with its reason
            log.exception("run %s (%s) failed before its result was recorded", run.pk,
                          run.profile.profile_id)
            why = f"its result could not be recorded: {type(exc).__name__}: {exc}"
            run_finish(run=run, record=_infrastructure(run, why), detail=why)


def run_finish(*, run: VerificationRun, record: dict[str, Any], output_tail: str = "",
               detail: str = "", tests: list[list[str]] | None = None) -> None:
    """Append the result event and end the run, in one transaction. `detail` says why it
    failed, for operators. A text column refuses NUL, so it is stored as U+FFFD (as are bytes
    that are not UTF-8). A gated change's run (no session) appends no event: its change is
    judged once its last run has ended (rules §19.2)."""
    if run.session is None:
        _gate_run_finish(run=run, record=record, output_tail=output_tail, detail=detail,
                         tests=tests)
        return
    with session_locked(run.session) as state:
        locked = VerificationRun.objects.select_for_update().get(pk=run.pk)
        if locked.state == RunState.FINISHED:
            return
        data = run_result(verification_id=str(run.pk), profile=run.profile.profile_id,
                          profile_receipt=run.profile_receipt,
                          started_after_seq=run.started_after_seq, record=record)
        event = governor_event_append(session=run.session, state=state,
                                      type=lifecycle.CODE_VERIFICATION, data=data)
        locked.state = RunState.FINISHED
        locked.result = data
        locked.output_tail = output_tail[-OUTPUT_TAIL_CHARS:].replace("\x00", "\ufffd")
        locked.detail = detail
        locked.event_seq = event.seq
        locked.finished_at = timezone.now()
        locked.tests = tests
        locked.save(update_fields=["state", "result", "output_tail", "detail", "event_seq",
                                   "finished_at", "tests"])
        announce_on_commit(run_topic(run.pk))
        _count(run, data)


def _gate_run_finish(*, run: VerificationRun, record: dict[str, Any], output_tail: str,
                     detail: str, tests: list[list[str]] | None) -> None:
    with transaction.atomic():
        locked = VerificationRun.objects.select_for_update().get(pk=run.pk)
        if locked.state == RunState.FINISHED:
            return
        data = run_result(verification_id=str(run.pk), profile=run.profile.profile_id,
                          profile_receipt=run.profile_receipt, started_after_seq=None,
                          record=record)
        locked.state = RunState.FINISHED
        locked.result = data
        locked.output_tail = output_tail[-OUTPUT_TAIL_CHARS:].replace("\x00", "\ufffd")
        locked.detail = detail
        locked.finished_at = timezone.now()
        locked.tests = tests
        locked.save(update_fields=["state", "result", "output_tail", "detail", "finished_at",
                                   "tests"])
        announce_on_commit(run_topic(run.pk))
        _count(run, data)
        for change_id in locked.changes.values_list("change_id", flat=True).distinct():
            change_judge(change_id=change_id)


def _count(run: VerificationRun, result: dict[str, Any]) -> None:
    profile, project = run.profile.profile_id, run.profile.project.slug
    outcome = "passed" if result.get("passed") else str(result.get("failureKind") or "failed")
    seconds = int(result.get("durationMs") or 0) / 1000

    def record() -> None:
        metrics.RUNS.labels(profile=profile, outcome=outcome, project=project).inc()
        metrics.RUN_DURATION.labels(profile=profile, outcome=outcome).observe(seconds)
    metrics.count_on_commit(record)


def _infrastructure(run: VerificationRun, why: str) -> dict[str, Any]:
    log.warning("run %s (%s) failed as infrastructure: %s", run.pk, run.profile.profile_id, why)
    return infrastructure_record(run.definition["sandboxMode"], baseline=run.baseline,
                                 reason=why)


def runs_expire_lost(*, run_id: Any = None) -> int:
    """Runs that will never report end as `infrastructure` failures — never passed, and never
    executed again: running ones whose worker stopped renewing the lease (it died), and queued
    ones no worker took in time (the task message was lost, or no worker runs). All, or one.
    The conditions are `VerificationRun.lost_at`'s, as queries."""
    now = timezone.now()
    queue_timeout = settings.GOVERNOR_RUN_QUEUE_TIMEOUT_SECONDS
    lost = [
        (Q(state=RunState.RUNNING, lease_expires_at__lt=now),
         "the worker running it stopped renewing its lease: it was lost before it reported"),
        (Q(state=RunState.QUEUED, created_at__lt=now - timedelta(seconds=queue_timeout)),
         f"no worker took it within {queue_timeout} s: its task message was lost or no "
         f"worker runs"),
    ]
    count = 0
    for condition, why in lost:
        candidates = VerificationRun.objects.filter(condition)
        if run_id is not None:
            candidates = candidates.filter(pk=run_id)
        for pk in candidates.values_list("pk", flat=True):
            # Taken over with a compare-and-set, as a worker claims: a worker that claims or
            # renews at the same moment keeps its run, and a late claim finds nothing to run.
            if not VerificationRun.objects.filter(condition, pk=pk).update(
                    state=RunState.RUNNING, lease_owner=LEASE_OWNER_EXPIRY,
                    lease_expires_at=_lease_end()):
                continue
            run = VerificationRun.objects.select_related("profile", "session").get(pk=pk)
            run_finish(run=run, record=_infrastructure(run, why), detail=why)
            count += 1
    return count


def run_execute(run: VerificationRun) -> None:
    """Run a claimed run in the sandbox on a private copy of exactly the tree it is credited
    with (rules §10.2, `run_tree`), and record its result. A `read-only` run counts for
    that tree. A `workspace-write` run counts for the tree it leaves in its copy; on a path
    session its changes are applied to the workspace when it passes (a snapshot's copy, and a
    baseline run's, are discarded: it counts for the tree it was given). A report profile's run
    is judged by its test report too (§14.6), an oracle profile's by its expected outputs
    (§18.3). A gated change's run (no session) runs the same way on the kept tree it names."""
    if (suites := _run_prepared(run)) is None:
        return
    session = run.session
    definition = run.definition
    writes = definition["sandboxMode"] == "workspace-write"
    try:
        if session is None:
            tree = kept_run_tree(run.profile.project, (run.tree, run.tree_exclusions),
                                 writable=writes, overlay=_gate_overlay(run))
            keeps_changes = False
        else:
            tree = run_tree(session, run.tree or None, writable=writes,
                            start=(run.tree, run.tree_exclusions) if run.baseline else None,
                            environment=workspace_environment(definition.get("environment", [])),
                            overlay=_run_overlay(run),
                            environment_opened=_environment_opened(run))
            keeps_changes = (writes and not run.baseline
                             and session.workspace_kind != WorkspaceKind.SNAPSHOT)
        with tree as given, report_directory(definition) as report_dir, \
                heldout_directory(suites.files) as heldout_dir:
            copy = given.workspace
            result = run_sandboxed(
                definition, copy.root, copy.recorded_identity, directory=copy.directory,
                report=report_dir, write_bytes=settings.GOVERNOR_RUN_WRITE_BYTES,
                heldout=heldout_dir,
                stdin=oracle_stdin(suites.cases) if suites.cases is not None else None,
                keep_stdout=MAX_ORACLE_OUTPUT_BYTES if suites.cases is not None else None)
            record: dict[str, Any] = {**result.record(), "treeBefore": given.tree,
                                      "tree": given.tree, "environment": given.environment}
            if run.baseline:
                record["baseline"] = True
            if given.overlay is not None:
                record["overlay"] = given.overlay
            if run.heldout is not None:
                record["heldout"] = suite_agent_view(run.heldout)
            detail, tests = result.detail, None
            if report_dir is not None:
                detail, tests = report_judged(record, report_dir, detail, result.stream,
                                              heldout=suites.files)
            if suites.cases is not None and run.oracle is not None:
                judged, tests = oracle_judged(record, suites.cases,
                                              suite_agent_view(run.oracle), result.output)
                detail = f"{detail}; {judged}" if detail and judged else detail or judged
            if keeps_changes:
                assert session is not None
                record["tree"], detail = _changes_kept(session, given, record["passed"], detail)
                if record["tree"] is None and record["passed"]:
                    record.update(passed=False, failureKind="infrastructure")
            if detail:
                log.warning("run %s (%s): %s", run.pk, run.profile.profile_id, detail)
            if not record["passed"] and record.get("failureKind") in OPERATOR_KINDS:
                record["failureReason"] = failure_reason(detail or record["failureKind"],
                                                         record["failureKind"])
            tail = ""
            if run.profile.show_output_to_reviewers:
                tail = "\n".join(part for part in (result.stdout.tail, result.stderr.tail)
                                 if part)
            # Recorded before the copy is removed: the agent need not wait for the deletion.
            run_finish(run=run, record=record, output_tail=tail, detail=detail, tests=tests)
    except TreeUnavailable as exc:
        run_finish(run=run, record=_infrastructure(run, str(exc)), detail=str(exc))
    except EnvironmentChanged as exc:  # rules §17.8: nothing ran
        change = exc.change
        log.warning("run %s (%s): %s", run.pk, run.profile.profile_id, exc)
        run_finish(run=run, detail=str(exc), record=environment_changed_record(
            definition["sandboxMode"], baseline=run.baseline, tree=change.tree,
            environment=change.environment, changes=change.changes, count=change.count,
            reason=str(exc)))


def _run_prepared(run: VerificationRun) -> _SuitesRead | None:
    """What a run needs before its tree is made — its operator environment present (rules
    §17.8) and its held-out suites read (§18) — or None when it could not start (recorded as
    `infrastructure`, saying why). A gated change's tree holds no workspace environment."""
    declared = run.definition.get("environment", [])
    problems = operator_environment_problems(operator_environment(declared))
    if run.session is None and (inside := workspace_environment(declared)):
        problems.append(f"the profile declares workspace environment directories "
                        f"({', '.join(inside)}), which a gated change's tree holds none of")
    if problems:
        why = "; ".join(problems)
        run_finish(run=run, record=_infrastructure(run, why), detail=why)
        return None
    try:
        return _suites_read(run)
    except SuiteUnavailable as exc:
        run_finish(run=run, record=_infrastructure(run, str(exc)), detail=str(exc))
        return None


def _environment_opened(run: VerificationRun) -> list[str]:
    """Rules §17.8: the workspace environment paths a person opened for the session's open
    contract (its `environmentChanges`, in a reviewed contract only)."""
    contract = _open_contract(run.session_id)
    if contract is None or not contract["review"].get("reviewed"):
        return []
    return list(contract.get("environmentChanges") or [])


class SuiteUnavailable(Exception):
    """A held-out suite a run needs is gone, or its bytes cannot be read from the store."""


@dataclass(frozen=True)
class _SuitesRead:
    files: list[tuple[str, str, bytes]] | None  # mounted at /governor-heldout (rules §18.2)
    cases: tuple[Case, ...] | None  # answered on stdin (rules §18.3)


def _suites_read(run: VerificationRun) -> _SuitesRead:
    """The held-out files and cases a run needs, read from the blob store by the worker (they
    never pass through the agent's tree)."""
    definition = run.definition
    for field in ("heldout", "oracle"):
        if definition.get(field) and getattr(run, field) is None:
            raise SuiteUnavailable(f"the held-out suite {definition[field]!r} the profile "
                                   f"names as {field} is not loaded in this project")
    try:
        files = suite_version_files(run.heldout) if run.heldout is not None else None
        cases = suite_version_cases(run.oracle) if run.oracle is not None else None
    except (Unavailable, SuiteError) as exc:
        raise SuiteUnavailable(f"the held-out suite could not be read: {exc}") from None
    if cases is not None and not cases:
        raise SuiteUnavailable(f"the held-out suite {definition['oracle']!r} has no cases "
                               "(cases.jsonl) for the oracle to answer")
    return _SuitesRead(files, cases)


def _gate_overlay(run: VerificationRun) -> Overlay | None:
    """A gated change's head run carries the base's protected content to lay over it (§17.2)."""
    if run.overlay is None:
        return None
    return Overlay(run.overlay["reference"], run.overlay["check"])


def _run_overlay(run: VerificationRun) -> Overlay | None:
    """Rules §17.2: what a run lays over its tree — the session's reference, judged by the open
    contract's injected protected-paths check (what a person opened with `protected_changes`
    runs as the attempt has it); with no contract open, by the protected set a contract naming
    this profile would have (the project's paths, the profile's, the runner control in
    force). None when the session has no reference (older sessions, or a tree that could not
    be hashed when it was created) or nothing is protected."""
    session = run.session
    assert session is not None  # a gated change's run carries its overlay (`_gate_run_execute`)
    reference = (session.reference or {}).get("tree")
    if reference is None:
        return None
    contract = _open_contract(run.session_id)
    check = cast(Check | None, next((check for check in (contract["checks"] if contract else [])
                                     if check.get("id") == PROTECTED_CHECK_ID), None))
    if check is None:
        project = session.project
        control = in_force(project.runner_control_exempt)
        patterns = [*project.protected_paths, *(run.definition.get("protected_paths") or []),
                    *control.paths]
        check = protected_check(patterns, (), control.sections)
    return Overlay(reference, check)


def _changes_kept(session: Session, given: RunTree, passed: bool,
                  detail: str) -> tuple[dict[str, str] | None, str]:
    """A path session's `workspace-write` run: the tree its copy holds now, and when it passed,
    its changes applied to the workspace. (None, why) when either fails."""
    copy = given.workspace
    try:
        after = tree_written(session, copy)
        if passed:
            source = open_directory(copy.root)
            try:
                target = open_bound_directory(session.workspace_path, session.workspace_identity)
                try:
                    tree_changes_apply(source, target, copy.expected.manifest, after.manifest)
                finally:
                    os.close(target)
            finally:
                os.close(source)
    except (TreeUnavailable, WorkspaceError, OSError) as exc:
        why = f"the run's changes could not be kept: {exc}"
        return None, f"{detail}; {why}" if detail else why
    return tree_reference(after), detail

"""Creating, importing and exporting sessions."""

from __future__ import annotations

import logging
import math
import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from governor.domain import harness
from governor.domain.canonical import check_json_value
from governor.domain.chain import GENESIS
from governor.domain.workspace import identity_at
from governor.lib.errors import Conflict, Invalid, TooLarge, TooManyImports
from governor.lib.notify import announce_on_commit, session_topic
from governor.models import (
    AgentToken,
    ImportSlot,
    Project,
    Session,
    SessionState,
)
from governor.services.events import (
    AppendResult,
    events_discard_import,
    events_import,
)
from governor.services.facts import facts_session_started
from governor.services.references import reference_from_repository, reference_take

log = logging.getLogger(__name__)


def _allowed_roots(project: Project) -> list[Path]:
    roots = list(project.workspace_roots or [])
    if project.server_workspace_roots:
        roots += settings.GOVERNOR_WORKSPACE_ROOTS
    return [Path(os.path.realpath(root)) for root in roots]


def _workspace_resolve(project: Project, path: str) -> tuple[str, str]:
    """(canonical path, identity) of the workspace directory, which must lie under one of the
    project's roots. A refusal quotes the caller's input only and says the same whether or not
    something exists outside the roots (no file-system oracle)."""

    def refuse(message: str) -> Invalid:
        return Invalid(f"workspace.path {message}",
                       details=[{"path": "workspace.path", "message": message}])

    if not path or not os.path.isabs(path) or "\x00" in path:
        raise refuse("must be an absolute path")
    roots = _allowed_roots(project)
    if not roots:
        raise refuse(f"cannot be bound: project {project.slug} has no allowed workspace roots")
    outside = refuse(f"{path!r} is not a directory under an allowed workspace root of project "
                     f"{project.slug}")
    try:
        real = Path(os.path.realpath(path, strict=True))
    except (OSError, ValueError, RuntimeError):
        raise outside from None
    if not any(real == root or root in real.parents for root in roots):
        raise outside
    try:
        # No symlink is followed now: what is recorded is the directory at the canonical path.
        return str(real), identity_at(str(real))
    except OSError:
        raise outside from None


def _new_session(**fields: Any) -> Session:
    session = Session.objects.create(**fields)
    SessionState.objects.create(session=session, head=GENESIS, trace=harness.TraceState().to_json())
    return session


def session_create(
    *,
    token: AgentToken,
    workspace: dict[str, Any],
    external_id: str | None = None,
    header: dict[str, Any] | None = None,
) -> tuple[Session, bool]:
    """Create a session, or return the existing one for the same external id (created=False)."""
    project = token.project
    if external_id is not None:
        existing = Session.objects.filter(project=project, external_id=external_id).first()
        if existing is not None:
            return existing, False
    kind = workspace.get("kind")
    if kind == "path":
        path, identity = _workspace_resolve(project, workspace.get("path") or "")
    elif kind == "snapshot":  # rules §11: no server path; the agent uploads its trees
        if workspace.get("path"):
            message = "a snapshot workspace has no path"
            raise Invalid(f"workspace.path: {message}",
                          details=[{"path": "workspace.path", "message": message}])
        path = identity = ""
    else:
        message = 'must be "path" or "snapshot"'
        raise Invalid(f"workspace.kind: {message}",
                      details=[{"path": "workspace.kind", "message": message}])
    if header is not None:
        check_json_value(header)
    # rules §17.1: read from the repository before anything is written (a reference_ref that
    # does not resolve refuses the session), recorded once the session exists.
    taken = reference_from_repository(project, path) if kind == "path" else None
    try:
        with transaction.atomic():
            session = _new_session(project=project, external_id=external_id,
                                   workspace_kind=kind, workspace_path=path,
                                   workspace_identity=identity, header=header, created_by=token)
            facts_session_started(session)
    except IntegrityError:
        # A concurrent create with the same external id won the race: answer as a replay.
        existing = Session.objects.filter(project=project, external_id=external_id).first()
        if existing is None:
            raise
        return existing, False
    if kind == "path":
        reference_take(session, taken)
    return session, True


# An import that has not finished this long after it started is abandoned (its process died):
# `sessions_purge_abandoned_imports` deletes it. One takes seconds at the caps.
IMPORT_ABANDONED_AFTER = timedelta(hours=1)
IMPORT_SLOT_SECONDS = 60


def import_slot_claim(*, token: AgentToken) -> None:
    """Count an import the token starts: at most GOVERNOR_MAX_IMPORTS_PER_MINUTE in any minute,
    else TooManyImports with the seconds until a slot frees. A slot is a row that stays taken
    for a minute after the import it counted started, whatever became of it (refused imports
    cost work too); rows under a unique constraint count every process alike, and a claim
    writes only a slot that looks free (a flood of refused imports is reads)."""
    cap = settings.GOVERNOR_MAX_IMPORTS_PER_MINUTE
    now = timezone.now()
    until = now + timedelta(seconds=IMPORT_SLOT_SECONDS)
    held = dict(ImportSlot.objects.filter(token=token).values_list("slot", "until"))
    for slot in range(cap):
        if slot not in held:
            try:
                with transaction.atomic():
                    ImportSlot.objects.create(token=token, slot=slot, until=until)
                return
            except IntegrityError:
                continue  # another import of the token took it
        elif held[slot] <= now and ImportSlot.objects.filter(
                token=token, slot=slot, until=held[slot]).update(until=until):
            return  # compare-and-set: taken from its last import, unless another was faster
    soonest = min((taken for slot, taken in held.items() if slot < cap), default=now)
    retry_after = max(1, math.ceil((soonest - now).total_seconds()))
    raise TooManyImports(
        f"this token started {cap} imports within the last minute, the most one token may "
        f"(GOVERNOR_MAX_IMPORTS_PER_MINUTE); retry in {retry_after} s (Retry-After)",
        retry_after=retry_after,
        details=[{"path": "", "message": f"at most {cap} imports a minute per token "
                                         "(GOVERNOR_MAX_IMPORTS_PER_MINUTE)"}])


def session_import(
    *, token: AgentToken, text: str, workspace: dict[str, Any] | None, external_id: str | None
) -> tuple[Session, AppendResult]:
    """A whole Harness JSONL log as a new session: accepted whole or refused with nothing kept.

    The log is parsed (at most GOVERNOR_MAX_IMPORT_EVENTS events, refused 413 at the first line
    past them) and validated whole before anything is written. Its events are then written in
    chunks, each its own short transaction (`events_import`), so on SQLite, whose one write lock
    every session shares, other sessions' writes go on between chunks instead of waiting for
    the whole import. Until the last chunk commits the session is `importing`: every read
    (`Session.objects`) skips it, it holds no external id (so no one finds it by that) and no
    projection row. One last transaction writes the projection and sets `importing` false with
    the external id: the session appears whole, or not at all. If anything fails after the
    first write, its events and the session are deleted before the error is answered; a process
    that dies mid-import leaves a session nobody can see, deleted an hour later by
    `sessions_purge_abandoned_imports`."""
    cap = settings.GOVERNOR_MAX_IMPORT_EVENTS
    try:
        header, envelopes = harness.parse_log(text, max_events=cap)
    except harness.LogTooLong as exc:
        raise TooLarge(f"log: more than {cap} events (line {exc.line} goes past them); an "
                       f"import takes at most {cap} (GOVERNOR_MAX_IMPORT_EVENTS)",
                       details=[{"path": "", "message": f"more than {cap} events "
                                                        "(GOVERNOR_MAX_IMPORT_EVENTS)"}]) from None
    project = token.project
    extra_types = frozenset(project.extra_event_types)
    trace = harness.validate_log(header, envelopes, extra_types=extra_types)
    path = identity = ""
    if workspace is not None:
        path, identity = _workspace_resolve(project, workspace.get("path", ""))
    duplicate = Conflict(f"a session with external_id {external_id!r} already exists")
    if external_id and Session.objects.filter(project=project, external_id=external_id).exists():
        raise duplicate
    session = Session.objects.create(
        project=project, external_id=None, workspace_kind="path", workspace_path=path,
        workspace_identity=identity, header=header, imported=True, importing=True,
        created_by=token)
    try:
        state = SessionState(session=session, head=GENESIS)
        events_import(session=session, envelopes=envelopes, state=state)
        state.trace = trace.to_json()
        with transaction.atomic():
            if not Session.all_objects.filter(pk=session.pk, importing=True).update(
                    importing=False, external_id=external_id):
                raise Conflict(f"the import into session {session.pk} was abandoned while it "
                               "ran (it took over an hour): nothing was kept; import again")
            state.save(force_insert=True)
            announce_on_commit(session_topic(session.pk))
    except BaseException as exc:
        try:
            sessions_discard_import(session)
        except Exception:  # the database failed too: the session stays hidden until purged
            log.exception("import into session %s failed and could not be deleted", session.pk)
        if isinstance(exc, IntegrityError):  # a concurrent import took the external id first
            raise duplicate from None
        raise
    session.importing, session.external_id = False, external_id
    return session, AppendResult(0, state.next_seq - 1, state.head)


def sessions_discard_import(session: Session) -> None:
    """Delete an import that did not finish: its events, then the session (only while it is
    still `importing`: a finished one is never deleted)."""
    events_discard_import(session)
    rows = Session.all_objects.filter(pk=session.pk, importing=True)
    rows._raw_delete(rows.db)


def sessions_purge_abandoned_imports(*, now: datetime | None = None) -> int:
    """Delete the imports that started over IMPORT_ABANDONED_AFTER ago and never finished (their
    process died); the number deleted."""
    cutoff = (now or timezone.now()) - IMPORT_ABANDONED_AFTER
    abandoned = list(Session.all_objects.filter(importing=True, created_at__lt=cutoff))
    for session in abandoned:
        sessions_discard_import(session)
    return len(abandoned)

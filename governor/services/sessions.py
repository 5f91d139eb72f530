"""Creating, importing and exporting sessions."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from governor.domain import export, harness
from governor.domain.canonical import check_json_value
from governor.domain.chain import GENESIS
from governor.domain.lifecycle import ATTEMPT, TERMINAL
from governor.domain.passkey import REVIEW_STAGES
from governor.domain.tree import ManifestEntry
from governor.domain.workspace import identity_at
from governor.models import (
    AgentToken,
    Attestation,
    Event,
    Origin,
    Project,
    Session,
    SessionState,
    WorkspaceTree,
)
from governor.services import keys, passkeys
from governor.services.attestations import head_sign
from governor.services.errors import Conflict, Invalid
from governor.services.events import AppendResult, events_append, now_ms


def allowed_roots(project: Project) -> list[Path]:
    roots = list(project.workspace_roots or [])
    if project.server_workspace_roots:
        roots += settings.GOVERNOR_WORKSPACE_ROOTS
    return [Path(os.path.realpath(root)) for root in roots]


def workspace_resolve(project: Project, path: str) -> tuple[str, str]:
    """(canonical path, identity) of the workspace directory, which must lie under one of the
    project's roots. A refusal quotes the caller's input only and says the same whether or not
    something exists outside the roots (no file-system oracle)."""

    def refuse(message: str) -> Invalid:
        return Invalid(f"workspace.path {message}",
                       details=[{"path": "workspace.path", "message": message}])

    if not path or not os.path.isabs(path) or "\x00" in path:
        raise refuse("must be an absolute path")
    roots = allowed_roots(project)
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
        path, identity = workspace_resolve(project, workspace.get("path") or "")
    elif kind == "snapshot":  # SEMANTICS §11: no server path; the agent uploads its trees
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
    try:
        with transaction.atomic():
            session = _new_session(project=project, external_id=external_id,
                                   workspace_kind=kind, workspace_path=path,
                                   workspace_identity=identity, header=header, created_by=token)
    except IntegrityError:
        # A concurrent create with the same external id won the race: answer as a replay.
        existing = Session.objects.filter(project=project, external_id=external_id).first()
        if existing is None:
            raise
        return existing, False
    return session, True


def session_import(
    *, token: AgentToken, text: str, workspace: dict[str, Any] | None, external_id: str | None
) -> tuple[Session, AppendResult]:
    """A whole Harness JSONL log as a new session: accepted whole or refused with nothing kept."""
    header, envelopes = harness.parse_log(text)
    project = token.project
    extra_types = frozenset(project.extra_event_types)
    harness.validate_log(header, envelopes, extra_types=extra_types)
    path = identity = ""
    if workspace is not None:
        path, identity = workspace_resolve(project, workspace.get("path", ""))
    duplicate = Conflict(f"a session with external_id {external_id!r} already exists")
    if external_id and Session.objects.filter(project=project, external_id=external_id).exists():
        raise duplicate
    try:
        with transaction.atomic():
            session = _new_session(project=project, external_id=external_id,
                                   workspace_kind="path", workspace_path=path,
                                   workspace_identity=identity, header=header, imported=True,
                                   created_by=token)
            result = events_append(session=session, envelopes=envelopes,
                                   extra_types=extra_types, imported=True)
    except IntegrityError:  # a concurrent import took the external id first
        raise duplicate from None
    return session, result


def export_lines(session: Session) -> Iterator[str]:
    """The export of ARCHITECTURE §6, one canonical JSON text per line, as `governor.verify`
    checks it: with the manifest of every tree a signed terminal certified (SEMANTICS §10.2)."""
    session_id = str(session.id)
    yield export.serialise_line(export.header_line(
        session=session_id, project=session.project.slug, harness=session.header,
        exported_at=now_ms()))
    events = Event.objects.filter(session=session).order_by("seq")
    last_seq, head = -1, GENESIS
    attempt_trees: dict[str, tuple[str, str] | None] = {}
    certified: set[tuple[str, str]] = set()
    signed: dict[int, list[dict[str, Any]]] = {}  # decision events with passkey signatures
    for event in events.iterator(chunk_size=2000):
        yield export.serialise_line(export.event_line(
            session=session_id, seq=event.seq, type=event.type, time=event.time,
            origin=event.origin, data=event.data, prev=event.prev_hash, hash=event.hash,
            meta=event.meta))
        last_seq, head = event.seq, event.hash
        if event.type in REVIEW_STAGES and event.data.get("signatures"):
            signed[event.seq] = event.data["signatures"]
        if event.type == ATTEMPT:
            attempt_trees[str(event.data.get("receipt"))] = export.tree_ref(event.data.get("tree"))
        elif (event.type == TERMINAL and event.data.get("status") == "certified"
              and event.origin == Origin.GOVERNOR and not (event.meta or {}).get("imported")):
            tree = attempt_trees.get(event.data.get("attemptReceipt") or "")
            if tree is not None:
                certified.add(tree)
    # Events appended while this export streams are left out, and so are their attestations.
    attestations = Attestation.objects.filter(
        event__session=session, event__seq__lte=last_seq).select_related("event")
    keyids = set()
    for attestation in attestations.order_by("event__seq"):
        keyids.add(attestation.keyid)
        yield export.serialise_line(
            export.attestation_line(seq=attestation.event.seq, envelope=attestation.envelope))
    head_keyid, head_envelope = head_sign(session=session, seq=last_seq, head=head)
    for key in keys.export_key_lines(keyids | {head_keyid}):
        yield export.serialise_line(key)
    for line in passkeys.export_lines(signed):
        yield export.serialise_line(line)
    for tree_id, digest in sorted(certified):
        stored = WorkspaceTree.objects.filter(project=session.project, tree_id=tree_id,
                                              exclusions_digest=digest).first()
        if stored is not None:  # without it the export does not verify, as it should not
            yield export.serialise_line(export.manifest_line(
                tree=tree_id, exclusions=stored.exclusions,
                entries=[ManifestEntry(*entry) for entry in stored.manifest]))
    yield export.serialise_line(export.head_line(
        session=session_id, seq=last_seq, hash=head, envelope=head_envelope))

"""A session's export (the format in docs/api.md): built from the log, ended by a head signed
with the server's active key, as `python -m governor.verify` checks it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from governor.domain import export
from governor.domain.chain import GENESIS
from governor.domain.lifecycle import ATTEMPT, CONTRACT, TERMINAL
from governor.domain.passkey import REVIEW_STAGES
from governor.domain.tree import ManifestEntry
from governor.lib.clock import now_ms
from governor.models import Attestation, Event, Origin, Session, WorkspaceTree
from governor.selectors.keys import export_key_lines
from governor.selectors.passkeys import export_passkey_lines
from governor.services.attestations import head_sign


def export_lines(session: Session) -> Iterator[str]:
    """The export of docs/architecture.md, one canonical JSON text per line, as `governor.verify`
    checks it: with the manifest of every tree a signed terminal certified (rules §10.2) and
    of its contract's start tree, from which the verifier recomputes the changes digest (§14.8)."""
    session_id = str(session.id)
    yield export.serialise_line(export.header_line(
        session=session_id, project=session.project.slug, harness=session.header,
        exported_at=now_ms()))
    events = Event.objects.filter(session=session).order_by("seq")
    last_seq, head = -1, GENESIS
    attempt_trees: dict[str, tuple[str, str] | None] = {}
    start_trees: dict[str, tuple[str, str] | None] = {}  # per contract id
    trees: set[tuple[str, str]] = set()  # the manifests the export carries
    signed: dict[int, list[dict[str, Any]]] = {}  # decision events with passkey signatures
    for event in events.iterator(chunk_size=2000):
        yield export.serialise_line(export.event_line(
            session=session_id, seq=event.seq, type=event.type, time=event.time,
            origin=event.origin, data=event.data, prev=event.prev_hash, hash=event.hash,
            meta=event.meta))
        last_seq, head = event.seq, event.hash
        if event.type in REVIEW_STAGES and event.data.get("signatures"):
            signed[event.seq] = event.data["signatures"]
        if event.type == CONTRACT:
            start_trees[str(event.data.get("contractId"))] = export.tree_ref(
                event.data.get("startTree"))
        elif event.type == ATTEMPT:
            attempt_trees[str(event.data.get("receipt"))] = export.tree_ref(event.data.get("tree"))
        elif (event.type == TERMINAL and event.data.get("status") == "certified"
              and event.origin == Origin.GOVERNOR and not (event.meta or {}).get("imported")):
            tree = attempt_trees.get(event.data.get("attemptReceipt") or "")
            if tree is not None:
                trees.add(tree)
                start = start_trees.get(str(event.data.get("contractId")))
                if start is not None:
                    trees.add(start)
    # Events appended while this export streams are left out, and so are their attestations.
    attestations = Attestation.objects.filter(
        event__session=session, event__seq__lte=last_seq).select_related("event")
    keyids = set()
    for attestation in attestations.order_by("event__seq"):
        keyids.add(attestation.keyid)
        yield export.serialise_line(
            export.attestation_line(seq=attestation.event.seq, envelope=attestation.envelope))
    head_keyid, head_envelope = head_sign(session=session, seq=last_seq, head=head)
    for key in export_key_lines(keyids | {head_keyid}):
        yield export.serialise_line(key)
    for line in export_passkey_lines(signed):
        yield export.serialise_line(line)
    for tree_id, digest in sorted(trees):
        stored = WorkspaceTree.objects.filter(project=session.project, tree_id=tree_id,
                                              exclusions_digest=digest).first()
        if stored is not None:  # without it the export does not verify, as it should not
            yield export.serialise_line(export.manifest_line(
                tree=tree_id, exclusions=stored.exclusions,
                entries=[ManifestEntry(*entry) for entry in stored.manifest]))
    yield export.serialise_line(export.head_line(
        session=session_id, seq=last_seq, hash=head, envelope=head_envelope))


def export_bytes(session: Session) -> Iterator[bytes]:
    """The export (`export_lines`) as the bytes of an NDJSON download."""
    for line in export_lines(session):
        yield line.encode("utf-8") + b"\n"


"""Signing activated contracts and terminals (rules §1.5), and export heads (§12)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from governor.domain import attestation
from governor.domain.tree import TREE_ID_PREFIX
from governor.models import Attestation, Event, Session
from governor.services import keys


def attest(
    *,
    session: Session,
    event: Event,
    contract: Mapping[str, Any],
    profile_receipts: Sequence[str] = (),
    terminal: Mapping[str, Any] | None = None,
    run_receipts: Sequence[str] = (),
    tree: str | None = None,
    start_tree: str | None = None,
    changes_digest: str | None = None,
) -> Attestation:
    """A DSSE envelope over the in-toto statement about `event`, signed by the active key.
    The subject digest is the event's own chain hash: the head of the log when it was signed.
    A terminal lists the result receipts of the runs its deciding attempt counted, and names
    `tree` (`gittree:sha256:<hex>`), the tree its deciding attempt judged, as a second subject.
    A certified terminal also carries its contract's `start_tree` and the digest of the changes
    between the two (rules §14.8)."""
    fields: dict[str, Any] = {}
    if terminal is not None:
        fields = {"status": terminal["status"], "reason": terminal["reason"],
                  "terminal_receipt": terminal["receipt"],
                  "attempt_receipt": terminal.get("attemptReceipt"),
                  "run_receipts": sorted(set(run_receipts)),
                  "workspace_tree": None if tree is None else _tree_hex(tree),
                  "start_tree": start_tree, "changes_digest": changes_digest}
    statement = attestation.build_statement(
        session_id=str(session.pk), contract_id=contract["contractId"], chain_head=event.hash,
        kind="terminal" if terminal is not None else "contract", event_seq=event.seq,
        contract_receipt=contract["receipt"], profile_receipts=sorted(set(profile_receipts)),
        **fields,
    )
    keyid, envelope = keys.statement_sign(statement)
    return Attestation.objects.create(event=event, keyid=keyid, envelope=envelope)


def head_sign(*, session: Session, seq: int, head: str) -> tuple[str, attestation.Envelope]:
    """(keyid, DSSE envelope) of the signed head of an export of `session` ending at `seq`."""
    statement = attestation.build_head_statement(
        session_id=str(session.pk), seq=seq, head=head, project=session.project.slug,
        harness=session.header)
    return keys.statement_sign(statement)


def _tree_hex(tree_id: str) -> str:
    """The 64 hex of a `gittree:sha256:<hex>` tree id, as the in-toto gitTree digest holds it."""
    if not tree_id.startswith(TREE_ID_PREFIX):
        raise ValueError(f"{tree_id!r} is not a gittree:sha256: tree id")
    return tree_id.removeprefix(TREE_ID_PREFIX)

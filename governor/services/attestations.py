"""Signing activated contracts and terminals (SEMANTICS §1.5), and export heads (§12)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from governor.domain import attestation
from governor.models import Attestation, Event, Session
from governor.services import keys


def attest(
    *,
    session: Session,
    event: Event,
    contract: dict[str, Any],
    profile_receipts: Sequence[str] = (),
    terminal: dict[str, Any] | None = None,
    run_receipts: Sequence[str] = (),
) -> Attestation:
    """A DSSE envelope over the in-toto statement about `event`, signed by the active key.
    The subject digest is the event's own chain hash: the head of the log when it was signed.
    A terminal lists the result receipts of the runs its deciding attempt counted."""
    fields: dict[str, Any] = {}
    if terminal is not None:
        fields = {"status": terminal["status"], "reason": terminal["reason"],
                  "terminal_receipt": terminal["receipt"],
                  "attempt_receipt": terminal.get("attemptReceipt"),
                  "run_receipts": sorted(set(run_receipts))}
    statement = attestation.build_statement(
        session_id=str(session.pk), contract_id=contract["contractId"], chain_head=event.hash,
        kind="terminal" if terminal is not None else "contract", event_seq=event.seq,
        contract_receipt=contract["receipt"], profile_receipts=sorted(set(profile_receipts)),
        **fields,
    )
    key = keys.key_active()
    envelope = attestation.sign(statement, private_key=keys.private_key(key), keyid=key.keyid)
    return Attestation.objects.create(event=event, keyid=key.keyid, envelope=envelope)


def head_sign(*, session: Session, seq: int, head: str) -> tuple[str, dict[str, Any]]:
    """(keyid, DSSE envelope) of the signed head of an export of `session` ending at `seq`."""
    statement = attestation.build_head_statement(
        session_id=str(session.pk), seq=seq, head=head, project=session.project.slug,
        harness=session.header)
    key = keys.key_active()
    return key.keyid, attestation.sign(statement, private_key=keys.private_key(key),
                                       keyid=key.keyid)

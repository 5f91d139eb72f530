"""Signing activated contracts and terminals (SEMANTICS §1.5)."""

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
) -> Attestation:
    """A DSSE envelope over the in-toto statement about `event`, signed by the active key.
    The subject digest is the event's own chain hash: the head of the log when it was signed."""
    fields: dict[str, Any] = {}
    if terminal is not None:
        fields = {"status": terminal["status"], "reason": terminal["reason"],
                  "terminal_receipt": terminal["receipt"],
                  "attempt_receipt": terminal.get("attemptReceipt")}
    statement = attestation.build_statement(
        session_id=str(session.pk), contract_id=contract["contractId"], chain_head=event.hash,
        kind="terminal" if terminal is not None else "contract", event_seq=event.seq,
        contract_receipt=contract["receipt"], profile_receipts=sorted(set(profile_receipts)),
        **fields,
    )
    key = keys.key_active()
    envelope = attestation.sign(statement, private_key=keys.private_key(key), keyid=key.keyid)
    return Attestation.objects.create(event=event, keyid=key.keyid, envelope=envelope)

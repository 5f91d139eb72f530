"""Reviewers' passkeys as they are read (issue 18): a person's own, the signatures a decision
event names, and the reviewer keys and assertions an export carries."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from django.contrib.auth.models import User

from governor.domain import export
from governor.domain.documents import EventSignature
from reviews.models import DecisionSignature, Passkey


def passkeys_of(user: User) -> list[Passkey]:
    return list(Passkey.objects.filter(user_id=user.pk, removed_at__isnull=True)
                .order_by("created_at"))


def event_signatures(rows: Iterable[DecisionSignature]) -> list[EventSignature]:
    """The decision event's `signatures`: who signed, with which credential and nonce, and the
    assertion's digest (the assertion itself is in the export)."""
    return sorted(({"userId": row.user_id, "credentialId": row.passkey.credential_id,
                    "nonce": row.nonce, "assertion": row.digest} for row in rows),
                  key=lambda entry: (entry["userId"], entry["credentialId"]))


def reviewer_key(passkey: Passkey) -> export.ExportLine:
    """A reviewer's public key as an export line (and as `--reviewer-keys` lists it)."""
    return export.reviewer_key_line(
        credential_id=passkey.credential_id, user_id=passkey.user_id,
        username=passkey.user.get_username(), rp_id=passkey.rp_id,
        cose=bytes(passkey.public_key))


def export_passkey_lines(signed: dict[int, list[dict[str, Any]]]) -> Iterator[export.ExportLine]:
    """The reviewer-key lines (credential id order), then the assertion lines ((seq, credential
    id) order) of the signed decision events `signed` (seq → the event's `signatures`)."""
    nonces = {entry["nonce"]: seq for seq, entries in signed.items() for entry in entries}
    rows = sorted(DecisionSignature.objects.filter(nonce__in=nonces)
                  .select_related("passkey__user"),
                  key=lambda row: (nonces[row.nonce], row.passkey.credential_id))
    for passkey in sorted({row.passkey.pk: row.passkey for row in rows}.values(),
                          key=lambda key: key.credential_id):
        yield reviewer_key(passkey)
    for row in rows:
        yield export.assertion_line(seq=nonces[row.nonce], assertion={
            "credentialId": row.passkey.credential_id,
            "authenticatorData": row.authenticator_data,
            "clientDataJSON": row.client_data_json, "signature": row.signature})

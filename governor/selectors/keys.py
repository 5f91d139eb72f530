"""The server's public signing keys: as `GET /keys` publishes them, and as an export names them."""

from __future__ import annotations

from typing import TypedDict

from governor.domain import attestation
from governor.domain.export import ExportLine, key_line
from governor.models import SigningKey


class PublicKey(TypedDict):
    keyid: str
    algorithm: str
    publicKey: str  # noqa: N815 - wire name
    active: bool


def public_keys() -> list[PublicKey]:
    return [
        {"keyid": key.keyid, "algorithm": "ed25519", "publicKey": key.public_key,
         "active": key.active}
        for key in SigningKey.objects.order_by("created_at")
    ]


def export_key_lines(keyids: set[str]) -> list[ExportLine]:
    """Key lines of an export (increasing keyid) for the keys its attestations name."""
    rows = SigningKey.objects.filter(keyid__in=keyids).order_by("keyid")
    return [key_line(attestation.decode_public_key(key.public_key)) for key in rows]

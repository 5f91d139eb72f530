"""The server's Ed25519 signing keys: one active, old ones kept for verification."""

from __future__ import annotations

from collections.abc import Mapping

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.db import transaction
from django.utils import timezone

from governor.domain import attestation
from governor.models import SigningKey


def _create(active: bool) -> SigningKey:
    private = Ed25519PrivateKey.generate()
    public = private.public_key()
    raw_private = private.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    return SigningKey.objects.create(
        keyid=attestation.key_id(public),
        public_key=attestation.encode_public_key(public),
        private_key=raw_private,
        active=active,
    )


def key_active() -> SigningKey:
    """The active key, created on first use."""
    key = SigningKey.objects.filter(active=True).first()
    if key is not None:
        return key
    with transaction.atomic():
        key = SigningKey.objects.select_for_update().filter(active=True).first()
        return key or _create(active=True)


def key_rotate() -> SigningKey:
    with transaction.atomic():
        SigningKey.objects.filter(active=True).update(active=False, retired_at=timezone.now())
        return _create(active=True)


def statement_sign(statement: Mapping[str, object]) -> tuple[str, attestation.Envelope]:
    """(keyid, DSSE envelope) of `statement` signed with the active key (created on first use)."""
    key = key_active()
    private = Ed25519PrivateKey.from_private_bytes(bytes(key.private_key))
    return key.keyid, attestation.sign(statement, private_key=private, keyid=key.keyid)

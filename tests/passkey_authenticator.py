"""A software WebAuthn authenticator for tests that do not drive a browser: a real P-256 key
(cryptography), real CBOR (cbor2), answers shaped exactly as a browser's
`PublicKeyCredential.toJSON()`. Its knobs make the answers a broken or hostile authenticator
would give: no user verification, a counter that goes backwards, another key."""

from __future__ import annotations

import hashlib
import json
import secrets
import struct
from dataclasses import dataclass, field
from typing import Any

import cbor2
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from governor.domain.passkey import FLAG_UP, FLAG_UV, b64url

FLAG_AT = 0x40


@dataclass
class SoftAuthenticator:
    rp_id: str
    origin: str
    key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    credential_id: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    sign_count: int = 0
    user_verified: bool = True

    @property
    def cose(self) -> bytes:
        numbers = self.key.public_key().public_numbers()
        return cbor2.dumps({1: 2, 3: -7, -1: 1, -2: numbers.x.to_bytes(32, "big"),
                            -3: numbers.y.to_bytes(32, "big")})

    @property
    def spki(self) -> bytes:
        return self.key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)

    def _auth_data(self, extra_flags: int = 0, tail: bytes = b"") -> bytes:
        flags = FLAG_UP | (FLAG_UV if self.user_verified else 0) | extra_flags
        return (hashlib.sha256(self.rp_id.encode()).digest() + bytes([flags])
                + struct.pack(">I", self.sign_count) + tail)

    def _client_data(self, kind: str, challenge: str) -> bytes:
        return json.dumps({"type": kind, "challenge": challenge, "origin": self.origin,
                           "crossOrigin": False}).encode()

    def create(self, options: dict[str, Any]) -> dict[str, Any]:
        """navigator.credentials.create({publicKey: options}).toJSON(), attestation "none"."""
        attested = (bytes(16) + struct.pack(">H", len(self.credential_id)) + self.credential_id
                    + self.cose)
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {},
                                   "authData": self._auth_data(FLAG_AT, attested)})
        return {"id": b64url(self.credential_id), "rawId": b64url(self.credential_id),
                "type": "public-key", "clientExtensionResults": {},
                "response": {"clientDataJSON": b64url(self._client_data(
                    "webauthn.create", options["challenge"])),
                    "attestationObject": b64url(attestation), "transports": ["internal"]}}

    def get(self, options: dict[str, Any]) -> dict[str, Any]:
        """navigator.credentials.get({publicKey: options}).toJSON(); the counter moves on
        first, as a real authenticator's does."""
        self.sign_count += 1
        return self.assert_challenge(options["challenge"])

    def assert_challenge(self, challenge: str) -> dict[str, Any]:
        auth_data = self._auth_data()
        client_data = self._client_data("webauthn.get", challenge)
        signature = self.key.sign(auth_data + hashlib.sha256(client_data).digest(),
                                  ec.ECDSA(hashes.SHA256()))
        return {"id": b64url(self.credential_id), "rawId": b64url(self.credential_id),
                "type": "public-key", "clientExtensionResults": {},
                "response": {"authenticatorData": b64url(auth_data),
                             "clientDataJSON": b64url(client_data),
                             "signature": b64url(signature), "userHandle": None}}


"""governor/domain/passkey.py with `cryptography` alone: every algorithm a reviewer may register
(ES256, EdDSA, RS256) decodes from COSE to the same SPKI and verifies an assertion; a malformed
COSE key and each wrong part of an assertion are refused saying which."""

from __future__ import annotations

import hashlib
import json
import struct
from typing import Any

import cbor2
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa

from governor.domain.passkey import (
    PasskeyError,
    b64url,
    challenge,
    check_assertion,
    cose_to_spki,
    statement,
)

SIGNED = statement(proposal_receipt="sha256:" + "a" * 64, stage="intent", decision="approved",
                   reviewer=7, nonce="bm9uY2Vub25jZW5vbmNl")


def _int(value: int) -> bytes:
    return value.to_bytes((value.bit_length() + 7) // 8, "big")


def keys() -> list[tuple[int, Any, bytes]]:
    p256 = ec.generate_private_key(ec.SECP256R1())
    numbers = p256.public_key().public_numbers()
    edwards = ed25519.Ed25519PrivateKey.generate()
    raw = edwards.public_key().public_bytes(serialization.Encoding.Raw,
                                            serialization.PublicFormat.Raw)
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    rsa_numbers = rsa_key.public_key().public_numbers()
    return [
        (-7, p256, cbor2.dumps({1: 2, 3: -7, -1: 1, -2: numbers.x.to_bytes(32, "big"),
                                -3: numbers.y.to_bytes(32, "big")})),
        (-8, edwards, cbor2.dumps({1: 1, 3: -8, -1: 6, -2: raw})),
        (-257, rsa_key, cbor2.dumps({1: 3, 3: -257, -1: _int(rsa_numbers.n),  # RFC 8230
                                     -2: _int(rsa_numbers.e)})),
    ]


def sign(alg: int, private: Any, data: bytes) -> bytes:
    if alg == -7:
        return bytes(private.sign(data, ec.ECDSA(hashes.SHA256())))
    if alg == -8:
        return bytes(private.sign(data))
    return bytes(private.sign(data, padding.PKCS1v15(), hashes.SHA256()))


def assertion(alg: int, private: Any, *, flags: int = 0x05, count: int = 3,
              rp_id: str = "localhost", signed: dict[str, Any] = SIGNED) -> dict[str, str]:
    auth_data = hashlib.sha256(rp_id.encode()).digest() + bytes([flags]) + struct.pack(">I", count)
    client_data = json.dumps({"type": "webauthn.get", "challenge": b64url(challenge(signed)),
                              "origin": "http://localhost:8000"}).encode()
    signature = sign(alg, private, auth_data + hashlib.sha256(client_data).digest())
    return {"credentialId": "Y3JlZA", "authenticatorData": b64url(auth_data),
            "clientDataJSON": b64url(client_data), "signature": b64url(signature)}


@pytest.mark.parametrize("index", [0, 1, 2], ids=["ES256", "EdDSA", "RS256"])
def test_issue_18_each_algorithm_decodes_from_cose_and_verifies(index: int) -> None:
    alg, private, cose = keys()[index]
    decoded, spki = cose_to_spki(cose)
    assert decoded == alg
    assert spki == private.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    checked = check_assertion(assertion=assertion(alg, private), signed=SIGNED, alg=alg,
                              spki=spki, rp_id="localhost")
    assert checked.sign_count == 3 and checked.origin == "http://localhost:8000"


def test_issue_18_each_wrong_part_of_an_assertion_is_refused_saying_which() -> None:
    alg, private, cose = keys()[0]
    _, spki = cose_to_spki(cose)
    other = dict(SIGNED, stage="evidence")
    cases = [
        (assertion(alg, private, signed=other), "challenge is not this decision's"),
        (assertion(alg, private, rp_id="evil.example"), "not for the relying party"),
        (assertion(alg, private, flags=0x04), "did not see the user present"),
        (assertion(alg, private, flags=0x01), "did not verify the user"),
        ({**assertion(alg, private), "signature": assertion(alg, private)["signature"][:-4]
          + "AAAA"}, "does not verify"),
        ({**assertion(alg, private), "authenticatorData": "=="}, "unpadded base64url"),
    ]
    for made, reason in cases:
        with pytest.raises(PasskeyError, match=reason):
            check_assertion(assertion=made, signed=SIGNED, alg=alg, spki=spki,
                            rp_id="localhost")


def test_issue_18_a_malformed_cose_key_is_refused() -> None:
    _, _, cose = keys()[0]
    for bad, reason in ((cose[:-5], "truncated"),
                        (cbor2.dumps({1: 2, 3: -35}), "algorithm -35"),
                        (cbor2.dumps({1: 1, 3: -7, -1: 1}), "does not fit"),
                        (cose + b"\x00", "not one CBOR map"),
                        (cbor2.dumps([1, 2]), "unexpected CBOR major type 4")):
        with pytest.raises(PasskeyError, match=reason):
            cose_to_spki(bad)

"""rules §1.5: DSSE envelopes over in-toto Statements, signed with Ed25519."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from governor.domain.attestation import (
    PAYLOAD_TYPE,
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    AttestationError,
    build_statement,
    decode_public_key,
    encode_public_key,
    key_id,
    pae,
    sign,
    verify_envelope,
)
from governor.domain.canonical import canonical_bytes, receipt

SESSION = "3f2b8c1e-7d4a-4e9b-a1c2-5d6e7f8a9b0c"
CONTRACT = "contract-7f3a"
HEAD = hashlib.sha256(b"head").hexdigest()
SERVER_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
OTHER_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32, 64)))
CONTRACT_RECEIPT = receipt("contract", {"id": CONTRACT})
ATTEMPT_RECEIPT = receipt("attempt", {"contractId": CONTRACT, "attempt": 1})
TERMINAL_RECEIPT = receipt("terminal", {"contractId": CONTRACT, "status": "certified"})
PROFILE_RECEIPT = receipt("code-verification-profile", {"id": "unit-tests"})


def server_keys() -> dict[str, Ed25519PublicKey]:
    public = SERVER_KEY.public_key()
    return {key_id(public): public}


def terminal_statement(**overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "session_id": SESSION,
        "contract_id": CONTRACT,
        "chain_head": HEAD,
        "kind": "terminal",
        "event_seq": 7,
        "contract_receipt": CONTRACT_RECEIPT,
        "profile_receipts": [PROFILE_RECEIPT],
        "status": "certified",
        "reason": "all 2 checks passed",
        "terminal_receipt": TERMINAL_RECEIPT,
        "attempt_receipt": ATTEMPT_RECEIPT,
    }
    fields.update(overrides)
    return build_statement(**fields)


def signed(statement: dict[str, Any], key: Ed25519PrivateKey = SERVER_KEY) -> dict[str, Any]:
    return sign(statement, private_key=key, keyid=key_id(key.public_key()))


def independent_dsse_verify(envelope: dict[str, Any], raw_public_key: bytes) -> Any:
    """A minimal DSSE v1 verifier written from the protocol text, sharing no code with ours."""
    payload = base64.b64decode(envelope["payload"])
    payload_type = envelope["payloadType"].encode()
    message = b"DSSEv1 " + str(len(payload_type)).encode() + b" " + payload_type
    message += b" " + str(len(payload)).encode() + b" " + payload
    signature = base64.b64decode(envelope["signatures"][0]["sig"])
    Ed25519PublicKey.from_public_bytes(raw_public_key).verify(signature, message)
    return json.loads(payload)


def resign_raw(payload: bytes, payload_type: str = PAYLOAD_TYPE) -> dict[str, Any]:
    """An envelope over arbitrary payload bytes, validly signed by the server key."""
    signature = SERVER_KEY.sign(pae(payload_type, payload))
    return {
        "payloadType": payload_type,
        "payload": base64.b64encode(payload).decode(),
        "signatures": [
            {"keyid": key_id(SERVER_KEY.public_key()), "sig": base64.b64encode(signature).decode()}
        ],
    }


# --- DSSE -------------------------------------------------------------------------------------


def test_rule_1_5_pae_is_the_dsse_v1_encoding() -> None:
    # The worked example of the DSSE protocol document.
    assert (
        pae("http://example.com/HelloWorld", b"hello world")
        == b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


def test_rule_1_5_pae_lengths_count_bytes_not_characters() -> None:
    assert pae("t\u20ac", "\u00e9".encode()) == b"DSSEv1 4 t\xe2\x82\xac 2 \xc3\xa9"
    assert pae(PAYLOAD_TYPE, b"") == b"DSSEv1 28 application/vnd.in-toto+json 0 "


def test_rule_1_5_envelope_has_the_dsse_shape_and_the_payload_is_the_jcs_statement() -> None:
    statement = terminal_statement()
    envelope = signed(statement)
    assert set(envelope) == {"payloadType", "payload", "signatures"}
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    assert base64.b64decode(envelope["payload"]) == canonical_bytes(statement)
    [signature] = envelope["signatures"]
    assert signature["keyid"] == key_id(SERVER_KEY.public_key())
    assert len(base64.b64decode(signature["sig"])) == 64


def test_rule_1_5_any_dsse_verifier_given_the_public_key_accepts_the_envelope() -> None:
    statement = terminal_statement()
    raw_public_key = base64.b64decode(encode_public_key(SERVER_KEY.public_key()))
    assert independent_dsse_verify(signed(statement), raw_public_key) == statement


def test_rule_1_5_the_independent_verifier_rejects_another_key() -> None:
    raw_other = base64.b64decode(encode_public_key(OTHER_KEY.public_key()))
    with pytest.raises(InvalidSignature):
        independent_dsse_verify(signed(terminal_statement()), raw_other)


def test_rule_1_5_verify_envelope_returns_the_statement() -> None:
    statement = terminal_statement()
    assert verify_envelope(signed(statement), server_keys()) == statement


def test_rule_1_5_a_signature_by_an_unknown_key_is_refused() -> None:
    with pytest.raises(AttestationError, match="unknown or untrusted key"):
        verify_envelope(signed(terminal_statement(), OTHER_KEY), server_keys())


def test_rule_1_5_a_signature_under_a_known_keyid_by_another_key_is_refused() -> None:
    envelope = sign(
        terminal_statement(), private_key=OTHER_KEY, keyid=key_id(SERVER_KEY.public_key())
    )
    with pytest.raises(AttestationError, match="bad signature"):
        verify_envelope(envelope, server_keys())


def test_rule_1_5_a_changed_payload_is_refused() -> None:
    envelope = signed(terminal_statement())
    forged = terminal_statement(status="exhausted")
    envelope["payload"] = base64.b64encode(canonical_bytes(forged)).decode()
    with pytest.raises(AttestationError, match="bad signature"):
        verify_envelope(envelope, server_keys())


def test_rule_1_5_a_changed_payload_type_is_refused() -> None:
    envelope = signed(terminal_statement())
    envelope["payloadType"] = "application/json"
    with pytest.raises(AttestationError, match="payloadType"):
        verify_envelope(envelope, server_keys())


@pytest.mark.parametrize("position", [0, 10, 40, 85])
def test_rule_1_5_a_changed_signature_byte_is_refused(position: int) -> None:
    envelope = signed(terminal_statement())
    sig = envelope["signatures"][0]["sig"]
    flipped = "B" if sig[position] != "B" else "C"
    envelope["signatures"][0]["sig"] = sig[:position] + flipped + sig[position + 1 :]
    with pytest.raises(AttestationError):
        verify_envelope(envelope, server_keys())


def test_rule_1_5_non_canonical_base64_is_refused_even_when_it_decodes_to_the_same_bytes() -> None:
    envelope = signed(terminal_statement())
    sig = envelope["signatures"][0]["sig"]
    assert sig.endswith("==")  # 64 bytes: the last character carries 4 unused bits
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    same_bytes = alphabet[alphabet.index(sig[-3]) ^ 1]
    envelope["signatures"][0]["sig"] = sig[:-3] + same_bytes + "=="
    assert base64.b64decode(envelope["signatures"][0]["sig"]) == base64.b64decode(sig)
    with pytest.raises(AttestationError, match="canonical base64"):
        verify_envelope(envelope, server_keys())


@pytest.mark.parametrize(
    "mutate",
    [
        lambda e: e.update(extra=1),
        lambda e: e.update(signatures=[]),
        lambda e: e["signatures"][0].update(extra=1),
        lambda e: e.pop("payload"),
    ],
    ids=["extra-key", "no-signatures", "extra-signature-key", "no-payload"],
)
def test_rule_1_5_malformed_envelopes_are_refused(mutate: Any) -> None:
    envelope = signed(terminal_statement())
    mutate(envelope)
    with pytest.raises(AttestationError, match="envelope"):
        verify_envelope(envelope, server_keys())


def test_rule_1_5_a_signed_payload_that_is_not_canonical_is_refused() -> None:
    statement = terminal_statement()
    payload = json.dumps(statement, indent=1).encode()
    with pytest.raises(AttestationError, match="RFC 8785"):
        verify_envelope(resign_raw(payload), server_keys())


def test_rule_1_5_a_signed_statement_of_another_predicate_type_is_refused() -> None:
    statement = terminal_statement()
    statement["predicateType"] = "https://slsa.dev/provenance/v1"
    with pytest.raises(AttestationError, match="predicateType"):
        verify_envelope(resign_raw(canonical_bytes(statement)), server_keys())


# --- keys -------------------------------------------------------------------------------------


def test_rule_1_5_keyid_is_ed25519_and_16_hex_of_sha256_of_the_raw_key() -> None:
    public = SERVER_KEY.public_key()
    raw = base64.b64decode(encode_public_key(public))
    assert len(raw) == 32
    assert key_id(public) == "ed25519:" + hashlib.sha256(raw).hexdigest()[:16]
    assert re.fullmatch(r"ed25519:[0-9a-f]{16}", key_id(public))
    assert key_id(public) != key_id(OTHER_KEY.public_key())


def test_rule_1_5_public_keys_round_trip_through_base64_of_the_raw_bytes() -> None:
    public = SERVER_KEY.public_key()
    assert key_id(decode_public_key(encode_public_key(public))) == key_id(public)


@pytest.mark.parametrize(
    "text", ["", "not base64!", base64.b64encode(b"x" * 31).decode(), 12, None]
)
def test_rule_1_5_a_malformed_public_key_is_refused(text: Any) -> None:
    with pytest.raises(AttestationError, match="public key"):
        decode_public_key(text)


# --- in-toto Statement ------------------------------------------------------------------------


def test_rule_1_5_a_terminal_statement_names_session_contract_head_and_receipts() -> None:
    assert terminal_statement() == {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": f"session:{SESSION}/contract:{CONTRACT}", "digest": {"sha256": HEAD}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "kind": "terminal",
            "eventSeq": 7,
            "contractReceipt": CONTRACT_RECEIPT,
            "profileReceipts": [PROFILE_RECEIPT],
            "status": "certified",
            "reason": "all 2 checks passed",
            "terminalReceipt": TERMINAL_RECEIPT,
            "attemptReceipt": ATTEMPT_RECEIPT,
        },
    }
    assert STATEMENT_TYPE == "https://in-toto.io/Statement/v1"


def test_rule_1_5_a_terminal_without_an_attempt_omits_the_attempt_receipt() -> None:
    statement = terminal_statement(status="abstained", reason="cannot", attempt_receipt=None)
    assert "attemptReceipt" not in statement["predicate"]


def test_rule_1_5_a_contract_statement_carries_no_terminal_fields() -> None:
    statement = build_statement(
        session_id=SESSION,
        contract_id=CONTRACT,
        chain_head=HEAD,
        kind="contract",
        event_seq=3,
        contract_receipt=CONTRACT_RECEIPT,
    )
    assert statement["predicate"] == {
        "kind": "contract",
        "eventSeq": 3,
        "contractReceipt": CONTRACT_RECEIPT,
        "profileReceipts": [],
    }
    with pytest.raises(AttestationError, match="terminal fields"):
        build_statement(
            session_id=SESSION,
            contract_id=CONTRACT,
            chain_head=HEAD,
            kind="contract",
            event_seq=3,
            contract_receipt=CONTRACT_RECEIPT,
            status="certified",
        )


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"kind": "attempt"}, "kind"),
        ({"status": "done"}, "status"),
        ({"terminal_receipt": "sha256:ABC"}, "terminalReceipt"),
        ({"contract_receipt": "md5:" + "0" * 64}, "contractReceipt"),
        ({"attempt_receipt": "sha256:" + "0" * 63}, "attemptReceipt"),
        ({"profile_receipts": ["x"]}, "profileReceipts/0"),
        ({"chain_head": HEAD.upper()}, "digest"),
        ({"event_seq": -1}, "eventSeq"),
        ({"event_seq": True}, "eventSeq"),
    ],
)
def test_rule_1_5_statements_with_malformed_fields_are_refused(
    overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(AttestationError, match=message):
        terminal_statement(**overrides)

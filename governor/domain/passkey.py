"""Signed review decisions (issue 18): what a reviewer's passkey signs, and checking it with
`cryptography` alone — the server (after `webauthn` verified it) and the offline verifier both
use these formulas, written out in docs/api.md, "Signed decisions".

    statement   {proposalReceipt, stage: "intent"|"evidence", decision, reviewer: <user id>,
                 nonce: <base64url of 16 random bytes the server issued>}
    challenge   the 32 bytes of receipt("review-signature", statement)
    assertion   {credentialId, authenticatorData, clientDataJSON, signature} (base64url, no
                padding) — a WebAuthn assertion whose clientDataJSON challenge is the challenge
    digest      receipt("review-assertion", assertion), carried by the decision event

A signature is valid when clientDataJSON says `webauthn.get` with that challenge, the
authenticator data's RP id hash is sha256(rpId), its flags say user present and user verified,
and the key signed authenticatorData || sha256(clientDataJSON) (ES256, EdDSA or RS256)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa

from governor.domain.canonical import receipt

STATEMENT_KIND = "review-signature"
ASSERTION_KIND = "review-assertion"
ASSERTION_FIELDS = ("credentialId", "authenticatorData", "clientDataJSON", "signature")
ALGORITHMS = {-7: "ES256", -8: "EdDSA", -257: "RS256"}
"""COSE algorithm → name: the passkey algorithms a reviewer may register."""
FLAG_UP, FLAG_UV = 0x01, 0x04


class PasskeyError(ValueError):
    """A signature, key or encoding that does not check out; the message says what."""


def rp_id_usable(host: str) -> bool:
    """An IP address (the default 127.0.0.1 of GOVERNOR_PUBLIC_URL) cannot be a relying-party
    id: passkeys need the site served under a domain name, e.g. http://localhost:8000."""
    return bool(host) and not host.replace(".", "").isdigit() and ":" not in host


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def from_b64url(text: object, what: str) -> bytes:
    if type(text) is not str or "=" in text:
        raise PasskeyError(f"{what} must be unpadded base64url text")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise PasskeyError(f"{what} is not base64url") from None


class DecisionStatement(TypedDict):
    """What a reviewer's passkey signs: one decision on one proposal, by them, once."""

    proposalReceipt: str
    stage: str
    decision: str
    reviewer: int
    nonce: str


def statement(*, proposal_receipt: str, stage: str, decision: str, reviewer: int,
              nonce: str) -> DecisionStatement:
    return {"proposalReceipt": proposal_receipt, "stage": stage, "decision": decision,
            "reviewer": reviewer, "nonce": nonce}


def challenge(signed: Mapping[str, object]) -> bytes:
    """What the authenticator signs over (inside clientDataJSON): the statement's receipt."""
    return bytes.fromhex(receipt(STATEMENT_KIND, signed).removeprefix("sha256:"))


def assertion_digest(assertion: Mapping[str, object]) -> str:
    return receipt(ASSERTION_KIND, {name: assertion[name] for name in ASSERTION_FIELDS})


# --- keys: COSE (as registered) and SPKI (what `cryptography` loads) --------------------------


def _cbor_item(data: bytes, at: int) -> tuple[Any, int]:
    """One CBOR item of the kinds a COSE key holds (integers, byte and text strings, maps)."""
    if at >= len(data):
        raise PasskeyError("COSE key: truncated")
    major, info = data[at] >> 5, data[at] & 0x1F
    at += 1
    if info < 24:
        value = info
    elif info in (24, 25, 26, 27):
        size = 1 << (info - 24)
        if at + size > len(data):
            raise PasskeyError("COSE key: truncated")
        value = int.from_bytes(data[at:at + size], "big")
        at += size
    else:
        raise PasskeyError("COSE key: indefinite lengths are not a COSE key")
    if major == 0:
        return value, at
    if major == 1:
        return -1 - value, at
    if major in (2, 3):
        if at + value > len(data):
            raise PasskeyError("COSE key: truncated")
        raw = data[at:at + value]
        return (raw if major == 2 else raw.decode("utf-8")), at + value
    if major == 5:
        result: dict[Any, Any] = {}
        for _ in range(value):
            key, at = _cbor_item(data, at)
            result[key], at = _cbor_item(data, at)
        return result, at
    raise PasskeyError(f"COSE key: unexpected CBOR major type {major}")


def cose_to_spki(cose: bytes) -> tuple[int, bytes]:
    """(COSE algorithm, DER SubjectPublicKeyInfo) of a COSE_Key: EC2 P-256, OKP Ed25519, RSA."""
    key, end = _cbor_item(cose, 0)
    if type(key) is not dict or end != len(cose):
        raise PasskeyError("COSE key: not one CBOR map")
    alg = key.get(3)
    if alg not in ALGORITHMS:
        raise PasskeyError(f"COSE key: algorithm {alg!r} is not one of {sorted(ALGORITHMS)}")
    public: Any
    try:
        if alg == -7 and key.get(1) == 2 and key.get(-1) == 1:
            public = ec.EllipticCurvePublicNumbers(
                int.from_bytes(key[-2], "big"), int.from_bytes(key[-3], "big"),
                ec.SECP256R1()).public_key()
        elif alg == -8 and key.get(1) == 1 and key.get(-1) == 6:
            public = ed25519.Ed25519PublicKey.from_public_bytes(key[-2])
        elif alg == -257 and key.get(1) == 3:
            public = rsa.RSAPublicNumbers(e=int.from_bytes(key[-2], "big"),  # RFC 8230
                                          n=int.from_bytes(key[-1], "big")).public_key()
        else:
            raise PasskeyError(f"COSE key: key type or curve does not fit algorithm {alg}")
    except (KeyError, TypeError, ValueError) as exc:
        raise PasskeyError(f"COSE key: {exc}") from None
    return alg, public.public_bytes(serialization.Encoding.DER,
                                    serialization.PublicFormat.SubjectPublicKeyInfo)


def _verify_signature(alg: int, spki: bytes, signature: bytes, signed: bytes) -> bool:
    try:
        public = serialization.load_der_public_key(spki)
    except ValueError:
        raise PasskeyError("the public key is not a DER SubjectPublicKeyInfo") from None
    try:
        if alg == -7 and isinstance(public, ec.EllipticCurvePublicKey):
            public.verify(signature, signed, ec.ECDSA(hashes.SHA256()))
        elif alg == -8 and isinstance(public, ed25519.Ed25519PublicKey):
            public.verify(signature, signed)
        elif alg == -257 and isinstance(public, rsa.RSAPublicKey):
            public.verify(signature, signed, padding.PKCS1v15(), hashes.SHA256())
        else:
            raise PasskeyError(f"the public key is not an {ALGORITHMS.get(alg, alg)} key")
    except InvalidSignature:
        return False
    return True


# --- one assertion against one statement ------------------------------------------------------


@dataclass(frozen=True)
class Checked:
    sign_count: int
    origin: str


def check_assertion(*, assertion: Mapping[str, object], signed: Mapping[str, object], alg: int,
                    spki: bytes, rp_id: str) -> Checked:
    """The assertion is the key's signature, made with the user present and verified, over
    exactly `signed` for `rp_id`; else PasskeyError saying which part fails."""
    auth_data = from_b64url(assertion.get("authenticatorData"), "authenticatorData")
    client_data = from_b64url(assertion.get("clientDataJSON"), "clientDataJSON")
    signature = from_b64url(assertion.get("signature"), "signature")
    try:
        collected = json.loads(client_data)
    except ValueError:
        raise PasskeyError("clientDataJSON is not JSON") from None
    if type(collected) is not dict or collected.get("type") != "webauthn.get":
        raise PasskeyError("clientDataJSON is not a webauthn.get assertion")
    if collected.get("challenge") != b64url(challenge(signed)):
        raise PasskeyError("the assertion's challenge is not this decision's (it was made for "
                           "another proposal, stage, decision, reviewer or nonce)")
    if len(auth_data) < 37:
        raise PasskeyError("authenticatorData is shorter than 37 bytes")
    if auth_data[:32] != hashlib.sha256(rp_id.encode("utf-8")).digest():
        raise PasskeyError(f"authenticatorData is not for the relying party {rp_id!r}")
    flags = auth_data[32]
    if not flags & FLAG_UP:
        raise PasskeyError("the authenticator did not see the user present")
    if not flags & FLAG_UV:
        raise PasskeyError("the authenticator did not verify the user (no PIN or biometric)")
    if not _verify_signature(alg, spki, signature,
                             auth_data + hashlib.sha256(client_data).digest()):
        raise PasskeyError("the signature does not verify with the reviewer's public key")
    (sign_count,) = struct.unpack(">I", auth_data[33:37])
    return Checked(sign_count=sign_count, origin=str(collected.get("origin", "")))


# --- an export's signed decisions (python -m governor.verify) ----------------------------------

REVIEW_STAGES = {"reliability/intent-review": "intent", "reliability/contract-review": "evidence",
                 "reliability/delivery-review": "delivery"}
"""Decision event type → the stage its statement names."""
_KEY_LINE = {"kind", "credentialId", "userId", "username", "rpId", "algorithm", "cose", "spki"}
_ASSERTION_LINE = {"kind", "seq", *ASSERTION_FIELDS}
_SIGNATURE_ENTRY = {"userId", "credentialId", "nonce", "assertion"}


class Problem(Exception):
    """Where (seq or line) and what: governor.verify reports it as the failure."""

    def __init__(self, message: str, *, seq: int | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.message, self.seq, self.line = message, seq, line


@dataclass(frozen=True)
class ReviewerKey:
    credential_id: str
    user_id: int
    username: str
    rp_id: str
    algorithm: int
    spki: bytes


def parse_reviewer_key(obj: object) -> ReviewerKey:
    """A reviewer-key line (or an entry of a --reviewer-keys file): its SPKI must be the key of
    its COSE key."""
    if type(obj) is not dict or set(obj) != _KEY_LINE or obj["kind"] != "reviewer-key":
        raise PasskeyError(f"reviewer key: expected exactly the keys {sorted(_KEY_LINE)} "
                           "with kind 'reviewer-key'")
    for name, kind, what in (("credentialId", str, "a string"), ("userId", int, "an integer"),
                             ("username", str, "a string"), ("rpId", str, "a string"),
                             ("algorithm", int, "an integer")):
        if type(obj[name]) is not kind:
            raise PasskeyError(f"reviewer key: {name} must be {what}")
    from_b64url(obj["credentialId"], "reviewer key: credentialId")
    algorithm, spki = cose_to_spki(from_b64url(obj["cose"], "reviewer key: cose"))
    if algorithm != obj["algorithm"] or spki != from_b64url(obj["spki"], "reviewer key: spki"):
        raise PasskeyError(f"reviewer key {obj['credentialId']}: its spki and algorithm are not "
                           "those of its COSE key")
    return ReviewerKey(obj["credentialId"], obj["userId"], obj["username"], obj["rpId"],
                       algorithm, spki)


def load_reviewer_keys(text: str | bytes) -> dict[str, ReviewerKey]:
    """A --reviewer-keys file: a JSON list of reviewer-key objects, as each reviewer downloads
    theirs from the passkeys page (or copies them from an export they trust)."""
    try:
        items = json.loads(text)
    except ValueError as exc:
        raise PasskeyError(f"reviewer keys file: not JSON ({exc})") from None
    if type(items) is not list or not items:
        raise PasskeyError("reviewer keys file: must be a non-empty JSON list of reviewer keys")
    keys = [parse_reviewer_key(item) for item in items]
    return {key.credential_id: key for key in keys}


@dataclass(frozen=True)
class Decision:
    """One reviewer's part in one decision event, as the verifier reports it."""

    seq: int
    stage: str
    decision: str
    proposal_receipt: str
    user_id: int
    username: str | None
    """Known when signed (from the reviewer key); None for an unsigned one."""

    def __str__(self) -> str:
        who = (f"user {self.user_id} ({self.username}), signed with their passkey"
               if self.username is not None else
               f"user {self.user_id}, unsigned (only the server vouches for it)")
        return f"seq {self.seq}: {self.stage} {self.decision} {self.proposal_receipt} by {who}"


class SignedDecisions:
    """Collects an export's decision events, reviewer keys and assertions, then checks every
    signature: each against the statement recomputed from its decision event, with the key the
    export lists or — when given — the reviewer keys obtained out of band."""

    def __init__(self, trusted: dict[str, ReviewerKey] | None) -> None:
        self.trusted = trusted
        self.events: list[tuple[int, str, dict[str, Any]]] = []
        self.keys: dict[str, tuple[int, ReviewerKey]] = {}
        self.assertions: dict[tuple[int, str], tuple[int, dict[str, Any]]] = {}
        self.used_keys: set[str] = set()

    @property
    def signed(self) -> bool:
        return any(data.get("signatures") for _, _, data in self.events)

    def event(self, seq: int, event_type: str, data: object) -> None:
        if event_type not in REVIEW_STAGES or type(data) is not dict:
            return
        entries = data.get("signatures", [])
        if type(entries) is not list or any(type(entry) is not dict
                                            or set(entry) != _SIGNATURE_ENTRY
                                            for entry in entries):
            raise Problem(f"{event_type}: signatures must be a list of objects with exactly "
                          f"the keys {sorted(_SIGNATURE_ENTRY)}", seq=seq)
        self.events.append((seq, REVIEW_STAGES[event_type], data))

    def key_line(self, line_no: int, obj: object) -> None:
        try:
            key = parse_reviewer_key(obj)
        except PasskeyError as exc:
            raise Problem(str(exc), line=line_no) from None
        if self.keys and key.credential_id <= max(self.keys):
            raise Problem(f"reviewer key {key.credential_id} is out of credentialId order or "
                          "repeated", line=line_no)
        self.keys[key.credential_id] = (line_no, key)

    def assertion_line(self, line_no: int, obj: dict[str, Any]) -> None:
        if set(obj) != _ASSERTION_LINE or type(obj["seq"]) is not int:
            raise Problem(f"assertion: expected exactly the keys {sorted(_ASSERTION_LINE)}, "
                          "seq an integer", line=line_no)
        where = (obj["seq"], obj["credentialId"])
        if self.assertions and where <= max(self.assertions):
            raise Problem(f"assertion of seq {obj['seq']} is out of (seq, credentialId) order "
                          "or repeated", line=line_no)
        self.assertions[where] = (line_no, obj)

    def check(self) -> list[Decision]:
        """Every signature checks out, and every assertion and reviewer key line is one a
        decision uses; the reviewers' parts in every decision event, in seq order."""
        decisions: list[Decision] = []
        counters: dict[str, int] = {}
        used: set[tuple[int, str]] = set()
        firsts: dict[tuple[str, str], tuple[int, object]] = {}
        for seq, stage, data in self.events:
            signers = {}
            for entry in data.get("signatures", []):
                self.check_once(seq, entry, firsts)
                key = self.check_signature(seq, stage, data, entry, counters)
                used.add((seq, entry["credentialId"]))
                signers[entry["userId"]] = key.username
            decided_by = data.get("decidedBy") or {}
            users = decided_by.get("userIds") or (
                [decided_by["userId"]] if "userId" in decided_by else [])
            unknown = set(signers) - set(users)
            if unknown:
                raise Problem(f"signed by user {min(unknown)}, who is not among the deciders "
                              f"{users}", seq=seq)
            decisions += [Decision(seq, stage, str(data.get("decision")),
                                   str(data.get("proposalReceipt")), user, signers.get(user))
                          for user in users]
        for where, (line_no, _) in self.assertions.items():
            if where not in used:
                raise Problem(f"assertion of seq {where[0]} by credential {where[1]}: no "
                              "decision event names it", line=line_no)
        for credential_id, (line_no, _) in self.keys.items():
            if credential_id not in self.used_keys:
                raise Problem(f"reviewer key {credential_id}: no assertion uses it",
                              line=line_no)
        return decisions

    @staticmethod
    def check_once(seq: int, entry: dict[str, Any],
                   firsts: dict[tuple[str, str], tuple[int, object]]) -> None:
        """Issue 25: the server issues a nonce for one signing and takes it once, so a nonce, or
        an assertion, that two signatures carry is a copy. With a passkey that keeps no
        signature counter (synced passkeys report 0) the copy would check out against the
        reviewer's key on every event it was copied onto. `firsts` holds, for each nonce and
        assertion digest seen, the seq and user of the signature that carried it first."""
        who = f"the signature of user {entry['userId']} (credential {entry['credentialId']})"
        for what, value in (("nonce", entry["nonce"]), ("assertion", entry["assertion"])):
            first = firsts.get((what, str(value)))
            if first is None:
                firsts[(what, str(value))] = (seq, entry["userId"])
                continue
            where = (f"the signature in seq {first[0]}" if first[0] != seq
                     else f"user {first[1]}'s signature in this event")
            raise Problem(f"{who}: its {what} {value} is also that of {where}; the server "
                          "issues each nonce for one signing, so one of the two is a copy",
                          seq=seq)

    def check_signature(self, seq: int, stage: str, data: dict[str, Any],
                        entry: dict[str, Any], counters: dict[str, int]) -> ReviewerKey:
        credential_id, user_id = entry["credentialId"], entry["userId"]
        who = f"the signature of user {user_id} (credential {credential_id})"
        found = self.assertions.get((seq, credential_id))
        if found is None:
            raise Problem(f"{who}: no assertion line", seq=seq)
        assertion = found[1]
        if assertion_digest(assertion) != entry["assertion"]:
            raise Problem(f"{who}: the assertion is not the one the decision event names "
                          "(its digest differs)", seq=seq)
        listed = self.keys.get(credential_id)
        if listed is None:
            raise Problem(f"{who}: no reviewer-key line for the credential", seq=seq)
        self.used_keys.add(credential_id)
        key = listed[1]
        if self.trusted is not None:
            trusted = self.trusted.get(credential_id)
            if trusted is None:
                raise Problem(f"{who}: the credential is not among --reviewer-keys", seq=seq)
            if (trusted.user_id, trusted.rp_id, trusted.algorithm, trusted.spki) != (
                    key.user_id, key.rp_id, key.algorithm, key.spki):  # a username may change
                raise Problem(f"{who}: the export's key for the credential is not the one in "
                              "--reviewer-keys (the key was swapped)", seq=seq)
        if key.user_id != user_id:
            raise Problem(f"{who}: the credential is user {key.user_id}'s", seq=seq)
        signed = statement(proposal_receipt=str(data.get("proposalReceipt")), stage=stage,
                           decision=str(data.get("decision")), reviewer=user_id,
                           nonce=str(entry["nonce"]))
        try:
            checked = check_assertion(assertion=assertion, signed=signed, alg=key.algorithm,
                                      spki=key.spki, rp_id=key.rp_id)
        except PasskeyError as exc:
            raise Problem(f"{who}: {exc}", seq=seq) from None
        last = counters.get(credential_id, 0)
        if (checked.sign_count or last) and checked.sign_count <= last:
            raise Problem(f"{who}: the signature counter {checked.sign_count} is not above "
                          f"{last}, that of an earlier signature (a replay or a cloned "
                          "authenticator)", seq=seq)
        counters[credential_id] = checked.sign_count
        return key

"""rules §1.5: signed attestations — an in-toto Statement v1 inside a DSSE v1 envelope.

Every activated contract and every terminal is attested: the statement's subject is
`session:<session id>/contract:<contract id>` with the chain head (the hash of the event being
attested) as its sha256 digest, and its predicate carries the receipts the event stands on. A
terminal whose deciding attempt judged a workspace tree (rules §10.2) has a second subject,
`{"name": "workspace", "digest": {"gitTree": <the tree id's 64 hex>}}` (in-toto's DigestSet key
for git trees).
The payload is the RFC 8785 form of the statement, signed with Ed25519 over the DSSE
pre-authentication encoding, so any DSSE verifier given the public key can check it.

Predicate (`https://reliability-governor.dev/attestation/v1`), camelCase like event data:

    kind             "contract" (an activated contract) or "terminal"
    eventSeq         seq of the governor event the attestation is about
    contractReceipt  receipt of the contract (the stored contract minus its receipt)
    profileReceipts  receipts of the code-verification profiles: for a contract, those its
                     checks name at activation; for a terminal, those the counted runs ran
    -- terminal only --
    status           "certified" | "exhausted" | "abstained"
    reason           the terminal's reason, as in the terminal event
    terminalReceipt  the terminal's receipt
    attemptReceipt   the deciding attempt's receipt (present only when the terminal has one)
    runReceipts      the `code-verification-result` receipts of the runs the deciding attempt
                     counted (absent from terminals signed before runs carried receipts)

rules §12: an export ends with a signed head, a statement of the same envelope and key
whose subject is `session:<session id>` with the hash of the last exported event (GENESIS for
an empty log) as its digest, and whose predicate (`https://reliability-governor.dev/
export-head/v1`) is `{seq, project, harness}`: the last seq (-1 for an empty log) and the
export header's project and Harness header.

Pure Python: `cryptography`, `rfc8785` (through `canonical`) and the standard library only.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from governor.domain.canonical import JSONValueError, canonical_bytes, loads_strict

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://reliability-governor.dev/attestation/v1"
HEAD_PREDICATE_TYPE = "https://reliability-governor.dev/export-head/v1"
PREDICATE_KINDS = ("contract", "terminal", "outcome-terminal")
WORKSPACE_SUBJECT = "workspace"
CHANGE_SUBJECT_PREFIX = "change:"  # rules §19.2: a gated change's certification
GIT_TREE = "gitTree"  # in-toto's DigestSet key for a git tree id
TERMINAL_STATUSES = ("certified", "exhausted", "abstained")

_RECEIPT = re.compile(r"sha256:[0-9a-f]{64}")
_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")
_ENVELOPE_KEYS = {"payloadType", "payload", "signatures"}
_SIGNATURE_KEYS = {"keyid", "sig"}
_STATEMENT_KEYS = {"_type", "subject", "predicateType", "predicate"}
_CONTRACT_PREDICATE_KEYS = {"kind", "eventSeq", "contractReceipt", "profileReceipts"}
_TERMINAL_PREDICATE_KEYS = _CONTRACT_PREDICATE_KEYS | {"status", "reason", "terminalReceipt"}
_TERMINAL_OPTIONAL_KEYS = {"attemptReceipt", "runReceipts", "startTree", "changesDigest"}
_HEAD_PREDICATE_KEYS = {"seq", "project", "harness"}
_OUTCOME_PREDICATE_KEYS = _CONTRACT_PREDICATE_KEYS | {
    "status", "reason", "terminalReceipt", "outcomeContractReceipt", "causalClaimPermitted"}
OUTCOME_STATUSES = ("achieved", "missed", "inconclusive", "expired")


class AttestationError(ValueError):
    """An envelope, statement or key that does not verify; the message says which part and why."""


# --- keys -------------------------------------------------------------------------------------


def public_key_bytes(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def key_id(public_key: Ed25519PublicKey) -> str:
    """The keyid: "ed25519:" + the first 16 hex of sha256 over the raw 32-byte public key."""
    return "ed25519:" + hashlib.sha256(public_key_bytes(public_key)).hexdigest()[:16]


def encode_public_key(public_key: Ed25519PublicKey) -> str:
    """Standard base64 of the raw 32-byte public key."""
    return base64.b64encode(public_key_bytes(public_key)).decode("ascii")


def decode_public_key(text: object) -> Ed25519PublicKey:
    raw = b64decode_strict(text, "public key")
    if len(raw) != 32:
        raise AttestationError(f"public key: expected 32 raw bytes, got {len(raw)}")
    return Ed25519PublicKey.from_public_bytes(raw)


def b64decode_strict(text: object, what: str) -> bytes:
    """Standard base64, padded, and canonical: exactly one text per byte string, so no byte of
    the text can change without changing what it decodes to."""
    if type(text) is not str:
        raise AttestationError(f"{what}: expected a base64 string")
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except ValueError:
        raise AttestationError(f"{what}: not valid base64") from None
    if base64.b64encode(raw).decode("ascii") != text:
        raise AttestationError(f"{what}: not canonical base64")
    return raw


# --- DSSE -------------------------------------------------------------------------------------


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body."""
    type_bytes = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(type_bytes), type_bytes, len(payload), payload)


class EnvelopeSignature(TypedDict):
    keyid: str
    sig: str


class Envelope(TypedDict):
    """A DSSE envelope: the statement's canonical bytes, base64, and who signed them."""

    payloadType: str
    payload: str
    signatures: list[EnvelopeSignature]


def sign(
    statement: Mapping[str, object], *, private_key: Ed25519PrivateKey, keyid: str
) -> Envelope:
    """The DSSE envelope of `statement` (payload = its RFC 8785 bytes) signed by `private_key`."""
    check_statement(statement)
    payload = canonical_bytes(statement)
    signature = private_key.sign(pae(PAYLOAD_TYPE, payload))
    return {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [{"keyid": keyid, "sig": base64.b64encode(signature).decode("ascii")}],
    }


def verify_envelope(
    envelope: object,
    public_keys: Mapping[str, Ed25519PublicKey],
    *,
    predicate_type: str = PREDICATE_TYPE,
) -> dict[str, Any]:
    """Check every signature of `envelope` against `public_keys` (keyid → key) and return the
    well-formed statement it carries, whose predicate must be of `predicate_type`. Every
    signature must name a known key and verify."""
    if type(envelope) is not dict or set(envelope) != _ENVELOPE_KEYS:
        raise AttestationError(f"envelope: expected exactly the keys {sorted(_ENVELOPE_KEYS)}")
    if envelope["payloadType"] != PAYLOAD_TYPE:
        raise AttestationError(f"envelope: payloadType must be {PAYLOAD_TYPE!r}")
    payload = b64decode_strict(envelope["payload"], "envelope payload")
    signatures = envelope["signatures"]
    if type(signatures) is not list or not signatures:
        raise AttestationError("envelope: signatures must be a non-empty list")
    message = pae(PAYLOAD_TYPE, payload)
    for index, signature in enumerate(signatures):
        where = f"envelope signature {index}"
        if type(signature) is not dict or set(signature) != _SIGNATURE_KEYS:
            raise AttestationError(f"{where}: expected exactly the keys ['keyid', 'sig']")
        keyid = signature["keyid"]
        if type(keyid) is not str or keyid not in public_keys:
            raise AttestationError(f"{where}: signed by unknown or untrusted key {keyid!r}")
        raw_signature = b64decode_strict(signature["sig"], f"{where} sig")
        try:
            public_keys[keyid].verify(raw_signature, message)
        except InvalidSignature:
            raise AttestationError(f"{where}: bad signature for key {keyid}") from None
    try:
        statement: dict[str, Any] = loads_strict(payload)
    except JSONValueError as exc:
        raise AttestationError(f"envelope payload: {exc}") from None
    if canonical_bytes(statement) != payload:
        raise AttestationError("envelope payload: not the RFC 8785 form of the statement")
    check_statement(statement)
    if statement["predicateType"] != predicate_type:
        raise AttestationError(f"statement: predicateType must be {predicate_type!r}")
    return statement


# --- in-toto Statement ------------------------------------------------------------------------


class Subject(TypedDict):
    name: str
    digest: dict[str, str]


class Statement(TypedDict):
    """An in-toto Statement as this module builds it (`check_statement` holds its shape)."""

    _type: str
    subject: list[Subject]
    predicateType: str
    predicate: dict[str, object]


def subject_name(session_id: str, contract_id: str) -> str:
    return f"session:{session_id}/contract:{contract_id}"


def build_statement(
    *,
    session_id: str,
    contract_id: str,
    chain_head: str,
    kind: str,
    event_seq: int,
    contract_receipt: str,
    profile_receipts: Sequence[str] = (),
    status: str | None = None,
    reason: object = None,
    terminal_receipt: str | None = None,
    attempt_receipt: str | None = None,
    run_receipts: Sequence[str] | None = None,
    workspace_tree: str | None = None,
    start_tree: str | None = None,
    changes_digest: str | None = None,
    subject: str | None = None,
) -> Statement:
    """The in-toto Statement attesting the governor event at `event_seq`, whose hash is
    `chain_head`. Terminal fields are required for kind "terminal" and refused for "contract";
    `workspace_tree` (64 hex: the deciding attempt's tree) becomes a terminal's second subject;
    a certified terminal's predicate names its contract's `startTree` and the `changesDigest`
    of what changed since (rules §14.8). `subject` names a gated change (`change:<id>`, rules
    §19.2) instead of a session's contract: its digest is the change's receipt."""
    if kind not in PREDICATE_KINDS:
        raise AttestationError(f"predicate: kind must be one of {list(PREDICATE_KINDS)}")
    predicate: dict[str, object] = {
        "kind": kind,
        "eventSeq": event_seq,
        "contractReceipt": contract_receipt,
        "profileReceipts": list(profile_receipts),
    }
    if kind == "terminal":
        predicate.update(status=status, reason=reason, terminalReceipt=terminal_receipt)
        if attempt_receipt is not None:
            predicate["attemptReceipt"] = attempt_receipt
        if run_receipts is not None:
            predicate["runReceipts"] = list(run_receipts)
        if start_tree is not None:
            predicate["startTree"] = start_tree
        if changes_digest is not None:
            predicate["changesDigest"] = changes_digest
    elif (status, reason, terminal_receipt, attempt_receipt, run_receipts,
          workspace_tree, start_tree, changes_digest) != (None,) * 8:
        raise AttestationError("predicate: terminal fields given for a contract attestation")
    subjects: list[Subject] = [{"name": subject or subject_name(session_id, contract_id),
                                "digest": {"sha256": chain_head}}]
    if workspace_tree is not None:
        subjects.append({"name": WORKSPACE_SUBJECT, "digest": {GIT_TREE: workspace_tree}})
    statement: Statement = {
        "_type": STATEMENT_TYPE,
        "subject": subjects,
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }
    check_statement(statement)
    return statement


def build_outcome_statement(*, session_id: str, chain_head: str, event_seq: int,
                            terminal: Mapping[str, object], delivery_contract_receipt: str,
                            profile_receipt: str) -> Statement:
    """The in-toto Statement of an outcome terminal (`reliability/outcome-terminal`): about the
    delivery contract whose outcome it judged, naming the outcome contract's receipt and the
    outcome profile's."""
    statement: Statement = {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": subject_name(session_id, str(terminal["contractId"])),
                     "digest": {"sha256": chain_head}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "kind": "outcome-terminal", "eventSeq": event_seq,
            "contractReceipt": delivery_contract_receipt, "profileReceipts": [profile_receipt],
            "status": terminal["status"], "reason": terminal["reason"],
            "terminalReceipt": terminal["receipt"],
            "outcomeContractReceipt": terminal["outcomeContractReceipt"],
            "causalClaimPermitted": terminal["causalClaimPermitted"],
        },
    }
    check_statement(statement)
    return statement


def build_head_statement(
    *, session_id: str, seq: int, head: str, project: str, harness: Mapping[str, object] | None
) -> Statement:
    """The in-toto Statement of an export's signed head (rules §12): the log of `session_id`
    ends at `seq` (-1 when empty) whose chain hash is `head`."""
    statement: Statement = {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": head_subject_name(session_id), "digest": {"sha256": head}}],
        "predicateType": HEAD_PREDICATE_TYPE,
        "predicate": {"seq": seq, "project": project,
                      "harness": None if harness is None else dict(harness)},
    }
    check_statement(statement)
    return statement


def head_subject_name(session_id: str) -> str:
    return f"session:{session_id}"


def workspace_tree_of(statement: Mapping[str, Any]) -> str | None:
    """The 64 hex of the workspace subject of a checked statement, None when it has none."""
    subject = statement["subject"]
    return subject[1]["digest"][GIT_TREE] if len(subject) == 2 else None


def _is_workspace_subject(entry: object) -> bool:
    if type(entry) is not dict or set(entry) != {"name", "digest"}:
        return False
    digest = entry["digest"]
    return (entry["name"] == WORKSPACE_SUBJECT and type(digest) is dict
            and set(digest) == {GIT_TREE} and type(digest[GIT_TREE]) is str
            and _HEX_DIGEST.fullmatch(digest[GIT_TREE]) is not None)


def check_statement(statement: object) -> None:
    """Refuse a statement that is not exactly the shape this module builds."""
    if type(statement) is not dict or set(statement) != _STATEMENT_KEYS:
        raise AttestationError(f"statement: expected exactly the keys {sorted(_STATEMENT_KEYS)}")
    if statement["_type"] != STATEMENT_TYPE:
        raise AttestationError(f"statement: _type must be {STATEMENT_TYPE!r}")
    if statement["predicateType"] not in (PREDICATE_TYPE, HEAD_PREDICATE_TYPE):
        raise AttestationError(
            f"statement: predicateType must be {PREDICATE_TYPE!r} or {HEAD_PREDICATE_TYPE!r}")
    subject = statement["subject"]
    predicate = statement["predicate"]
    terminal = (statement["predicateType"] == PREDICATE_TYPE and type(predicate) is dict
                and predicate.get("kind") == "terminal")
    if type(subject) is not list or not 1 <= len(subject) <= (2 if terminal else 1):
        raise AttestationError("statement: subject must be a list of exactly one entry (a "
                               "terminal's may add the workspace tree)")
    if len(subject) == 2 and not _is_workspace_subject(subject[1]):
        raise AttestationError("statement subject: the second entry must be {'name': "
                               "'workspace', 'digest': {'gitTree': <64 lowercase hex>}}")
    entry = subject[0]
    if type(entry) is not dict or set(entry) != {"name", "digest"}:
        raise AttestationError("statement subject: expected exactly the keys ['digest', 'name']")
    if type(entry["name"]) is not str or not (
            entry["name"].startswith("session:")
            or (terminal and entry["name"].startswith(CHANGE_SUBJECT_PREFIX))):
        raise AttestationError("statement subject: name must start with 'session:' (a "
                               "terminal's may name a gated change, 'change:')")
    digest = entry["digest"]
    if (
        type(digest) is not dict
        or set(digest) != {"sha256"}
        or type(digest["sha256"]) is not str
        or not _HEX_DIGEST.fullmatch(digest["sha256"])
    ):
        raise AttestationError("statement subject: digest must be {'sha256': <64 lowercase hex>}")
    if statement["predicateType"] == HEAD_PREDICATE_TYPE:
        _check_head_predicate(statement["predicate"])
    else:
        _check_predicate(statement["predicate"])


def _check_head_predicate(predicate: object) -> None:
    if type(predicate) is not dict or set(predicate) != _HEAD_PREDICATE_KEYS:
        raise AttestationError(
            f"head predicate: expected exactly the keys {sorted(_HEAD_PREDICATE_KEYS)}")
    if type(predicate["seq"]) is not int or predicate["seq"] < -1:
        raise AttestationError("head predicate: seq must be an integer ≥ -1")
    if type(predicate["project"]) is not str:
        raise AttestationError("head predicate: project must be a string")
    if predicate["harness"] is not None and type(predicate["harness"]) is not dict:
        raise AttestationError("head predicate: harness must be an object or null")


def _check_predicate(predicate: object) -> None:
    if type(predicate) is not dict or predicate.get("kind") not in PREDICATE_KINDS:
        raise AttestationError(f"predicate: kind must be one of {list(PREDICATE_KINDS)}")
    if predicate["kind"] == "contract":
        expected = _CONTRACT_PREDICATE_KEYS
    elif predicate["kind"] == "outcome-terminal":
        expected = _OUTCOME_PREDICATE_KEYS
    else:
        expected = _TERMINAL_PREDICATE_KEYS | (_TERMINAL_OPTIONAL_KEYS & set(predicate))
    if set(predicate) != expected:
        raise AttestationError(
            f"predicate: a {predicate['kind']} predicate has exactly the keys {sorted(expected)}"
        )
    seq = predicate["eventSeq"]
    if type(seq) is not int or seq < 0:
        raise AttestationError("predicate: eventSeq must be a non-negative integer")
    _check_receipt(predicate["contractReceipt"], "contractReceipt")
    profiles = predicate["profileReceipts"]
    if type(profiles) is not list:
        raise AttestationError("predicate: profileReceipts must be a list")
    for index, profile_receipt in enumerate(profiles):
        _check_receipt(profile_receipt, f"profileReceipts/{index}")
    if predicate["kind"] == "outcome-terminal":
        if predicate["status"] not in OUTCOME_STATUSES:
            raise AttestationError(f"predicate: status must be one of {list(OUTCOME_STATUSES)}")
        _check_receipt(predicate["terminalReceipt"], "terminalReceipt")
        _check_receipt(predicate["outcomeContractReceipt"], "outcomeContractReceipt")
        if type(predicate["causalClaimPermitted"]) is not bool:
            raise AttestationError("predicate: causalClaimPermitted must be true or false")
    if predicate["kind"] == "terminal":
        if predicate["status"] not in TERMINAL_STATUSES:
            raise AttestationError(f"predicate: status must be one of {list(TERMINAL_STATUSES)}")
        _check_receipt(predicate["terminalReceipt"], "terminalReceipt")
        if "attemptReceipt" in predicate:
            _check_receipt(predicate["attemptReceipt"], "attemptReceipt")
        runs = predicate.get("runReceipts", [])
        if type(runs) is not list:
            raise AttestationError("predicate: runReceipts must be a list")
        for index, run_receipt in enumerate(runs):
            _check_receipt(run_receipt, f"runReceipts/{index}")
        if "startTree" in predicate and (type(predicate["startTree"]) is not str
                                         or not predicate["startTree"].startswith("gittree:")):
            raise AttestationError("predicate: startTree must be a gittree: tree id")
        if "changesDigest" in predicate:
            _check_receipt(predicate["changesDigest"], "changesDigest")


def _check_receipt(value: object, field: str) -> None:
    if type(value) is not str or not _RECEIPT.fullmatch(value):
        raise AttestationError(f"predicate: {field} must be 'sha256:' + 64 lowercase hex")

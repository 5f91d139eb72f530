"""What a server operator holding the server's signing key can do to an export with signed
decisions (issue 18): edit decision events, then recompute their receipts, re-chain every event
and re-sign every attestation and the head — all of which verifies with `--key`. Only the
reviewers' passkey signatures can then catch the edit."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from governor.domain.attestation import key_id, sign
from governor.domain.canonical import receipt
from governor.domain.chain import GENESIS, META_KEYS, event_hash
from governor.domain.export import serialise_line
from governor.domain.passkey import REVIEW_STAGES, assertion_digest, b64url, challenge, statement
from governor.verify import RECEIPTED_EVENTS
from tests.passkey_authenticator import SoftAuthenticator

ROOT = Path(__file__).resolve().parents[1]


def reseal(objects: list[dict[str, Any]], server_key: Ed25519PrivateKey) -> list[dict[str, Any]]:
    """Recompute the decision events' receipts, re-chain, re-sign attestations and head."""
    keyid = key_id(server_key.public_key())
    prev, hashes = GENESIS, {-1: GENESIS}
    for obj in objects:
        if obj["kind"] != "event":
            continue
        if obj["type"] in REVIEW_STAGES:
            data = obj["data"]
            data["receipt"] = receipt(RECEIPTED_EVENTS[obj["type"]].kind,
                                      {name: value for name, value in data.items()
                                       if name != "receipt"})
        obj["prev"] = prev
        obj["hash"] = event_hash(session=obj["session"], seq=obj["seq"], type=obj["type"],
                                 time=obj["time"], origin=obj["origin"], data=obj["data"],
                                 prev=prev, meta={key: obj[key] for key in META_KEYS if key in obj})
        prev = hashes[obj["seq"]] = obj["hash"]
    for obj in objects:
        if obj["kind"] in ("attestation", "head"):
            signed = json.loads(base64.b64decode(obj["envelope"]["payload"]))
            signed["subject"][0]["digest"]["sha256"] = hashes[obj["seq"]]
            if obj["kind"] == "head":
                obj["hash"] = hashes[obj["seq"]]
            obj["envelope"] = sign(signed, private_key=server_key, keyid=keyid)
    return objects


def decision_events(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [obj for obj in objects if obj["kind"] == "event" and obj["type"] in REVIEW_STAGES
            and obj["data"].get("signatures")]


def forge_signature(objects: list[dict[str, Any]], event: dict[str, Any],
                    forger: SoftAuthenticator) -> None:
    """Sign `event`'s decision again with `forger`'s key, in the name of the same reviewer,
    and swap the export's reviewer key for the forger's — a passkey the operator registered
    in the reviewer's name."""
    entry = event["data"]["signatures"][0]
    old_credential = entry["credentialId"]
    key_line = next(obj for obj in objects if obj["kind"] == "reviewer-key"
                    and obj["credentialId"] == old_credential)
    signed = statement(proposal_receipt=event["data"]["proposalReceipt"],
                       stage=REVIEW_STAGES[event["type"]], decision=event["data"]["decision"],
                       reviewer=entry["userId"], nonce=entry["nonce"])
    forger.sign_count += 1000
    answer = forger.assert_challenge(b64url(challenge(signed)))["response"]
    assertion = next(obj for obj in objects if obj["kind"] == "assertion"
                     and obj["seq"] == event["seq"])
    assertion.update(authenticatorData=answer["authenticatorData"],
                     clientDataJSON=answer["clientDataJSON"], signature=answer["signature"])
    entry["assertion"] = assertion_digest(assertion)
    key_line.update(cose=b64url(forger.cose), spki=b64url(forger.spki))


def verify_cli(path: Path, objects: list[dict[str, Any]],
               *args: str) -> subprocess.CompletedProcess[str]:
    path.write_text("".join(serialise_line(obj) + "\n" for obj in objects), encoding="utf-8")
    return subprocess.run(  # noqa: S603
        [sys.executable, "-m", "governor.verify", str(path), *args], cwd=ROOT,
        capture_output=True, text=True, timeout=60, check=False)

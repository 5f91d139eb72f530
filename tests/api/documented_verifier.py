"""A verifier written from docs/api.md ("Evidence anyone can check") alone, as a third party
would write it: the standard library, `rfc8785` for canonical JSON and `cryptography` for
Ed25519 — nothing of the governor (tests/api/test_documented_formulas.py holds it to that).
It returns the problems it finds instead of stopping at the first, and is deliberately plain."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

GENESIS = "0" * 64
META_KEYS = ("sourceSeq", "ignorable", "surfaceOp", "sourceEventSeqs", "imported")
RECEIPT_KINDS = {
    "reliability/contract": "contract",
    "reliability/attempt": "attempt",
    "reliability/terminal": "terminal",
    "reliability/code-verification": "code-verification-result",
    "reliability/contract-draft": "contract-draft",
    "reliability/intent-review": "intent-review",
    "reliability/contract-review": "contract-review",
    "reliability/outcome-contract": "outcome-contract",
    "reliability/outcome-observation": "outcome-observation",
    "reliability/outcome-terminal": "outcome-terminal",
    "reliability/outcome-report": "outcome-report",
}
ATTESTED = ("reliability/contract", "reliability/terminal", "reliability/outcome-terminal")
PAYLOAD_TYPE = "application/vnd.in-toto+json"


def sha256hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def receipt(kind: str, payload: Any) -> str:
    return "sha256:" + sha256hex(rfc8785.dumps({"kind": kind, "payload": payload}))


def chain_hash(event: dict[str, Any]) -> str:
    body = {name: event[name]
            for name in ("session", "seq", "type", "time", "origin", "data", "prev")}
    meta = {name: event[name] for name in META_KEYS if name in event}
    if meta:
        body["meta"] = meta
    return sha256hex(rfc8785.dumps(body))


def manifest_tree_id(entries: list[dict[str, str]]) -> str:
    """"Tree id of a manifest": one git tree object per directory, built bottom-up."""
    root: dict[str, Any] = {}
    for entry in entries:
        *directories, name = entry["path"].split("/")
        node = root
        for directory in directories:
            node = node.setdefault(directory, {})
        node[name] = entry

    def object_id(node: dict[str, Any]) -> bytes:
        rows = []
        for name, value in node.items():
            if "blob" in value and isinstance(value["blob"], str):
                rows.append((name.encode(), value["mode"].encode(), bytes.fromhex(value["blob"])))
            else:
                rows.append((name.encode() + b"/", b"40000", object_id(value)))
        body = b"".join(mode + b" " + key.rstrip(b"/") + b"\0" + raw
                        for key, mode, raw in sorted(rows))
        return hashlib.sha256(b"tree %d\0" % len(body) + body).digest()

    return "gittree:sha256:" + object_id(root).hex()


def keys_from_endpoint(body: bytes) -> dict[str, Ed25519PublicKey]:
    """`GET /keys`: each key's keyid must be derived from the key itself."""
    keys = {}
    for entry in json.loads(body)["keys"]:
        raw = base64.b64decode(entry["publicKey"], validate=True)
        if entry["keyid"] != "ed25519:" + sha256hex(raw)[:16]:
            raise ValueError(f"keyid {entry['keyid']} is not derived from its key")
        keys[entry["keyid"]] = Ed25519PublicKey.from_public_bytes(raw)
    return keys


def pae(payload_type: str, payload: bytes) -> bytes:
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def open_envelope(envelope: dict[str, Any], keys: dict[str, Ed25519PublicKey]) -> dict[str, Any]:
    """The statement of a DSSE envelope whose every signature verifies under `keys`."""
    assert envelope["payloadType"] == PAYLOAD_TYPE
    payload = base64.b64decode(envelope["payload"], validate=True)
    for signature in envelope["signatures"]:
        try:
            keys[signature["keyid"]].verify(base64.b64decode(signature["sig"], validate=True),
                                            pae(PAYLOAD_TYPE, payload))
        except (KeyError, InvalidSignature):
            raise ValueError(f"signature by {signature['keyid']} does not verify") from None
    statement = json.loads(payload)
    assert rfc8785.dumps(statement) == payload
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    return statement


def problems(text: str, keys: dict[str, Ed25519PublicKey]) -> list[str]:
    """Every problem of a format /3 export, each naming its seq or line."""
    found = []
    objects = [json.loads(line) for line in text.splitlines()]
    for number, (line, obj) in enumerate(zip(text.splitlines(), objects, strict=True), 1):
        if rfc8785.dumps(obj).decode() != line:
            found.append(f"line {number}: not canonical")
    header, head = objects[0], objects[-1]
    if header["format"] != "reliability-governor-export/3" or head["kind"] != "head":
        return [*found, "not a format /3 export ending with its head"]
    session = header["session"]
    events = [obj for obj in objects if obj["kind"] == "event"]
    prev, by_seq, contract_receipts = GENESIS, {}, {}
    run_receipts: dict[str, int] = {}
    outcome_contracts: dict[str, dict[str, Any]] = {}
    attempt_trees: dict[str, Any] = {}
    certified_trees = []
    start_trees: dict[str, Any] = {}
    changes_digests = []  # (seq, start tree, certified tree, changesDigest)
    for seq, event in enumerate(events):
        if event["seq"] != seq or event["prev"] != prev or event["session"] != session:
            found.append(f"seq {seq}: out of order or off the chain")
        if chain_hash(event) != event["hash"]:
            found.append(f"seq {seq}: hash")
        prev = event["hash"]
        by_seq[seq] = event
        data, kind = event["data"], RECEIPT_KINDS.get(event["type"])
        if kind is not None and (kind != "code-verification-result" or "receipt" in data):
            payload = {name: value for name, value in data.items() if name != "receipt"}
            if receipt(kind, payload) != data["receipt"]:
                found.append(f"seq {seq}: {kind} receipt")
        if event["type"] == "reliability/contract":
            contract_receipts[data["contractId"]] = data["receipt"]
            start_trees[data["contractId"]] = data.get("startTree")
        if event["type"] == "reliability/code-verification" and "receipt" in data:
            run_receipts[data["receipt"]] = seq
        if event["type"] == "reliability/attempt":
            attempt_trees[data["receipt"]] = data.get("tree")
        if event["type"] == "reliability/outcome-contract":
            outcome_contracts[data["outcomeContractId"]] = data
        if event["type"] in ATTESTED:
            event["contractReceipt"] = contract_receipts.get(data["contractId"])
    attested = set()
    for line in (obj for obj in objects if obj["kind"] == "attestation"):
        event = by_seq[line["seq"]]
        statement = open_envelope(line["envelope"], keys)
        subject, predicate = statement["subject"][0], statement["predicate"]
        data = event["data"]
        expected = {"kind": event["type"].removeprefix("reliability/"), "eventSeq": event["seq"],
                    "contractReceipt": event["contractReceipt"]}
        if predicate["kind"] == "outcome-terminal":
            bound = outcome_contracts.get(data["outcomeContractId"], {})
            expected |= {"status": data["status"], "reason": data["reason"],
                         "terminalReceipt": data["receipt"],
                         "outcomeContractReceipt": bound.get("receipt"),
                         "causalClaimPermitted": data["causalClaimPermitted"],
                         "profileReceipts": [bound.get("profileReceipt")]}
            if data["outcomeContractReceipt"] != bound.get("receipt"):
                found.append(f"seq {event['seq']}: names another outcome contract")
        if predicate["kind"] == "terminal":
            expected |= {"status": data["status"], "reason": data["reason"],
                         "terminalReceipt": data["receipt"]}
            if "attemptReceipt" in data:
                expected["attemptReceipt"] = data["attemptReceipt"]
            if any(run_receipts.get(run, event["seq"]) >= event["seq"]
                   for run in predicate.get("runReceipts", [])):
                found.append(f"seq {event['seq']}: a run receipt names no earlier run")
            tree = attempt_trees.get(data.get("attemptReceipt"))
            workspace = ([{"name": "workspace", "digest": {
                "gitTree": tree["id"].removeprefix("gittree:sha256:")}}] if tree else [])
            if statement["subject"][1:] != workspace:
                found.append(f"seq {event['seq']}: the workspace subject is not the attempt's")
            if tree and data["status"] == "certified":
                certified_trees.append((tree["id"], tree["exclusions"]))
                start = start_trees.get(data["contractId"])
                if start:
                    certified_trees.append((start["id"], start["exclusions"]))
                if "startTree" in predicate and predicate["startTree"] != (start or {}).get("id"):
                    found.append(f"seq {event['seq']}: startTree is not the contract's")
                if start and "changesDigest" in predicate:
                    changes_digests.append((event["seq"], start["id"], tree["id"],
                                            predicate["changesDigest"]))
        if (statement["predicateType"] != "https://reliability-governor.dev/attestation/v1"
                or subject != {"name": f"session:{session}/contract:{data['contractId']}",
                               "digest": {"sha256": event["hash"]}}
                or any(predicate.get(name) != value for name, value in expected.items())):
            found.append(f"seq {event['seq']}: attestation does not match")
        attested.add(event["seq"])
    for event in events:
        must = (event["type"] in ATTESTED
                and event["origin"] == "governor" and not event.get("imported"))
        if must and event["seq"] not in attested:
            found.append(f"seq {event['seq']}: not attested")
    manifests = [(line["tree"], receipt("tree-exclusions", line["exclusions"]))
                 for line in objects if line["kind"] == "manifest"]
    for line in (obj for obj in objects if obj["kind"] == "manifest"):
        if manifest_tree_id(line["entries"]) != line["tree"]:
            found.append(f"manifest of {line['tree']}: its entries make another tree")
    if sorted(manifests) != sorted(set(certified_trees)):
        found.append("the manifests are not those of the certified trees")
    entries_of = {line["tree"]: {entry["path"]: (entry["mode"], entry["blob"])
                                 for entry in line["entries"]}
                  for line in objects if line["kind"] == "manifest"}
    for seq, start_id, tree_id, digest in changes_digests:
        before, after = entries_of.get(start_id, {}), entries_of.get(tree_id, {})
        changes = [[path, "added" if path not in before else "deleted" if path not in after
                    else "mode-changed" if before[path][0] != after[path][0] else "modified"]
                   for path in sorted(before.keys() | after.keys(), key=str.encode)
                   if before.get(path) != after.get(path)]
        if receipt("workspace-changes", changes) != digest:
            found.append(f"seq {seq}: changesDigest")
    statement = open_envelope(head["envelope"], keys)
    last = events[-1] if events else {"seq": -1, "hash": GENESIS}
    if (statement["predicateType"] != "https://reliability-governor.dev/export-head/v1"
            or statement["subject"] != [{"name": f"session:{session}",
                                         "digest": {"sha256": last["hash"]}}]
            or statement["predicate"] != {"seq": last["seq"], "project": header["project"],
                                          "harness": header["harness"]}
            or (head["session"], head["seq"], head["hash"]) != (session, last["seq"],
                                                                 last["hash"])):
        found.append(f"seq {last['seq']}: the signed head does not cover the last event")
    return found + signed_decision_problems(objects)


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


REVIEW_STAGES = {"reliability/intent-review": "intent", "reliability/contract-review": "evidence"}


def signed_decision_problems(objects: list[dict[str, Any]]) -> list[str]:
    """"Signed decisions": every signature entry of a decision event against its assertion
    line and reviewer key (ES256 keys only here; the reviewers in the tests use P-256)."""
    found = []
    keys = {obj["credentialId"]: obj for obj in objects if obj["kind"] == "reviewer-key"}
    assertions = {(obj["seq"], obj["credentialId"]): obj for obj in objects
                  if obj["kind"] == "assertion"}
    counters: dict[str, int] = {}
    carried: dict[tuple[str, str], int] = {}  # nonce or assertion → the seq first carrying it
    for event in (obj for obj in objects if obj["kind"] == "event"):
        if event["type"] not in REVIEW_STAGES:
            continue
        data = event["data"]
        for entry in data.get("signatures", []):
            where = f"seq {event['seq']}"
            for name in ("nonce", "assertion"):
                if (name, entry[name]) in carried:
                    found.append(f"{where}: its {name} is also carried by seq "
                                 f"{carried[(name, entry[name])]}")
                carried.setdefault((name, entry[name]), event["seq"])
            line = assertions.get((event["seq"], entry["credentialId"]))
            key = keys.get(entry["credentialId"])
            if line is None or key is None or key["userId"] != entry["userId"]:
                found.append(f"{where}: no assertion or reviewer key for the signature")
                continue
            fields = ("credentialId", "authenticatorData", "clientDataJSON", "signature")
            if receipt("review-assertion", {name: line[name] for name in fields}) != entry[
                    "assertion"]:
                found.append(f"{where}: the assertion is not the one the event names")
            statement = {"proposalReceipt": data["proposalReceipt"],
                         "stage": REVIEW_STAGES[event["type"]], "decision": data["decision"],
                         "reviewer": entry["userId"], "nonce": entry["nonce"]}
            challenge = bytes.fromhex(receipt("review-signature", statement)[len("sha256:"):])
            auth_data = b64url_decode(line["authenticatorData"])
            client_data = b64url_decode(line["clientDataJSON"])
            collected = json.loads(client_data)
            if (collected["type"] != "webauthn.get"
                    or collected["challenge"] != b64url_encode(challenge)):
                found.append(f"{where}: the assertion was not made for this decision")
            if (auth_data[:32] != hashlib.sha256(key["rpId"].encode()).digest()
                    or auth_data[32] & 0x05 != 0x05):
                found.append(f"{where}: another relying party, or the user was not verified")
            public = serialization.load_der_public_key(b64url_decode(key["spki"]))
            assert isinstance(public, ec.EllipticCurvePublicKey) and key["algorithm"] == -7
            try:
                public.verify(b64url_decode(line["signature"]),
                              auth_data + hashlib.sha256(client_data).digest(),
                              ec.ECDSA(hashes.SHA256()))
            except InvalidSignature:
                found.append(f"{where}: the signature does not verify")
            count = int.from_bytes(auth_data[33:37], "big")
            last = counters.get(entry["credentialId"], 0)
            if (count or last) and count <= last:
                found.append(f"{where}: the signature counter did not rise")
            counters[entry["credentialId"]] = count
    return found

"""Offline verifier for session exports (rules §1.5, §10.2 and §12, docs/architecture.md).

    python -m governor.verify EXPORT.jsonl [--key KEYFILE] [--reviewer-keys FILE] [--tree DIR]
        [--commit REV [--repo DIR]]
    python -m governor.verify --commit REV [--repo DIR] --server URL --token FILE [--key KEYFILE]

Needs only `cryptography`, `rfc8785`, the standard library and, for `--commit`, stock git
(through the Django-free modules `governor.domain.canonical`, `.chain`, `.attestation`,
`.changes`, `.checkout`, `.commits` and `.tree`; the client package ships them with this file).
Exit 0 with a one-line summary when the export verifies, exit 1 with `FAIL: seq N: <what>` (or
`FAIL: line L: <what>` for a line that is not an event) naming the first problem. With `--tree
DIR`, the export must also verify and DIR must be a workspace tree a signed terminal certified;
when it is not, the files that differ from the latest certified tree's manifest are listed (added,
removed, changed, mode changed). With `--commit REV` (rules §16.2), the commit's content must be
exactly a certified tree, none of whose own `.gitattributes` converts a path on checkout (§17.9,
the attribute and the path named): of the verified export, or of the server's project (`GET
/api/v1/certifications`, every envelope checked here against `--key`, else against the server's
own published keys with a warning); when it is not, the files that differ from the nearest
certified manifest are listed.

The export format (`reliability-governor-export/3`: header, events, attestations, keys, reviewer
keys and their assertions (reviewers' passkey signatures of decisions,
`governor.domain.passkey`), the manifests of certified trees and of their contracts' start
trees, from which a certified terminal's changes digest recomputes, signed head) and every formula
checked here — canonical JSON,
receipts, chain hashes, DSSE statements, tree ids — are specified in docs/api.md, "Evidence anyone
can check". A certified terminal whose attempt has tamper findings (rules §17.5) must follow a
delivery approval that accepted every one of them. A `/1` export (no head line) still
verifies, with a warning that events after its last attested one are unprotected, and so does a
`/2` export (before signed decisions); so does any verification that trusted the export's own
keys instead of `--key` (the body of `GET /api/v1/keys`, or a JSON list of key lines, or one key
line), or its own reviewer keys instead of `--reviewer-keys`. Warnings go to stderr as
`WARNING: ...`; who decided what, signed or not, goes to stdout after the summary.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from governor.domain.attestation import (
    HEAD_PREDICATE_TYPE,
    AttestationError,
    decode_public_key,
    head_subject_name,
    key_id,
    subject_name,
    verify_envelope,
    workspace_tree_of,
)
from governor.domain.canonical import (
    JSONValueError,
    canonical_bytes,
    canonical_equal,
    loads_strict,
    receipt,
)
from governor.domain.chain import GENESIS, META_KEYS, event_hash
from governor.domain.changes import changes_digest, workspace_changes
from governor.domain.commits import (
    NOTES_REF,
    Certification,
    CertificationError,
    Commit,
    GitError,
    certification_of,
    certification_of_note,
    commit_tree_id,
    judge_commit,
    manifest_differences,
    read_commit,
    read_note,
    sessions_named,
)
from governor.domain.export import FORMAT, serialise_line, tree_ref
from governor.domain.fields import FieldsInvalid
from governor.domain.heldout import binding_problem
from governor.domain.passkey import (
    Decision,
    PasskeyError,
    Problem,
    ReviewerKey,
    SignedDecisions,
    load_reviewer_keys,
)
from governor.domain.tree import (
    TREE_ID_PREFIX,
    ManifestEntry,
    Tree,
    TreeError,
    exclusions_digest,
    hash_tree,
    manifest_tree_id,
    validate_exclusions,
)

FORMAT_V2 = "reliability-governor-export/2"
"""The format before signed decisions (no reviewer-key or assertion lines): still verified."""
FORMAT_V1 = "reliability-governor-export/1"
"""The format before signed heads: still verified, with a warning that its tail is unprotected."""


class ReceiptRule(NamedTuple):
    kind: str
    """The receipt kind (rules §1.4)."""
    field: str | None
    """The field of `data` holding the receipted document, or None when it is `data` itself."""
    may_lack: bool = False
    """Events recorded before this kind carried a receipt have none: a warning, not a failure."""


RECEIPTED_EVENTS: dict[str, ReceiptRule] = {
    "reliability/attempt": ReceiptRule("attempt", None),
    "reliability/terminal": ReceiptRule("terminal", None),
    "reliability/contract": ReceiptRule("contract", None),
    "reliability/code-verification": ReceiptRule("code-verification-result", None, may_lack=True),
    "reliability/contract-draft": ReceiptRule("contract-draft", None),
    "reliability/intent-review": ReceiptRule("intent-review", None),
    "reliability/contract-review": ReceiptRule("contract-review", None),
    "reliability/delivery-review": ReceiptRule("delivery-review", None),
    "reliability/outcome-contract": ReceiptRule("outcome-contract", None),
    "reliability/outcome-observation": ReceiptRule("outcome-observation", None),
    "reliability/outcome-terminal": ReceiptRule("outcome-terminal", None),
    "reliability/outcome-report": ReceiptRule("outcome-report", None),
    "reliability/reference": ReceiptRule("reference", None),
}
"""Event type → how its receipt recomputes: every receipt-bearing event the server writes."""

OUTCOME_CONTRACT_EVENTS = ("reliability/outcome-contract", "reliability/outcome-observation",
                           "reliability/outcome-terminal")
"""An outcome contract's record (docs/outcomes.md): each names what precedes it."""

ATTESTED_EVENTS = {"reliability/contract": "contract", "reliability/terminal": "terminal",
                   "reliability/outcome-terminal": "outcome-terminal"}
"""Event type → predicate kind of the attestation every such event written here must have."""

_HEADER_KEYS = {"kind", "format", "session", "project", "harness", "exportedAt"}
_EVENT_KEYS = {"kind", "session", "seq", "type", "time", "origin", "data", "prev", "hash"}
_ATTESTATION_KEYS = {"kind", "seq", "envelope"}
_KEY_KEYS = {"kind", "keyid", "algorithm", "publicKey"}
_PUBLISHED_KEY_KEYS = {"keyid", "algorithm", "publicKey"}  # GET /api/v1/keys, plus "active"
_HEAD_KEYS = {"kind", "session", "seq", "hash", "envelope"}
_MANIFEST_KEYS = {"kind", "tree", "exclusions", "entries"}
_ENTRY_KEYS = {"path", "mode", "blob"}
_SECTIONS = ("header", "event", "attestation", "key", "reviewer-key", "assertion", "manifest",
             "head")
UNPROTECTED_TAIL = ("format {format} has no signed head: {tail} could have been edited, added "
                    "or dropped unseen")
UNTRUSTED_KEYS = ("no --key given: trusted only the keys inside the export itself, so anyone "
                  "who can rewrite the export can re-sign it; pass --key with the body of "
                  "GET /api/v1/keys from the server you trust")
UNTRUSTED_REVIEWER_KEYS = (
    "no --reviewer-keys given: the signed decisions were checked only against the reviewer keys "
    "inside the export, and whoever runs the server could have registered a passkey in a "
    "reviewer's name; pass --reviewer-keys with the keys each reviewer published")


# --- verifying ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    message: str
    seq: int | None = None
    line: int | None = None

    def __str__(self) -> str:
        if self.seq is not None:
            return f"seq {self.seq}: {self.message}"
        return f"line {self.line}: {self.message}"


@dataclass(frozen=True)
class CertifiedTree:
    """A workspace tree that a signed certified terminal names, with its manifest."""

    seq: int
    """The terminal's seq."""
    tree: str
    exclusions: tuple[str, ...]
    entries: tuple[ManifestEntry, ...]
    terminal_receipt: str = ""


@dataclass(frozen=True)
class Report:
    session: str | None
    events: int
    attestations: int
    keys: int
    head: str
    failure: Failure | None = None
    warnings: tuple[str, ...] = ()
    """What the verification could not vouch for; the command line prints each loudly."""
    certified: tuple[CertifiedTree, ...] = ()
    """The certified trees, in terminal order (checked against the signed subjects)."""
    decisions: tuple[Decision, ...] = ()
    """Every reviewer's part in every review decision, signed (checked) or not, in seq order."""

    @property
    def ok(self) -> bool:
        return self.failure is None

    def summary(self) -> str:
        if self.failure is not None:
            return f"FAIL: {self.failure}"
        return (
            f"OK: session {self.session}: {self.events} events, "
            f"{self.attestations} attestations, {self.keys} keys, head {self.head}"
        )


class _Refused(Exception):
    def __init__(self, failure: Failure) -> None:
        super().__init__(str(failure))
        self.failure = failure


@dataclass
class _Event:
    seq: int
    type: str
    origin: str
    data: Any
    hash: str
    imported: bool
    line_no: int

    @property
    def predicate_kind(self) -> str | None:
        """The attestation this server must have written for the event, if any."""
        if self.origin != "governor" or self.imported:
            return None
        return ATTESTED_EVENTS.get(self.type)


class _Export:
    """One pass over the lines in order, then the attestations against the keys."""

    def __init__(self, trusted_keys: Mapping[str, Ed25519PublicKey] | None,
                 reviewer_keys: dict[str, ReviewerKey] | None = None) -> None:
        self.trusted_keys = trusted_keys
        self.signed_decisions = SignedDecisions(reviewer_keys)
        self.decisions: list[Decision] = []
        self.section: str | None = None
        self.header: dict[str, Any] = {}
        self.session: str | None = None
        self.head = GENESIS
        self.signed_head: tuple[int, dict[str, Any]] | None = None
        self.run_receipts: dict[str, int] = {}
        self.warnings: list[str] = []
        self.events: list[_Event] = []
        self.contract_receipts: dict[str, str] = {}
        self.latest_contract_at: dict[int, str | None] = {}
        self.outcome_contracts: dict[str, dict[str, Any]] = {}  # outcomeContractId -> data
        self.observation_receipts: dict[str, str] = {}  # receipt -> outcomeContractId
        self.attestations: list[tuple[int, int, Any]] = []
        self.export_keys: dict[str, Ed25519PublicKey] = {}
        self.attempt_trees: dict[str, tuple[str, str] | None] = {}
        self.terminal_trees: dict[int, tuple[str, str] | None] = {}
        self.contract_starts: dict[str, tuple[str, str] | None] = {}
        self.terminal_starts: dict[int, tuple[str, str] | None] = {}
        self.changes_at: list[tuple[int, tuple[str, str], tuple[str, str], str | None]] = []
        """Per certified terminal naming a start tree: (seq, tree, start, changesDigest)."""
        self.certified_at: list[tuple[int, tuple[str, str]]] = []
        self.manifests: dict[tuple[str, str], tuple[int, tuple[str, ...],
                                                    tuple[ManifestEntry, ...]]] = {}
        self.certified: list[CertifiedTree] = []
        # rules §17.5: each attempt's tamper findings, and those the latest delivery approval
        # since the last attempt accepted
        self.attempt_findings: dict[str, list[str]] = {}
        self.accepted: set[str] = set()
        self.reference: str | None = None  # rules §17.1: the logged reference's tree id
        # rules §17.8: the logged reference's workspace environment (tree id by directory)
        self.reference_environment: dict[str, Any] | None = None
        # the environment paths the latest contract's reviewers opened (`environmentChanges`)
        self.environment_opened: list[str] = []

    # where a problem is reported: inside the event section, at the seq expected there
    def refuse(self, line_no: int, message: str) -> _Refused:
        if self.section in ("header", "event"):
            return _Refused(Failure(message, seq=len(self.events), line=line_no))
        return _Refused(Failure(message, line=line_no))

    def read(self, line_no: int, raw: str | bytes) -> None:
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise self.refuse(line_no, f"line is not UTF-8 ({exc.reason})") from None
        text = raw[:-1] if raw.endswith("\n") else raw
        try:
            obj = loads_strict(text)
        except JSONValueError as exc:
            raise self.refuse(line_no, f"line is not strict JSON: {exc}") from None
        if type(obj) is not dict:
            raise self.refuse(line_no, "line is not a JSON object")
        if serialise_line(obj) != text:
            raise self.refuse(line_no, "line is not in canonical (RFC 8785) form")
        kind = obj.get("kind")
        if kind not in _SECTIONS:
            raise self.refuse(line_no, f"unknown line kind {kind!r}")
        if self.section is None and kind != "header":
            raise self.refuse(line_no, "the first line must be the header")
        if self.section is not None and _SECTIONS.index(kind) < _SECTIONS.index(self.section):
            raise self.refuse(line_no, f"{kind} line after the {self.section} lines")
        if kind == self.section and kind in ("header", "head"):
            raise self.refuse(line_no, f"a second {kind} line")
        if kind in ("reviewer-key", "assertion") and self.header.get("format") != FORMAT:
            raise self.refuse(line_no, f"{kind} line in a {self.header.get('format')} export")
        if kind == "header":
            self.read_header(line_no, obj)
        elif kind == "event":
            self.section = "event"
            self.read_event(line_no, obj)
        elif kind == "attestation":
            self.section = "attestation"
            self.read_attestation(line_no, obj)
        elif kind == "key":
            self.section = "key"
            self.read_key(line_no, obj)
        elif kind in ("reviewer-key", "assertion"):
            self.section = kind
            try:
                (self.signed_decisions.key_line if kind == "reviewer-key"
                 else self.signed_decisions.assertion_line)(line_no, obj)
            except Problem as problem:
                raise self.refuse(line_no, problem.message) from None
        elif kind == "manifest":
            self.section = "manifest"
            self.read_manifest(line_no, obj)
        else:
            self.section = "head"
            self.read_head(line_no, obj)

    def read_header(self, line_no: int, obj: dict[str, Any]) -> None:
        if set(obj) != _HEADER_KEYS:
            raise self.refuse(line_no, f"header: expected exactly the keys {sorted(_HEADER_KEYS)}")
        if obj["format"] not in (FORMAT, FORMAT_V2, FORMAT_V1):
            raise self.refuse(line_no, f"header: format must be {FORMAT!r}, {FORMAT_V2!r} or "
                                       f"{FORMAT_V1!r}")
        session = obj["session"]
        if type(session) is not str or not _is_uuid(session):
            raise self.refuse(line_no, "header: session must be a UUID string")
        if type(obj["project"]) is not str:
            raise self.refuse(line_no, "header: project must be a string")
        if obj["harness"] is not None and type(obj["harness"]) is not dict:
            raise self.refuse(line_no, "header: harness must be an object or null")
        if type(obj["exportedAt"]) is not int:
            raise self.refuse(line_no, "header: exportedAt must be an integer (ms)")
        self.section = "header"
        self.header = obj
        self.session = session

    def read_event(self, line_no: int, obj: dict[str, Any]) -> None:
        seq = len(self.events)
        missing = _EVENT_KEYS - set(obj)
        unknown = set(obj) - _EVENT_KEYS - set(META_KEYS)
        if missing or unknown:
            raise self.refuse(
                line_no, f"event keys: missing {sorted(missing)}, unknown {sorted(unknown)}"
            )
        if obj["session"] != self.session:
            raise self.refuse(line_no, f"event session {obj['session']!r} is not the header's")
        if type(obj["seq"]) is not int or obj["seq"] != seq:
            raise self.refuse(line_no, f"expected seq {seq}, found {obj['seq']!r}")
        if type(obj["type"]) is not str or not obj["type"]:
            raise self.refuse(line_no, "type must be a non-empty string")
        if type(obj["time"]) is not int:
            raise self.refuse(line_no, "time must be an integer (ms)")
        if obj["origin"] not in ("agent", "governor"):
            raise self.refuse(line_no, "origin must be 'agent' or 'governor'")
        if obj["prev"] != self.head:
            previous = "GENESIS" if seq == 0 else f"the hash of seq {seq - 1}"
            raise self.refuse(line_no, f"prev is not {previous}")
        meta = {key: obj[key] for key in META_KEYS if key in obj}
        recomputed = event_hash(
            session=obj["session"],
            seq=seq,
            type=obj["type"],
            time=obj["time"],
            origin=obj["origin"],
            data=obj["data"],
            prev=obj["prev"],
            meta=meta,
        )
        if obj["hash"] != recomputed:
            raise self.refuse(line_no, "hash does not recompute (the event was altered)")
        rule = RECEIPTED_EVENTS.get(obj["type"])
        if rule is not None:
            self.check_receipt(line_no, obj["type"], obj["data"], rule)
        try:
            self.signed_decisions.event(seq, obj["type"], obj["data"])
        except Problem as problem:
            raise self.refuse(line_no, problem.message) from None
        event = _Event(
            seq=seq,
            type=obj["type"],
            origin=obj["origin"],
            data=obj["data"],
            hash=recomputed,
            imported=obj.get("imported") is True,
            line_no=line_no,
        )
        if event.type == "reliability/code-verification" and type(event.data) is dict:
            run_receipt = event.data.get("receipt")
            if type(run_receipt) is str:
                self.run_receipts.setdefault(run_receipt, seq)
            if (unbound := binding_problem(event.data)) is not None:
                raise self.refuse(line_no, f"reliability/code-verification: {unbound}")
            overlay = event.data.get("overlay")
            if overlay is not None and (type(overlay) is not dict
                                        or overlay.get("reference") != self.reference):
                raise self.refuse(line_no, "reliability/code-verification: its overlay's "
                                           "reference is not the session's reference")
            if changed := self.environment_changed(event.data):
                raise self.refuse(line_no, "reliability/code-verification: passed with an "
                                           f"environment directory ({changed}) that is not "
                                           "the session's reference's (rules §17.8)")
        if event.type == "reliability/reference" and obj["origin"] == "governor":
            tree = event.data.get("tree") if type(event.data) is dict else None
            self.reference = tree.get("id") if type(tree) is dict else None
            environment = event.data.get("environment") if type(event.data) is dict else None
            self.reference_environment = environment if type(environment) is dict else None
        if event.type == "reliability/contract":
            contract_id = contract_id_of(event.type, event.data)
            if contract_id is not None:
                self.contract_receipts[contract_id] = event.data["receipt"]
                self.contract_starts[contract_id] = tree_ref(event.data.get("startTree"))
                opened = event.data.get("environmentChanges")
                self.environment_opened = [pattern for pattern in opened or []
                                           if type(pattern) is str] if type(
                    opened) is list else []
        if event.type == "reliability/attempt" and type(event.data) is dict:
            self.attempt_trees[event.data["receipt"]] = tree_ref(event.data.get("tree"))
            self.attempt_findings[event.data["receipt"]] = tamper_finding_ids(event.data)
            self.accepted = set()
        if event.type == "reliability/delivery-review" and type(event.data) is dict:
            approved = event.data.get("decision") == "approved"
            self.accepted = set(event.data.get("acceptedFindings") or []) if approved else set()
        if event.type == "reliability/terminal" and not event.imported:
            left = self.unaccepted_findings(event.data)
            if left:
                raise self.refuse(line_no, "reliability/terminal: certified over tamper findings "
                                           f"no person accepted: {', '.join(left)}")
        if event.type == "reliability/terminal":
            contract_id = contract_id_of(event.type, event.data)
            self.latest_contract_at[seq] = self.contract_receipts.get(contract_id or "")
            self.terminal_starts[seq] = self.contract_starts.get(contract_id or "")
            attempt = event.data.get("attemptReceipt") if type(event.data) is dict else None
            self.terminal_trees[seq] = self.attempt_trees.get(attempt) if type(
                attempt) is str else None
        if event.type in OUTCOME_CONTRACT_EVENTS and obj["origin"] == "governor":
            outcome_refusal = self.outcome_problem(seq, event.type, event.data)
            if outcome_refusal:
                raise self.refuse(line_no, f"{event.type}: {outcome_refusal}")
        self.events.append(event)
        self.head = recomputed

    def environment_changed(self, run: dict[str, Any]) -> str:
        """Rules §17.8: the first workspace environment directory a passed run ran with whose
        tree is not the one the session's reference recorded ("" when none; a session whose
        reference records no environment predates the rule). A directory a pattern of the
        contract's `environmentChanges` may reach (one starting with it, or with a wildcard) is
        not judged: a person opened paths in it, and the export holds no manifest of it."""
        environment = run.get("environment")
        trees = environment.get("trees") if type(environment) is dict else None
        if run.get("passed") is not True or type(trees) is not dict or (
                self.reference_environment is None):
            return ""
        return next((path for path, tree in sorted(trees.items())
                     if self.reference_environment.get(path) != tree
                     and not any(pattern.startswith((f"{path}/", "*"))
                                 for pattern in self.environment_opened)), "")

    def unaccepted_findings(self, terminal: Any) -> list[str]:
        """Rules §17.5: the tamper findings of a certified terminal's attempt that the delivery
        approval after that attempt did not accept (only a person's acceptance certifies)."""
        if type(terminal) is not dict or terminal.get("status") != "certified":
            return []
        findings = self.attempt_findings.get(str(terminal.get("attemptReceipt")), [])
        return [finding for finding in findings if finding not in self.accepted]

    def outcome_problem(self, seq: int, event_type: str, data: dict[str, Any]) -> str:
        """An outcome record must name what precedes it: the certified delivery contract's
        receipt, its own outcome contract's receipt, an earlier observation."""
        outcome_id = data.get("outcomeContractId")
        if event_type == "reliability/outcome-contract":
            delivery = self.contract_receipts.get(str(data.get("deliveryContractId")))
            if delivery is None or delivery != data.get("deliveryContractReceipt"):
                return "deliveryContractReceipt is not the receipt of an earlier contract event"
            self.outcome_contracts[str(outcome_id)] = data
            return ""
        contract = self.outcome_contracts.get(str(outcome_id))
        if contract is None:
            return f"no outcome-contract event for {outcome_id!r} precedes it"
        if data.get("contractId") != contract["deliveryContractId"]:
            return "contractId is not its outcome contract's delivery contract"
        if event_type == "reliability/outcome-observation":
            self.observation_receipts[str(data.get("receipt"))] = str(outcome_id)
            return ""
        if data.get("outcomeContractReceipt") != contract["receipt"]:
            return "outcomeContractReceipt is not its outcome contract's receipt"
        observation = data.get("observationReceipt")
        if observation is not None and self.observation_receipts.get(observation) != outcome_id:
            return "observationReceipt names no earlier observation of this outcome contract"
        if data.get("causalClaimPermitted") != (
                contract["profile"].get("attribution") != "correlational"):
            return "causalClaimPermitted does not follow the bound profile's attribution"
        self.latest_contract_at[seq] = contract["deliveryContractReceipt"]
        return ""

    def check_receipt(self, line_no: int, event_type: str, data: Any, rule: ReceiptRule) -> None:
        document = data
        where = "data"
        if rule.field is not None:
            document = data.get(rule.field) if type(data) is dict else None
            where = f"data.{rule.field}"
        if rule.may_lack and type(document) is dict and "receipt" not in document:
            self.warnings.append(f"seq {len(self.events)}: {event_type} has no {rule.kind!r} "
                                 "receipt (recorded before it carried one)")
            return
        if type(document) is not dict or type(document.get("receipt")) is not str:
            raise self.refuse(line_no, f"{event_type}: {where} must be an object with a receipt")
        payload = {key: value for key, value in document.items() if key != "receipt"}
        if receipt(rule.kind, payload) != document["receipt"]:
            raise self.refuse(
                line_no, f"{event_type}: {where}.receipt does not recompute ({rule.kind!r})"
            )

    def read_attestation(self, line_no: int, obj: dict[str, Any]) -> None:
        if set(obj) != _ATTESTATION_KEYS:
            raise self.refuse(
                line_no, f"attestation: expected exactly the keys {sorted(_ATTESTATION_KEYS)}"
            )
        seq = obj["seq"]
        if type(seq) is not int:
            raise self.refuse(line_no, "attestation: seq must be an integer")
        if self.attestations and seq <= self.attestations[-1][1]:
            raise self.refuse(line_no, f"attestation of seq {seq} is out of seq order")
        self.attestations.append((line_no, seq, obj["envelope"]))

    def read_key(self, line_no: int, obj: dict[str, Any]) -> None:
        try:
            keyid, public_key = parse_key_line(obj)
        except AttestationError as exc:
            raise self.refuse(line_no, str(exc)) from None
        if self.export_keys and keyid <= max(self.export_keys):
            raise self.refuse(line_no, f"key {keyid} is out of keyid order")
        self.export_keys[keyid] = public_key

    def read_manifest(self, line_no: int, obj: dict[str, Any]) -> None:
        """A certified tree's manifest: its entries must hash to the tree id it names."""
        if set(obj) != _MANIFEST_KEYS:
            raise self.refuse(line_no,
                              f"manifest: expected exactly the keys {sorted(_MANIFEST_KEYS)}")
        tree = obj["tree"]
        if type(tree) is not str or not tree.startswith(TREE_ID_PREFIX):
            raise self.refuse(line_no, f"manifest: tree must be a {TREE_ID_PREFIX}<hex> id")
        try:
            exclusions = validate_exclusions(obj["exclusions"])
        except FieldsInvalid as exc:
            raise self.refuse(line_no, f"manifest: {exc}") from None
        if list(exclusions) != obj["exclusions"]:
            raise self.refuse(line_no, "manifest: exclusions must be sorted and distinct")
        raw = obj["entries"]
        if type(raw) is not list or any(type(e) is not dict or set(e) != _ENTRY_KEYS
                                        for e in raw):
            raise self.refuse(line_no, "manifest: entries must be a list of objects with "
                                       f"exactly the keys {sorted(_ENTRY_KEYS)}")
        entries = tuple(ManifestEntry(e["path"], e["mode"], e["blob"]) for e in raw)
        try:
            recomputed = manifest_tree_id(entries)
        except TreeError as exc:
            raise self.refuse(line_no, f"manifest of {tree}: entry {exc}") from None
        if recomputed != tree:
            raise self.refuse(line_no, f"manifest: its entries make the tree {recomputed}, "
                                       f"not {tree}")
        key = (tree, exclusions_digest(exclusions))
        if self.manifests and key <= max(self.manifests):
            raise self.refuse(line_no, f"manifest of {tree} is out of order or repeated")
        self.manifests[key] = (line_no, exclusions, entries)

    def read_head(self, line_no: int, obj: dict[str, Any]) -> None:
        if self.header.get("format") not in (FORMAT, FORMAT_V2):
            raise self.refuse(line_no, f"head line in a {self.header.get('format')} export")
        if set(obj) != _HEAD_KEYS:
            raise self.refuse(line_no, f"head: expected exactly the keys {sorted(_HEAD_KEYS)}")
        if obj["session"] != self.session:
            raise self.refuse(line_no, "head: session is not the header's")
        if type(obj["seq"]) is not int or type(obj["hash"]) is not str:
            raise self.refuse(line_no, "head: seq must be an integer and hash a string")
        self.signed_head = (line_no, obj)

    def check_head(self, end_line: int) -> None:
        """§12: a /2 export's last event is the one its signed head names, with that hash."""
        last = len(self.events) - 1
        attested = [seq for _, seq, _ in self.attestations]
        tail = (f"the events after seq {attested[-1]} (the last attested)" if attested
                else "all its events")
        if self.header["format"] == FORMAT_V1:
            self.warnings.append(UNPROTECTED_TAIL.format(format=FORMAT_V1, tail=tail))
            return
        if self.signed_head is None:
            raise _Refused(Failure(f"no signed head line: a {FORMAT} export must end with one",
                                   line=end_line))
        line_no, obj = self.signed_head
        keys = self.export_keys if self.trusted_keys is None else self.trusted_keys
        try:
            statement = verify_envelope(obj["envelope"], keys, predicate_type=HEAD_PREDICATE_TYPE)
        except AttestationError as exc:
            raise self.refuse(line_no, f"head: {exc}") from None
        subject, predicate = statement["subject"][0], statement["predicate"]
        signed = {"subject": subject["name"], "digest": subject["digest"]["sha256"],
                  "seq": predicate["seq"], "project": predicate["project"],
                  "harness": predicate["harness"]}
        expected = {"subject": head_subject_name(self.session or ""), "digest": obj["hash"],
                    "seq": obj["seq"], "project": self.header["project"],
                    "harness": self.header["harness"]}
        for name, value in expected.items():
            if not canonical_equal(signed[name], value):
                raise self.refuse(line_no, f"head: the signed {name} is not the export's")
        seq = obj["seq"]
        if seq < last:
            raise _Refused(Failure(f"event after the signed head, which ends at seq {seq}: "
                                   "appended after the export was signed", seq=seq + 1))
        if seq > last:
            raise _Refused(Failure(f"missing: the signed head ends at seq {seq}, the events at "
                                   f"seq {last} (events were dropped)", seq=last + 1))
        if obj["hash"] != self.head:
            raise _Refused(Failure(f"the chain hash is not the signed head's: one of {tail} "
                                   "was altered and the chain re-hashed", seq=last))

    def check_attestations(self) -> None:
        keys = self.export_keys if self.trusted_keys is None else self.trusted_keys
        attested: set[int] = set()
        for line_no, seq, envelope in self.attestations:
            where = f"attestation of seq {seq}"
            if not 0 <= seq < len(self.events):
                raise self.refuse(line_no, f"{where}: no event has that seq")
            event = self.events[seq]
            predicate_kind = event.predicate_kind
            if predicate_kind is None:
                raise self.refuse(
                    line_no, f"{where}: a {event.type} event ({event.origin}) is not attested"
                )
            try:
                statement = verify_envelope(envelope, keys)
            except AttestationError as exc:
                raise self.refuse(line_no, f"{where}: {exc}") from None
            problem = self.statement_problem(event, predicate_kind, statement)
            if problem:
                raise self.refuse(line_no, f"{where}: {problem}")
            attested.add(seq)
            tree = self.terminal_trees.get(seq)
            if tree is not None and event.data.get("status") == "certified":
                self.certified_at.append((seq, tree))
                start = self.terminal_starts.get(seq)
                if start is not None and "startTree" in statement["predicate"]:
                    self.changes_at.append(
                        (seq, tree, start, statement["predicate"].get("changesDigest")))
        for event in self.events:
            if event.predicate_kind is not None and event.seq not in attested:
                raise _Refused(Failure(f"{event.type} event has no attestation", seq=event.seq))

    def statement_problem(self, event: _Event, kind: str, statement: dict[str, Any]) -> str:
        subject = statement["subject"][0]
        contract_id = contract_id_of(event.type, event.data)
        if contract_id is None:
            return "the event names no contract id"
        if subject["name"] != subject_name(self.session or "", contract_id):
            return f"subject {subject['name']!r} is not this session and contract"
        if subject["digest"]["sha256"] != event.hash:
            return "subject digest is not the hash of the event it signs"
        predicate = statement["predicate"]
        if predicate["kind"] != kind:
            return f"predicate kind {predicate['kind']!r} for a {event.type} event"
        if predicate["eventSeq"] != event.seq:
            return f"predicate eventSeq {predicate['eventSeq']} is not {event.seq}"
        if kind == "contract":
            expected_contract = event.data.get("receipt")
        elif kind == "outcome-terminal":
            return self.outcome_statement_problem(event, predicate)
        else:
            expected_contract = self.latest_contract_at.get(event.seq)
            if expected_contract is None:
                return f"no contract event for contract {contract_id!r} precedes the terminal"
        if predicate["contractReceipt"] != expected_contract:
            return "predicate contractReceipt is not the contract's receipt"
        if kind == "terminal":
            data = event.data
            if predicate["terminalReceipt"] != data.get("receipt"):
                return "predicate terminalReceipt is not the terminal's receipt"
            if predicate.get("attemptReceipt") != data.get("attemptReceipt"):
                return "predicate attemptReceipt is not the terminal's attemptReceipt"
            if predicate["status"] != data.get("status"):
                return "predicate status is not the terminal's status"
            for run_receipt in predicate.get("runReceipts", []):
                if self.run_receipts.get(run_receipt, event.seq) >= event.seq:
                    return (f"predicate run receipt {run_receipt} is not the receipt of a "
                            "reliability/code-verification event before the terminal")
            if "reason" not in data or not canonical_equal(predicate["reason"], data["reason"]):
                return "predicate reason is not the terminal's reason"
            tree = self.terminal_trees.get(event.seq)
            if workspace_tree_of(statement) != (
                    None if tree is None else tree[0].removeprefix(TREE_ID_PREFIX)):
                return "the workspace subject is not the tree the deciding attempt judged"
            start = self.terminal_starts.get(event.seq)
            if "startTree" in predicate and (start is None or predicate["startTree"] != start[0]):
                return "predicate startTree is not the start tree of the terminal's contract"
        return ""

    def outcome_statement_problem(self, event: _Event, predicate: dict[str, Any]) -> str:
        data = event.data
        contract = self.outcome_contracts.get(str(data.get("outcomeContractId")), {})
        expected = {
            "contractReceipt": contract.get("deliveryContractReceipt"),
            "profileReceipts": [contract.get("profileReceipt")],
            "status": data.get("status"), "terminalReceipt": data.get("receipt"),
            "outcomeContractReceipt": data.get("outcomeContractReceipt"),
            "causalClaimPermitted": data.get("causalClaimPermitted"),
        }
        for name, value in expected.items():
            if predicate[name] != value:
                return f"predicate {name} is not the outcome terminal's"
        if not canonical_equal(predicate["reason"], data.get("reason")):
            return "predicate reason is not the outcome terminal's reason"
        return ""

    def check_signed_decisions(self) -> None:
        """Issue 18: every reviewer's passkey signature of a decision (governor.domain.passkey)."""
        try:
            self.decisions = self.signed_decisions.check()
        except Problem as problem:
            raise _Refused(Failure(problem.message, seq=problem.seq, line=problem.line)) from None
        if self.signed_decisions.signed and self.signed_decisions.trusted is None:
            self.warnings.append(UNTRUSTED_REVIEWER_KEYS)

    def check_manifests(self) -> None:
        """§10.2: the export carries the manifest of every certified tree and of its contract's
        start tree, and no other; §14.8: a certified terminal's changes digest recomputes from
        the two."""
        for seq, key in self.certified_at:
            if key not in self.manifests:
                raise _Refused(Failure(f"the certified tree {key[0]} (exclusions {key[1]}) has "
                                       "no manifest line", seq=seq))
            _, exclusions, entries = self.manifests[key]
            self.certified.append(CertifiedTree(seq, key[0], exclusions, entries,
                                                str(self.events[seq].data.get("receipt"))))
        for seq, tree, start, digest in self.changes_at:
            if start not in self.manifests:
                raise _Refused(Failure(f"the start tree {start[0]} (exclusions {start[1]}) of a "
                                       "certified terminal has no manifest line", seq=seq))
            changes = workspace_changes(self.manifests[start][2], self.manifests[tree][2])
            if digest is not None and changes_digest(changes) != digest:
                raise _Refused(Failure("predicate changesDigest does not recompute from the "
                                       "start and certified trees' manifests", seq=seq))
        starts = (self.terminal_starts.get(seq) for seq, _ in self.certified_at)
        named = {key for _, key in self.certified_at} | {key for key in starts if key}
        for key, (line_no, _, _) in self.manifests.items():
            if key not in named:
                raise self.refuse(line_no, f"manifest of {key[0]} (exclusions {key[1]}): no "
                                           "signed certified terminal names this tree or its "
                                           "contract's start tree")

    def report(self, failure: Failure | None) -> Report:
        keys = self.export_keys if self.trusted_keys is None else self.trusted_keys
        return Report(
            session=self.session,
            events=len(self.events),
            attestations=len(self.attestations),
            keys=len(keys),
            head=self.head,
            failure=failure,
            warnings=tuple(self.warnings),
            certified=tuple(self.certified),
            decisions=tuple(self.decisions),
        )


def tamper_finding_ids(attempt: dict[str, Any]) -> list[str]:
    """The ids of the tamper findings in an attempt's results (rules §17.5)."""
    results = attempt.get("results")
    return [str(finding.get("id")) for result in results if type(result) is dict
            and result.get("kind") == "tamper_free" and type(result.get("findings")) is list
            for finding in result["findings"] if type(finding) is dict
            ] if type(results) is list else []


def contract_id_of(event_type: str, data: Any) -> str | None:
    """The contract an attested event is about: `data.contractId` (a contract event's data is
    the stored contract itself)."""
    value = data.get("contractId") if type(data) is dict else None
    return value if type(value) is str else None


def parse_key_line(obj: Any) -> tuple[str, Ed25519PublicKey]:
    """(keyid, public key) of a key line; the keyid must be the one derived from the key."""
    if type(obj) is not dict or set(obj) != _KEY_KEYS or obj["kind"] != "key":
        raise AttestationError(f"key line: expected exactly the keys {sorted(_KEY_KEYS)}")
    if obj["algorithm"] != "ed25519":
        raise AttestationError("key line: algorithm must be 'ed25519'")
    public_key = decode_public_key(obj["publicKey"])
    if obj["keyid"] != key_id(public_key):
        raise AttestationError(f"key line: keyid {obj['keyid']!r} is not derived from the key")
    return obj["keyid"], public_key


def load_trusted_keys(text: str | bytes) -> dict[str, Ed25519PublicKey]:
    """The keys of a key file: the body of `GET /api/v1/keys` as it is (`{"keys": [{keyid,
    algorithm, publicKey, active}]}`), a JSON list of key lines, or one key line."""
    try:
        value = loads_strict(text)
    except JSONValueError as exc:
        raise AttestationError(f"key file: {exc}") from None
    if type(value) is dict and set(value) == {"keys"}:
        if type(value["keys"]) is not list:
            raise AttestationError("key file: keys must be a list")
        items = [_published_key_line(item) for item in value["keys"]]
    else:
        items = value if type(value) is list else [value]
    if not items:
        raise AttestationError("key file: no keys")
    keys = dict(parse_key_line(item) for item in items)
    return keys


def _published_key_line(item: Any) -> Any:
    """A key as `GET /api/v1/keys` lists it, as a key line (retired keys are trusted too: they
    signed the older attestations)."""
    if type(item) is not dict or not _PUBLISHED_KEY_KEYS <= set(item) <= _PUBLISHED_KEY_KEYS | {
            "active"}:
        raise AttestationError(f"key file: each key has exactly the keys "
                               f"{sorted(_PUBLISHED_KEY_KEYS)} and optionally 'active'")
    return {"kind": "key", **{name: item[name] for name in _PUBLISHED_KEY_KEYS}}


def verify_export(
    lines: Iterable[str | bytes], trusted_keys: Mapping[str, Ed25519PublicKey] | None = None,
    reviewer_keys: dict[str, ReviewerKey] | None = None,
) -> Report:
    """Verify an export line by line; the report names the first problem, if any. With
    `trusted_keys`, attestations must be signed by those keys, whatever keys the export lists;
    with `reviewer_keys`, so must every signed decision be, by those reviewers' keys."""
    export = _Export(trusted_keys, reviewer_keys)
    line_no = 0
    try:
        for line_no, raw in enumerate(lines, start=1):
            export.read(line_no, raw)
        if export.section is None:
            raise _Refused(Failure("the export is empty: no header", line=line_no + 1))
        export.check_attestations()
        export.check_signed_decisions()
        export.check_manifests()
        export.check_head(end_line=line_no + 1)
    except _Refused as refused:
        return export.report(refused.failure)
    if trusted_keys is None:
        export.warnings.append(UNTRUSTED_KEYS)
    return export.report(None)


# --- a directory against the certified trees (python -m governor.verify EXPORT --tree DIR) -------


@dataclass(frozen=True)
class TreeCheck:
    ok: bool
    summary: str
    differences: tuple[str, ...] = ()
    """One line per path that differs from the latest certified tree, in path order."""


def check_tree(certified: Sequence[CertifiedTree], directory: str) -> TreeCheck:
    """Is `directory` a tree one of `certified` (a verified export's) names? Hashed with each
    certified tree's exclusions, as the server hashed it; when it is none of them, the paths that
    differ from the latest one's manifest."""
    if not certified:
        return TreeCheck(False, "FAIL: no signed certified terminal in the export names a "
                                "workspace tree")
    root = os.path.realpath(directory)
    hashed: dict[tuple[str, ...], Tree] = {}
    try:
        for entry in reversed(certified):
            if entry.exclusions not in hashed:
                hashed[entry.exclusions] = hash_tree(root, exclusions=entry.exclusions,
                                                     max_files=sys.maxsize, max_bytes=sys.maxsize)
            if hashed[entry.exclusions].id == entry.tree:
                return TreeCheck(True, f"OK: {directory} is {entry.tree}, the tree the "
                                       f"terminal at seq {entry.seq} certified")
    except TreeError as exc:
        return TreeCheck(False, f"FAIL: {directory} cannot be hashed: {exc}")
    latest = certified[-1]
    differences = manifest_differences(latest.entries, hashed[latest.exclusions].manifest)
    return TreeCheck(False, f"FAIL: {directory} is {hashed[latest.exclusions].id}, not "
                            f"{latest.tree}, the tree the terminal at seq {latest.seq} "
                            f"certified; {len(differences)} difference"
                            f"{'' if len(differences) == 1 else 's'}:", differences)


def _is_uuid(text: str) -> bool:
    try:
        return str(uuid.UUID(text)) == text
    except ValueError:
        return False


# --- a commit against the certified trees (python -m governor.verify --commit REV --repo DIR) ----


SERVER_KEYS = ("no --key given: the signatures were checked against the keys the server itself "
               "publishes (GET /api/v1/keys); pass --key with the keys you trust")


class ServerError(Exception):
    pass


def server_get(server: str, token: str, path: str, **params: str) -> Any:
    """The JSON body of an authenticated GET on the governor at `server`."""
    url = server.rstrip("/") + path + ("?" + urllib.parse.urlencode(params) if params else "")
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise ServerError(f"{server!r} is not an http(s) URL")
    request = urllib.request.Request(url, headers={  # noqa: S310 - the scheme is checked
        "Authorization": f"Bearer {token}", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            body = response.read()
    except urllib.error.HTTPError as exc:
        raise ServerError(f"the governor at {server} answered {exc.code} to GET {path}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ServerError(f"the governor at {server} cannot be reached ({reason})") from None
    try:
        return loads_strict(body)
    except JSONValueError as exc:
        raise ServerError(f"the governor at {server} answered GET {path} with no JSON: "
                          f"{exc}") from None


def server_certifications(server: str, token: str, keys: Mapping[str, Ed25519PublicKey],
                          commit: Commit, repo: str) -> list[Certification]:
    """The project's certifications of the commit's content (its tree id without exclusions)
    and those of the sessions its trailers (or its nearest ancestor's) name (with their
    exclusions and manifests), each
    envelope checked against `keys` here: the server is asked, never believed."""
    queries: list[dict[str, str]] = []
    with contextlib.suppress(TreeError):  # judge_commit says why
        queries.append({"tree": commit_tree_id(commit.entries)[0]})
    queries += [{"session": session} for session in sessions_named(repo, commit)]
    found: dict[tuple[str, int], Certification] = {}
    for query in queries:
        body = server_get(server, token, "/api/v1/certifications", **query)
        items = body.get("certifications") if type(body) is dict else None
        if type(items) is not list:
            raise ServerError("GET /api/v1/certifications: no certifications list")
        for item in items:
            if type(item) is not dict or not {"envelope", "tree", "exclusions"} <= set(item):
                raise ServerError("GET /api/v1/certifications: an item is malformed")
            certification = certification_of(item["envelope"], keys,
                                             exclusions=validate_exclusions(item["exclusions"]),
                                             entries=item.get("entries"))
            if certification.tree != item["tree"]:
                raise CertificationError("the server's certification names another tree than "
                                         "its signed terminal")
            found[(certification.session, certification.seq)] = certification
    return sorted(found.values(), key=lambda c: (c.session, c.seq))


def export_certifications(report: Report) -> list[Certification]:
    """The certifications of a verified export."""
    return [Certification(report.session or "", entry.seq, entry.tree, entry.terminal_receipt,
                          entry.exclusions, entry.entries) for entry in report.certified]


def _verify_commit(args: argparse.Namespace, trusted_keys: Mapping[str, Ed25519PublicKey] | None,
                   certified: list[Certification] | None) -> int:
    try:
        commit = read_commit(args.repo, args.commit)
        if certified is None:
            token = Path(args.token).read_text(encoding="utf-8").strip()
            if trusted_keys is None:
                print(f"WARNING: {SERVER_KEYS}", file=sys.stderr)
                trusted_keys = load_trusted_keys(canonical_bytes(
                    server_get(args.server, token, "/api/v1/keys")))
            certified = server_certifications(args.server, token, trusted_keys, commit,
                                              args.repo)
        verdict = judge_commit(commit, certified)
    except (GitError, OSError, ServerError, CertificationError, AttestationError,
            FieldsInvalid) as exc:
        print(f"FAIL: {exc}")
        return 1
    for line in verdict.lines():
        print(line)
    return 0 if verdict.ok else 1


def _verify_note(args: argparse.Namespace) -> int:
    """rules §16.3, §19.3: the commit's note, checked against the trusted keys alone."""
    try:
        trusted_keys = load_trusted_keys(Path(args.key).read_bytes())
        commit = read_commit(args.repo, args.commit)
        raw = read_note(args.repo, NOTES_REF, commit.oid)
        if raw is None:
            print(f"FAIL: commit {commit.oid[:12]} has no note under {NOTES_REF}")
            return 1
        verdict = judge_commit(commit, [certification_of_note(raw, trusted_keys)])
    except (GitError, OSError, CertificationError, AttestationError, FieldsInvalid) as exc:
        print(f"FAIL: {exc}")
        return 1
    for line in verdict.lines():
        print(line)
    return 0 if verdict.ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m governor.verify",
        description="Verify a Reliability Governor session export offline: hash chain, "
        "receipts and signed attestations; or whether a git commit's content is a certified "
        "tree (--commit), against an export or a governor (--server).",
    )
    parser.add_argument("export", nargs="?", help="the export (JSONL) to verify")
    parser.add_argument(
        "--key",
        metavar="KEYFILE",
        help="trust only the keys in this file: the body of GET /api/v1/keys as it is (or a "
        "JSON list of key lines, or one key line)",
    )
    parser.add_argument(
        "--reviewer-keys",
        metavar="FILE",
        help="check signed decisions against these reviewer keys only (a JSON list of reviewer "
        "keys, as each reviewer downloads theirs from the passkeys page), not the export's own",
    )
    parser.add_argument(
        "--tree",
        metavar="DIR",
        help="also check that DIR is a workspace tree a signed terminal of the export certified, "
        "and list the files that differ when it is not",
    )
    parser.add_argument("--commit", metavar="REV",
                        help="check that this commit's content is exactly a certified tree "
                        "(of the export, or of the --server's project); list the files that "
                        "differ when it is not")
    parser.add_argument("--repo", metavar="DIR", default=".",
                        help="the git repository of --commit (default: .)")
    parser.add_argument("--server", metavar="URL",
                        help="with --commit: ask this governor for the certifications of the "
                        "commit's tree (GET /api/v1/certifications) instead of an export")
    parser.add_argument("--token", metavar="FILE",
                        help="with --server: a file holding an agent or gate token of the "
                        "project")
    parser.add_argument("--note", action="store_true",
                        help="with --commit and --key: check the commit against the signed "
                        "certification its git note carries (refs/notes/governor, as "
                        "`governor-agent commit` and `governor-agent gate` add it), offline")
    args = parser.parse_args(argv)
    if args.note:
        if args.commit is None or args.key is None or args.server or args.export:
            parser.error("--note goes with --commit and --key, and no export or --server")
        return _verify_note(args)
    if args.commit is None and (args.server or args.token):
        parser.error("--server and --token go with --commit")
    if args.server is not None and (args.export is not None or args.token is None):
        parser.error("--server needs --token, and no export")
    if args.export is None and args.server is None:
        parser.error("an export is needed (or --commit with --server)")
    trusted_keys = reviewer_keys = None
    try:
        if args.key is not None:
            trusted_keys = load_trusted_keys(Path(args.key).read_bytes())
        if args.reviewer_keys is not None:
            reviewer_keys = load_reviewer_keys(Path(args.reviewer_keys).read_bytes())
        data = Path(args.export).read_bytes() if args.export is not None else None
    except (OSError, AttestationError, PasskeyError) as exc:
        print(f"FAIL: {exc}")
        return 1
    if data is None:
        return _verify_commit(args, trusted_keys, None)
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    report = verify_export(lines, trusted_keys, reviewer_keys)
    for warning in report.warnings:
        print(f"WARNING: {warning}", file=sys.stderr)
    print(report.summary())
    if not report.ok:
        return 1
    for decision in report.decisions:
        print(f"  {decision}")
    if args.tree is not None:
        checked = check_tree(report.certified, args.tree)
        print(checked.summary)
        for difference in checked.differences:
            print(f"  {difference}")
        if not checked.ok:
            return 1
    if args.commit is not None:
        return _verify_commit(args, trusted_keys, export_certifications(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The export format (docs/architecture.md, docs/api.md): one canonical JSON text per line. The
server's export (`governor/services/exports.py` `export_lines`) writes it with these; the
offline verifier (`governor/verify.py`) reads it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from governor.domain.attestation import encode_public_key, key_id
from governor.domain.canonical import canonical_bytes
from governor.domain.chain import META_KEYS
from governor.domain.passkey import ASSERTION_FIELDS, b64url, cose_to_spki
from governor.domain.tree import TREE_ID_PREFIX, ManifestEntry

FORMAT = "reliability-governor-export/3"
ExportLine = dict[str, object]  # one line's JSON object, as `serialise_line` writes it


def export_filename(session: str) -> str:
    """The name a session's export downloads as."""
    return f"session-{session}.jsonl"


def serialise_line(line: Mapping[str, object]) -> str:
    """The exact text of one export line, without its "\\n"."""
    return canonical_bytes(line).decode("utf-8")


def header_line(
    *, session: str, project: str, harness: Mapping[str, object] | None, exported_at: int
) -> ExportLine:
    return {
        "kind": "header",
        "format": FORMAT,
        "session": session,
        "project": project,
        "harness": harness,
        "exportedAt": exported_at,
    }


def event_line(
    *,
    session: str,
    seq: int,
    type: str,
    time: int,
    origin: str,
    data: object,
    prev: str,
    hash: str,
    meta: Mapping[str, object] | None = None,
) -> ExportLine:
    line = {
        "kind": "event",
        "session": session,
        "seq": seq,
        "type": type,
        "time": time,
        "origin": origin,
        "data": data,
        "prev": prev,
        "hash": hash,
    }
    for key, value in (meta or {}).items():
        if key not in META_KEYS:
            raise ValueError(f"event meta: {key!r} is not one of {list(META_KEYS)}")
        line[key] = value
    return line


def attestation_line(*, seq: int, envelope: Mapping[str, object]) -> ExportLine:
    return {"kind": "attestation", "seq": seq, "envelope": dict(envelope)}


def key_line(public_key: Ed25519PublicKey) -> ExportLine:
    return {
        "kind": "key",
        "keyid": key_id(public_key),
        "algorithm": "ed25519",
        "publicKey": encode_public_key(public_key),
    }


def reviewer_key_line(*, credential_id: str, user_id: int, username: str, rp_id: str,
                      cose: bytes) -> ExportLine:
    """A reviewer's passkey public key (issue 18): the COSE key as registered, and the same key
    as a DER SubjectPublicKeyInfo, which `cryptography` loads."""
    algorithm, spki = cose_to_spki(cose)
    return {"kind": "reviewer-key", "credentialId": credential_id, "userId": user_id,
            "username": username, "rpId": rp_id, "algorithm": algorithm, "cose": b64url(cose),
            "spki": b64url(spki)}


def assertion_line(*, seq: int, assertion: Mapping[str, str]) -> ExportLine:
    """A reviewer's passkey assertion over the decision event at `seq`."""
    return {"kind": "assertion", "seq": seq,
            **{name: assertion[name] for name in ASSERTION_FIELDS}}


def manifest_line(*, tree: str, exclusions: Sequence[str],
                  entries: Iterable[ManifestEntry]) -> ExportLine:
    """The manifest of a certified tree: every file and symlink (path, mode, blob id) and the
    exclusion patterns it was hashed with."""
    return {"kind": "manifest", "tree": tree, "exclusions": list(exclusions),
            "entries": [{"path": path, "mode": mode, "blob": blob}
                        for path, mode, blob in entries]}


def head_line(*, session: str, seq: int, hash: str, envelope: Mapping[str, object]) -> ExportLine:
    return {"kind": "head", "session": session, "seq": seq, "hash": hash,
            "envelope": dict(envelope)}


def tree_ref(value: object) -> tuple[str, str] | None:
    """(tree id, exclusions digest) of a tree reference `{"id", "exclusions"}` in event data;
    None when there is none (events recorded before trees were) or it is not one."""
    if type(value) is not dict or set(value) != {"id", "exclusions"}:
        return None
    tree, digest = value["id"], value["exclusions"]
    if type(tree) is not str or not tree.startswith(TREE_ID_PREFIX) or type(digest) is not str:
        return None
    return tree, digest

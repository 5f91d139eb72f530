"""docs/architecture.md: the per-session hash chain.

hash = sha256(JCS({session, seq, type, time, origin, data, prev[, meta]})) as 64 lowercase hex.
`meta` carries the envelope keys beyond the core ones (sourceSeq, ignorable, surfaceOp,
sourceEventSeqs, imported) when an event has any, so every exported byte is covered by the chain.
"""

from __future__ import annotations

import hashlib
from typing import Any

from governor.domain.canonical import canonical_bytes_checked

GENESIS = "0" * 64
META_KEYS = ("sourceSeq", "ignorable", "surfaceOp", "sourceEventSeqs", "imported")
# Envelope key as the agent sends it -> meta key as stored, hashed and exported.
ENVELOPE_TO_META = (("seq", "sourceSeq"), ("ignorable", "ignorable"), ("surfaceOp", "surfaceOp"),
                    ("sourceEventSeqs", "sourceEventSeqs"))


def event_hash(
    *,
    session: str,
    seq: int,
    type: str,
    time: int,
    origin: str,
    data: Any,
    prev: str,
    meta: dict[str, Any] | None = None,
) -> str:
    body: dict[str, Any] = {
        "session": session,
        "seq": seq,
        "type": type,
        "time": time,
        "origin": origin,
        "data": data,
        "prev": prev,
    }
    if meta:
        body["meta"] = meta
    # Values were checked on the way in (canonical.check_json_value).
    return hashlib.sha256(canonical_bytes_checked(body)).hexdigest()

"""What a receipt names, within one project: a governor event, a review proposal, or a verifier
profile definition."""

from __future__ import annotations

import re
from typing import Any

from governor.lib.errors import Invalid, NotFound
from governor.models import Event, Origin, Project
from reviews.models import Review
from verification.models import ProfileVersion

RECEIPT_RE = re.compile(r"^sha256:[0-9a-f]{64}$")


def receipt_lookup(*, project: Project, receipt: str) -> dict[str, Any]:
    if not RECEIPT_RE.match(receipt):
        raise Invalid("receipt must be 'sha256:' followed by 64 lowercase hex digits",
                      details=[{"path": "receipt", "message": "malformed"}])
    # Governor event data is stored as compact JSON text, so the key and value appear exactly so.
    event = (Event.objects.filter(session__project=project, origin=Origin.GOVERNOR,
                                  data__contains=f'"receipt":"{receipt}"')
             .order_by("session_id", "seq").first())
    if event is not None:
        return {"kind": "event", "session": str(event.session_id), "seq": event.seq,
                "type": event.type, "data": event.data}
    review = Review.objects.filter(session__project=project, receipt=receipt).first()
    if review is not None:
        return {"kind": "review-proposal", "session": str(review.session_id),
                "stage": review.stage, "status": review.status, "proposal": review.proposal}
    version = ProfileVersion.objects.filter(profile__project=project, receipt=receipt).first()
    if version is not None:
        definition = version.definition  # never the command or its environment (agents read)
        return {"kind": "code-verification-profile", "profile": version.profile.profile_id,
                "sandbox_mode": definition["sandboxMode"], "timeout_ms": definition["timeoutMs"],
                "current": version.profile.receipt == receipt}
    raise NotFound(f"no record with receipt {receipt} in this project")

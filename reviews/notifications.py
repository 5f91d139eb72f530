"""What reviewers are told when a proposal waits: the payload of the e-mail and of the signed
webhook. `reviews/tasks.py` sends both through Celery, so the API never waits on a mail server
or a webhook receiver."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any

from django.conf import settings

from governor.selectors.reviews import review_url
from reviews.models import Review


def webhook_signature(secret: str, timestamp: int, body: bytes) -> str:
    """`t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>." + body>` — the receiver recomputes it
    and rejects old timestamps, so a captured request cannot be replayed later."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def waiting_payload(review: Review) -> dict[str, Any]:
    return {
        "event": "review.waiting", "review": str(review.pk), "session": str(review.session_id),
        "project": review.session.project.slug, "stage": review.stage,
        "proposal_receipt": review.receipt, "expires_at": review.expires_at.isoformat(),
        "url": review_url(review),
    }


def outcome_payload(session_id: str, project: str, terminal: dict[str, Any]) -> dict[str, Any]:
    """An outcome contract reached its terminal (achieved, missed, inconclusive, expired)."""
    return {
        "event": "outcome.terminal", "session": session_id, "project": project,
        "outcome_contract": terminal["outcomeContractId"], "status": terminal["status"],
        "reason": terminal["reason"], "causal_claim_permitted": terminal["causalClaimPermitted"],
        "terminal_receipt": terminal["receipt"],
        "url": f"{settings.PUBLIC_URL}/sessions/{session_id}/#outcome",
    }


def signed_request(secret: str, payload: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    headers = {"Content-Type": "application/json",
               "X-Governor-Signature": webhook_signature(secret, int(time.time()), body)}
    return body, headers

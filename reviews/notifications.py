"""Telling reviewers a proposal waits: email, and a signed webhook when the project has one.
Both go through Celery so the API never waits on a mail server or a webhook receiver."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from typing import Any

from reviews.models import Review
from reviews.services import review_url

log = logging.getLogger(__name__)


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


def signed_request(secret: str, payload: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    body = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    headers = {"Content-Type": "application/json",
               "X-Governor-Signature": webhook_signature(secret, int(time.time()), body)}
    return body, headers


def proposal_waiting(review: Review) -> None:
    from reviews import tasks

    try:
        tasks.notify_reviewers.delay(str(review.pk))
        if review.session.project.webhook_url:
            tasks.post_webhook.delay(str(review.pk))
    except Exception:  # noqa: BLE001 - the broker being down must not fail the agent's call
        log.exception("could not queue notifications for review %s", review.pk)

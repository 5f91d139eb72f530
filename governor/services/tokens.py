"""Agent tokens: shown once, stored as a SHA-256 digest, revocable."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import Any

from django.utils import timezone

from governor.lib.errors import Invalid
from governor.models import AgentToken, Project, TokenKind

TOKEN_PREFIX = "gov_"  # noqa: S105 - a public marker, not a secret
LAST_USED_RESOLUTION = timedelta(seconds=60)


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def token_create(*, project: Project, name: str, owner: Any,
                 kind: str = TokenKind.AGENT) -> tuple[AgentToken, str]:
    """A new token and its secret; the secret is never stored and cannot be shown again.
    Every token has an `owner`, the person who runs the agent: they may not approve what it
    proposes. `kind` gate: a CI job's token that may only gate changes (rules §19.2)."""
    if kind not in TokenKind.values:
        raise Invalid(f"kind: must be one of {', '.join(TokenKind.values)}",
                      details=[{"path": "kind", "message": "unknown token kind"}])
    if owner is None:
        raise Invalid("owner: every agent token needs an owner, the person who runs the agent",
                      details=[{"path": "owner", "message": "required"}])
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = AgentToken.objects.create(
        project=project, name=name, owner=owner, kind=kind, prefix=secret[:12],
        digest=_digest(secret)
    )
    return token, secret


def token_authenticate(secret: str) -> AgentToken | None:
    if not secret.startswith(TOKEN_PREFIX) or len(secret) > 200:
        return None
    token = (
        AgentToken.objects.select_related("project")
        .filter(digest=_digest(secret), revoked_at__isnull=True)
        .first()
    )
    if token is None:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        AgentToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


def token_revoke(*, token: AgentToken) -> None:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])

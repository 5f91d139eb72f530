"""GET /api/v1/certifications: the project's certified terminals with their signed envelopes."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Router

from governor.api.auth import AgentOrGateBearer, agent_token
from governor.api.errors import ERROR_RESPONSES
from governor.api.schemas import CertificationsOut
from governor.selectors.certifications import certifications_for

router = Router(tags=["certified commits"])


@router.get("/certifications", response={200: CertificationsOut, **ERROR_RESPONSES},
            auth=AgentOrGateBearer())
def certifications(request: HttpRequest, tree: str | None = None,
                   session: str | None = None) -> dict[str, object]:
    """The certified terminals of the caller's project for one tree id (`tree`) or one session
    (`session`, with each certified tree's manifest): each with its DSSE envelope, the tree's
    exclusions and its terminal receipt. A verifier checks the envelopes against the keys."""
    return {"certifications": certifications_for(token=agent_token(request), tree=tree,
                                                 session=session)}

"""The one place a contract becomes active (rules §5, §6, §9, §10.2): at begin with review
off (`governor/services/contracts.py`), or at the evidence approval of a two-stage review
(`governor/services/reviews.py`)."""

from __future__ import annotations

import uuid
from typing import Any

from governor.domain import contracts as domain
from governor.domain import drafting, lifecycle
from governor.domain.canonical import JSONObject
from governor.domain.documents import ContractDocument
from governor.lib.errors import Conflict, Invalid
from governor.models import AgentToken, Event, Origin, Project, Session, SessionState
from governor.selectors.drafts import draft_receipt_used
from governor.selectors.profiles import profile_receipts
from governor.services.attestations import attest
from governor.services.events import governor_event_append
from governor.services.outcome_contracts import outcome_contract_bind
from governor.services.trees import TreeUnavailable, session_tree_reference


def _draft_by_receipt(session: Session, receipt: str) -> dict[str, Any] | None:
    for data in (Event.objects.filter(session=session, type=lifecycle.CONTRACT_DRAFT,
                                      origin=Origin.GOVERNOR)
                 .order_by("-seq").values_list("data", flat=True)):
        if isinstance(data, dict) and data.get("receipt") == receipt:
            return data
    return None


def contract_activate(
    *,
    session: Session,
    state: SessionState,
    proposal: domain.Proposal,
    started_at_seq: int,
    version: int,
    coverage_receipt: str,
    contract_id: str | None = None,
    approved_authorship: JSONObject | None = None,
    tree: object = None,
    baselines: dict[str, str] | None = None,
    start_tree: dict[str, str] | None = None,
    begun_by: AgentToken | None = None,
    **review_refs: str,
) -> ContractDocument:
    """Write the contract event and sign it. Called inside `session_locked`.
    A reviewed contract keeps the authorship its reviewers approved (`approved_authorship`).
    Its `startTree` is the workspace tree now (§10.2; a snapshot session's: the snapshot `tree`
    names, else — a reviewed contract activated at approval — its latest); a workspace that
    cannot be hashed refuses the activation (nothing is written). `start_tree`: the tree's
    reference when the caller hashed it under the same lock. Its caller queues the
    baseline runs (`runs_request_baseline`) once it has left the session's lock. `begun_by`:
    the agent token whose begin it is, named in the contract (rules §17.10)."""
    draft = None
    if proposal.draft_receipt is not None:  # §9: the draft named at begin, found by receipt
        used_by = draft_receipt_used(session, proposal.draft_receipt)
        draft = _draft_by_receipt(session, proposal.draft_receipt)
        if used_by is not None or draft is None:
            raise Conflict(f"draft {proposal.draft_receipt} "
                           + (f"already opened contract {used_by}" if used_by
                              else "is not a draft of this session"))
    try:
        start_tree = start_tree or session_tree_reference(session, tree)
    except TreeUnavailable as exc:
        # Invalid, not Conflict: the API answers 422 and a reviewer's page says "Nothing was
        # decided." with the reason.
        raise Invalid(f"the contract cannot start: {exc}",
                      details=[{"path": "workspace", "message": str(exc)}]) from None
    document = domain.contract_document(
        proposal, contract_id=contract_id or f"contract-{uuid.uuid4()}", version=version,
        started_at_seq=started_at_seq, coverage_receipt=coverage_receipt,
        authorship=approved_authorship or drafting.contract_authorship(
            str(session.project.authoring_mode), draft),
        start_tree=start_tree, baselines=baselines,
        begun_by=None if begun_by is None else begun_by.as_ref(), **review_refs,
    )
    event = governor_event_append(session=session, state=state, type=lifecycle.CONTRACT,
                                  data=document)
    attest(session=session, event=event, contract=document,
           profile_receipts=_profiles_used(session.project, document))
    outcome_contract_bind(session=session, contract=document)
    return document


def _profiles_used(project: Project, contract: ContractDocument) -> list[str]:
    current = profile_receipts(project)
    named = {check.get("profile") for check in contract["checks"]
             if check.get("kind") == "code_verification_succeeded"}
    return [current[name] for name in sorted(n for n in named if n in current)]

"""Writing a contract's terminal (rules §7), once: after its deciding attempt, after a
person approved the delivery (issue 28), or when the agent abstains."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from governor.domain import attempts, lifecycle
from governor.domain.documents import ContractDocument, TerminalDocument
from governor.lib import metrics
from governor.models import Session, SessionState
from governor.selectors.sessions import lifecycle_of
from governor.services.attestations import attest
from governor.services.events import governor_event_append
from governor.services.outcome_contracts import outcome_contract_drop, outcome_contract_start


@dataclass(frozen=True)
class TerminalEvidence:
    """What a terminal's attestation names: the deciding attempt, the tree it judged, the runs
    it counted (their result receipts) and the profile receipts they ran — not the profiles as
    they are now — and the digest of the changes since the start tree (§14.8)."""

    attempt_receipt: str | None
    tree: dict[str, str] | None = None
    profile_receipts: Sequence[str] = field(default_factory=tuple)
    run_receipts: Sequence[str] = field(default_factory=tuple)
    changes_digest: str | None = None


def terminal_write(*, session: Session, state: SessionState, contract: ContractDocument,
                   status: str, reason: str, evidence: TerminalEvidence) -> TerminalDocument:
    """Write the terminal and sign it (inside `session_locked`). A certified one also names
    the contract's start tree and the changes digest."""
    terminal = attempts.terminal_payload(contract_id=contract["contractId"], status=status,
                                         reason=reason, attempt_receipt=evidence.attempt_receipt)
    event = governor_event_append(session=session, state=state, type=lifecycle.TERMINAL,
                                  data=terminal)
    certified = status == "certified"
    start = contract.get("startTree")
    attest(session=session, event=event, contract=contract, terminal=terminal,
           profile_receipts=evidence.profile_receipts, run_receipts=evidence.run_receipts,
           tree=None if evidence.tree is None else evidence.tree["id"],
           start_tree=start["id"] if certified and start else None,
           changes_digest=evidence.changes_digest if certified else None)
    _count(session.project.slug, status, len(lifecycle_of(state)["attempts"]))
    if certified:
        outcome_contract_start(session=session, state=state, delivery=contract)
    else:
        outcome_contract_drop(session=session, delivery_contract_id=contract["contractId"])
    return terminal


def _count(project: str, status: str, attempts_made: int) -> None:
    def record() -> None:
        metrics.TERMINALS.labels(status=status, project=project).inc()
        if status == "certified":
            metrics.ATTEMPTS_PER_CERTIFICATION.labels(project=project).observe(attempts_made)
    metrics.count_on_commit(record)

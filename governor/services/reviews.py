"""Opening, deciding, withdrawing and expiring reviews (rules §6). The review pages, tasks and
notifications live in `reviews/`, above this module."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Q
from django.utils import timezone

from governor.domain import attempts, lifecycle
from governor.domain import contracts as contract_domain
from governor.domain import review as domain
from governor.domain.documents import (
    Check,
    ContractDocument,
    DecidedBy,
    EventSignature,
    ReviewDecisionDocument,
)
from governor.lib import metrics
from governor.lib.errors import Conflict, Invalid, NotFound
from governor.lib.notify import announce_on_commit, inbox_topic, review_topic
from governor.lib.queue import task_send_on_commit
from governor.models import AgentToken, Session, SessionState
from governor.selectors.access import is_reviewer
from governor.selectors.passkeys import event_signatures
from governor.selectors.profiles import profile_receipts
from governor.selectors.reviews import carried_approval, review_as_read, review_status
from governor.selectors.sessions import lifecycle_of
from governor.services import passkeys
from governor.services.activation import contract_activate
from governor.services.events import (
    governor_event_append,
    session_locked,
)
from governor.services.runs import runs_request_baseline
from governor.services.terminals import TerminalEvidence, terminal_write
from reviews.models import Approval, LineComment, Review, Side, Stage, Status

log = logging.getLogger(__name__)
EVENT_TYPES: dict[str, str] = {Stage.INTENT: lifecycle.INTENT_REVIEW,
                               Stage.EVIDENCE: lifecycle.CONTRACT_REVIEW,
                               Stage.DELIVERY: lifecycle.DELIVERY_REVIEW}


NOTIFY_REVIEWERS, POST_WEBHOOK = "reviews.tasks.notify_reviewers", "reviews.tasks.post_webhook"


class DecisionRefused(Conflict):
    """A reviewer's decision that decides nothing; the message says why."""


class StaleReceipt(DecisionRefused):
    """The receipt a reviewer posted is not the session's current pending proposal."""


class SignatureRequired(DecisionRefused):
    """The project requires approvals signed with the reviewer's passkey (issue 18)."""


class OwnAgent(DecisionRefused):
    """Separation of duties: the owner of the agent's token may not approve its proposals."""


class UnknownDecision(Invalid):
    def __init__(self, message: str) -> None:
        super().__init__(message, details=[{"path": "decision", "message": "unknown decision"}])


# How each refusal of `governor.domain.review.decide` is raised.
REFUSALS: dict[str, type[Exception]] = {
    domain.REFUSED_UNKNOWN: UnknownDecision, domain.REFUSED_UNSIGNED: SignatureRequired,
    domain.REFUSED_OWN_AGENT: OwnAgent, domain.REFUSED_CARRIED: DecisionRefused,
    domain.REFUSED_EXPIRED: StaleReceipt, domain.REFUSED_STALE: StaleReceipt,
}


def review_expire_due(session: Session) -> None:
    """Record the expiry of the session's pending review if its time has passed (it already
    reads as expired: `governor.selectors.reviews.review_as_read`), in its own transaction."""
    if Review.objects.filter(session=session, status=Status.PENDING,
                             expires_at__lte=timezone.now()).exists():
        with session_locked(session) as state:
            review_settle(session, state)


def review_settle(session: Session, state: SessionState) -> Review | None:
    """Inside `session_locked`: the session's pending review, read once (its row locked; one
    is pending at most). One whose time has passed is recorded as expired first — a delivery's
    expiry may end its contract — and then none is pending."""
    return reviews_settle(session, state).pending


@dataclass(frozen=True)
class Settled:
    pending: Review | None
    revision_requests: list[Review]  # the session's delivery revision requests, newest first


def reviews_settle(session: Session, state: SessionState) -> Settled:
    """`review_settle`, and in the same read the revision requests of the session's delivered
    changes (issue 40: a stop on a tree a person asked to change is no new attempt)."""
    rows = list(Review.objects.select_for_update().filter(session=session).filter(
        Q(status=Status.PENDING) | Q(stage=Stage.DELIVERY, status=Status.REVISION_REQUESTED))
        .order_by("-created_at"))
    review = next((row for row in rows if row.status == Status.PENDING), None)
    requests = [row for row in rows if row.status == Status.REVISION_REQUESTED]
    if review is not None and review.expires_at <= timezone.now():
        _decide(review, state, decision=Status.EXPIRED, decided_by={"kind": "system"})
        return Settled(None, requests)
    return Settled(review, requests)


def _plan(proposal: contract_domain.Proposal, **extra: object) -> dict[str, object]:
    return {**asdict(proposal), **extra}


def _create(session: Session, stage: str, proposal: domain.ReviewProposal,
            plan: Mapping[str, object],
            proposed_by: AgentToken | None) -> Review:
    ttl = timedelta(seconds=session.project.review_ttl_seconds)
    review = Review.objects.create(
        session=session, stage=stage, proposal=proposal,
        receipt=domain.proposal_receipt(stage, proposal), plan=plan, proposed_by=proposed_by,
        expires_at=timezone.now() + ttl,
    )
    _notify_on_commit(review)
    announce_on_commit(review_topic(session.pk))
    announce_on_commit(inbox_topic(session.project_id))
    return review


def _notify_on_commit(review: Review) -> None:
    """Once the proposal is committed, e-mail the project's reviewers and call its webhook
    (reviews/tasks.py). A broker that is down must not fail the agent's call: it is logged."""

    def unsent(exc: Exception) -> None:
        log.error("could not queue notifications for review %s: %s", review.pk, exc)

    task_send_on_commit(NOTIFY_REVIEWERS, str(review.pk), on_failure=unsent)
    if review.session.project.webhook_url:
        task_send_on_commit(POST_WEBHOOK, str(review.pk), on_failure=unsent)


def review_open_delivery(*, session: Session, state: SessionState, token: AgentToken,
                         contract: ContractDocument, evidence: TerminalEvidence,
                         changes: list[dict[str, str]] | None,
                         environments: Mapping[str, str | None]) -> dict[str, Any]:
    """The delivery stage (issue 28): every check of `contract` passed on its last attempt,
    made with `token`; a person reviews the delivered change before it is certified. Called
    inside the attempt's lock, after the attempt was logged. The proposal binds the `evidence`
    the terminal will cite, and names the tokens that began the contract and made its attempts,
    read from the log (rules §17.10). Its plan keeps the `environments` the attempt hashed:
    after a revision request, a stop on the same tree in the same environments is no new
    attempt (issue 40)."""
    attempts = [record["data"] for record in lifecycle_of(state)["attempts"]]
    document = domain.delivery_proposal(
        session_id=str(session.pk), contract=contract, attempts=attempts, changes=changes,
        profile_receipts=evidence.profile_receipts, run_receipts=evidence.run_receipts,
        changes_digest=evidence.changes_digest)
    plan = {"contract_id": contract["contractId"], "environments": dict(environments)}
    return review_status(_create(session, Stage.DELIVERY, document, plan, token))


def review_open(*, session: Session, proposed_by: AgentToken,
                proposal: contract_domain.Proposal, assessment: dict[str, Any],
                started_at_seq: int, authorship: dict[str, Any]) -> dict[str, Any]:
    """Stage 1: the intent proposal, sent with `proposed_by`. Called inside the begin
    transaction."""
    assert proposal.intent is not None
    document = domain.intent_proposal(session_id=str(session.pk), kind=proposal.kind,
                                      objective=proposal.objective, intent=proposal.intent,
                                      authorship=authorship)
    plan = _plan(proposal, assessment=assessment, started_at_seq=started_at_seq,
                 authorship=authorship)
    return review_status(_create(session, Stage.INTENT, document, plan, proposed_by))


def _decide(review: Review, state: SessionState, *, decision: str, decided_by: DecidedBy,
            feedback: str = "", user: User | None = None,
            carried_from: list[str] | None = None,
            signatures: list[EventSignature] | None = None,
            accepted: list[str] | None = None) -> ReviewDecisionDocument:
    decision = Status(decision).value  # plain str: enum members are not JSON values
    intent_receipt = None
    if review.stage == Stage.EVIDENCE:
        intent_receipt = review.proposal["approvedIntent"]["proposalReceipt"]
    comments = [comment.as_sent() for comment in review.comments.all()]
    payload = domain.decision_payload(stage=review.stage, proposal_receipt=review.receipt,
                                      decision=decision, decided_by=decided_by,
                                      feedback=feedback,
                                      intent_proposal_receipt=intent_receipt,
                                      carried_from=carried_from, signatures=signatures,
                                      comments=comments, accepted=accepted)
    governor_event_append(session=review.session, state=state, type=EVENT_TYPES[review.stage],
                          data=payload)
    review.status = decision
    review.decided_by = user
    review.decided_at = timezone.now()
    review.decision_receipt = payload["receipt"]
    review.feedback = feedback
    review.save(update_fields=["status", "decided_by", "decided_at", "decision_receipt",
                               "feedback"])
    announce_on_commit(review_topic(review.session_id))
    announce_on_commit(inbox_topic(review.session.project_id))
    _count(str(review.stage), decision, review.session.project.slug,
           (review.decided_at - review.created_at).total_seconds())
    if review.stage == Stage.DELIVERY:
        _delivery_decided(review, state, decision, payload["receipt"], len(accepted or []))
    return payload


def _count(stage: str, decision: str, project: str, seconds: float) -> None:
    def record() -> None:
        metrics.REVIEW_DECISIONS.labels(stage=stage, decision=decision, project=project).inc()
        metrics.REVIEW_DECISION_SECONDS.labels(stage=stage, decision=decision).observe(seconds)
    metrics.count_on_commit(record)


def _delivery_evidence(review: Review) -> TerminalEvidence:
    """What the terminal cites: exactly what the delivery proposal's receipt binds."""
    proposal = review.proposal
    return TerminalEvidence(attempt_receipt=proposal["attemptReceipt"], tree=proposal["tree"],
                            profile_receipts=proposal["profileReceipts"],
                            run_receipts=proposal["runReceipts"],
                            changes_digest=proposal["changesDigest"])


def _delivery_decided(review: Review, state: SessionState, decision: str,
                      decision_receipt: str, accepted: int) -> None:
    """A delivery review decided: the terminal `governor.domain.attempts.decide_delivery` gives
    (certified, or exhausted), written with the evidence of the passing attempt the review
    kept; none when the contract is active again, or ended meanwhile."""
    folded = lifecycle_of(state)
    record = folded["contract"]
    contract = record["data"] if record is not None else None
    verdict = attempts.decide_delivery(
        decision=decision, decision_receipt=decision_receipt,
        contract_open=(contract is not None and folded["terminal"] is None
                       and contract["contractId"] == review.plan["contract_id"]),
        attempts_made=len(folded["attempts"]),
        max_attempts=attempts.max_attempts_of(contract)
        if contract is not None else 0, accepted_findings=accepted)
    if verdict is not None:
        assert contract is not None
        status, reason = verdict
        terminal_write(session=review.session, state=state, contract=contract, status=status,
                       reason=reason, evidence=_delivery_evidence(review))


def _parts(review: Review) -> list[domain.TokenPart]:
    """Every agent token's part in what `review` decides, whatever its stage: the token that
    created the session; the one that began the contract (its intent and evidence proposals
    are sent with it); and for a delivery, the ones its proposal names from the log (the
    contract's begin and every attempt)."""
    parts: list[domain.TokenPart] = []
    creator = review.session.created_by
    if creator is not None:
        parts.append({"token": creator.as_ref(), "did": "created the session"})
    if review.stage == Stage.DELIVERY:
        parts += review.proposal["tokens"]
    elif review.proposed_by is not None:
        parts.append({"token": review.proposed_by.as_ref(), "did": "began the contract"})
    return parts


def _own_part(user: User, review: Review) -> str | None:
    """Separation of duties (rules §6.5, §17.10): what `user`'s own agent tokens did here, in
    words, if anything."""
    parts = _parts(review)
    owned = set(AgentToken.objects.filter(
        owner=user, pk__in={part["token"]["id"] for part in parts}).values_list("pk", flat=True))
    return domain.took_part(parts, owned)


def review_decide(*, user: User, review: Review, receipt: str, decision: str,
                  feedback: object = None, carried_from: str = "",
                  signed: passkeys.Signed | None = None,
                  accepted_findings: object = None) -> Review:
    """A reviewer's decision on exactly the proposal they saw (its receipt). An approval may
    carry `user`'s earlier approval of the same receipt (its decision receipt, §13): it is
    recorded as an ordinary approval that names it. `signed`: the reviewer's passkey signature
    of exactly this decision (governor.services.passkeys), which a project may require of
    approvals. `accepted_findings`: the ids of the proposal's tamper findings the reviewer
    accepts (rules §17.5); an approval of a proposal with findings must accept every one."""
    text = domain.feedback_text(feedback)
    session = review.session
    if not is_reviewer(user, session.project_id):
        raise NotFound("review not found")
    review_expire_due(session)  # in its own transaction: a due proposal fails closed
    with session_locked(session) as state:
        review = Review.objects.select_for_update().select_related("session__project").get(
            pk=review.pk)
        earlier = carried_approval(user, review) if carried_from else None
        approvers = set(review.approvals.values_list("user_id", flat=True))
        verdict = domain.decide(domain.DecisionFacts(
            decision=decision, status=review.status, expired=review.expires_at <= timezone.now(),
            # The stored proposal must still be what its receipt binds (rules §17.10).
            receipt_is_current=receipt == review.receipt == domain.proposal_receipt(
                review.stage, review.proposal),
            signed=signed is not None,
            signatures_required=session.project.require_signed_approvals,
            own_part=_own_part(user, review),
            carried_is_theirs=(None if not carried_from else earlier is not None
                               and earlier.review.decision_receipt == carried_from),
            approvals_before=len(approvers - {user.pk}), approved_before=user.pk in approvers,
            required_approvals=session.project.required_approvals))
        if verdict.refused is not None:
            raise REFUSALS[verdict.refused](verdict.reason)
        findings = review.proposal.get("tamperFindings") or []
        accepted = domain.accepted_findings(accepted_findings, findings)
        left = [str(finding["id"]) for finding in findings if finding["id"] not in accepted]
        if decision == Status.APPROVED and left:
            raise DecisionRefused(f"approving this delivery accepts every tamper finding, and "
                                  f"{len(left)} {'is' if len(left) == 1 else 'are'} not "
                                  f"accepted: {', '.join(left)}")
        who: DecidedBy = {"kind": "reviewer", "userId": user.pk}
        if decision == Status.APPROVED:
            _, created = Approval.objects.get_or_create(review=review, user=user,
                                                        defaults={"carried_from": carried_from})
            if created and signed is not None:
                passkeys.signature_record(review, user, signed)
            approvals = list(review.approvals.order_by("created_at").values_list(
                "user_id", "carried_from"))
            if not verdict.decided:
                return review
            signatures = event_signatures(review.signatures.filter(
                decision=Status.APPROVED).select_related("passkey"))
            payload = _decide(review, state, decision=decision, user=user, feedback=text,
                              decided_by={"kind": "reviewers",
                                          "userIds": [user_id for user_id, _ in approvals]},
                              carried_from=[receipt for _, receipt in approvals if receipt],
                              signatures=signatures, accepted=accepted)
            activated = _advance(review, state, payload)
        else:
            rows = [passkeys.signature_record(review, user, signed)] if signed else []
            _decide(review, state, decision=decision, decided_by=who, feedback=text, user=user,
                    signatures=event_signatures(rows))
            activated = None
    if activated is not None:
        runs_request_baseline(session=session, contract=activated)
    return review


def _advance(review: Review, state: SessionState,
             decision: ReviewDecisionDocument) -> ContractDocument | None:
    """After an approval: the intent stage opens the evidence stage; the evidence stage
    activates the contract (version 5) through the one activation service, and returns it (a
    delivery stage's approval was decided with the decision: `_delivery_decided`)."""
    if review.stage == Stage.DELIVERY:
        return None
    plan = dict(review.plan)
    proposal = contract_domain.Proposal(
        objective=plan["objective"], claims=plan["claims"], checks=plan["checks"],
        max_attempts=plan["max_attempts"], intent=plan["intent"],
        draft_receipt=plan["draft_receipt"], kind=plan["kind"],
        protected_changes=plan.get("protected_changes", []),
        environment_changes=plan.get("environment_changes", []),
        outcome_profile=plan.get("outcome_profile"), outcome=plan.get("outcome"))
    if review.stage == Stage.INTENT:
        contract_id = f"contract-{uuid.uuid4()}"
        document = domain.evidence_proposal(
            session_id=str(review.session_id), contract_id=contract_id, kind=proposal.kind,
            objective=proposal.objective, claims=proposal.claims, checks=proposal.checks,
            max_attempts=proposal.max_attempts, authorship=plan["authorship"],
            coverage=plan["assessment"], intent_proposal=review.proposal,
            intent_proposal_receipt=review.receipt, intent_review_receipt=decision["receipt"],
            protected_changes=proposal.protected_changes,
            environment_changes=proposal.environment_changes, outcome=proposal.outcome,
            profile_receipts=_named_profile_receipts(review.session, proposal.checks))
        plan["contract_id"] = contract_id
        _create(review.session, Stage.EVIDENCE, document, plan, review.proposed_by)
        return None
    intent = review.proposal["approvedIntent"]
    return contract_activate(
        session=review.session, state=state, proposal=proposal,
        started_at_seq=plan["started_at_seq"], version=contract_domain.CONTRACT_VERSION_REVIEWED,
        coverage_receipt=plan["assessment"]["receipt"], contract_id=plan["contract_id"],
        baselines=plan["assessment"].get("baselines"), begun_by=review.proposed_by,
        approved_authorship=review.proposal["authorship"],
        intent_proposal_receipt=intent["proposalReceipt"],
        intent_review_receipt=intent["reviewReceipt"],
        contract_proposal_receipt=review.receipt, contract_review_receipt=decision["receipt"])


def _named_profile_receipts(session: Session, checks: list[Check]) -> dict[str, str]:
    named = {str(check["profile"]) for check in checks
             if check.get("kind") == "code_verification_succeeded"}
    return {profile: receipt for profile, receipt in profile_receipts(session.project).items()
            if profile in named}


MAX_COMMENT_PATH = 4096


def review_comment_add(*, user: User, review: Review, path: str, spot: str,
                       body: str) -> LineComment:
    """A reviewer's comment on one line of a pending delivery's change: `spot` is "n<line>" in
    the delivered tree or "o<line>" in the contract-start tree (a removed line)."""
    text = domain.feedback_text(body)
    if not text:
        raise Invalid("body: say something", details=[{"path": "body", "message": "is empty"}])
    if not path or len(path) > MAX_COMMENT_PATH:
        raise Invalid("path: must name a file of the change",
                      details=[{"path": "path", "message": "must name a file of the change"}])
    side = Side.OLD if spot[:1] == "o" else Side.NEW
    if spot[:1] not in ("o", "n") or not spot[1:].isascii() or not spot[1:].isdigit() \
            or int(spot[1:]) < 1:
        raise Invalid("spot: must be o<line> or n<line>",
                      details=[{"path": "spot", "message": "must be o<line> or n<line>"}])
    with session_locked(review.session):
        review = Review.objects.select_for_update().get(pk=review.pk)
        if review.stage != Stage.DELIVERY:
            raise Conflict("only a delivered change takes line comments: nothing was added")
        if review.status != Status.PENDING or review.expires_at <= timezone.now():
            status = review_as_read(review).status
            raise Conflict(f"this delivery review is no longer waiting — it was already "
                           f"{domain.ALREADY.get(status, status)} — so a comment would reach "
                           "nobody: nothing was added")
        tree = (review.proposal.get("startTree" if side == Side.OLD else "tree") or {}).get("id")
        if not tree:
            raise Conflict("the change of this delivery is not kept: nothing to comment on")
        return LineComment.objects.create(review=review, user=user, path=path, side=side,
                                          line=int(spot[1:]), tree=tree, body=text)


def review_agent_told(review: Review) -> bool:
    """Inside `session_locked`: whether this is the first time a turn-stop tells the agent of
    `review`'s decision (issue 40: it is steered with it once), recording that it now has."""
    told = Review.objects.filter(pk=review.pk, agent_told_at__isnull=True).update(
        agent_told_at=timezone.now())
    return told == 1


def review_cancel(*, session: Session) -> Review:
    """The agent withdraws its pending proposal — never a delivery review, which is the
    project's and not the agent's (it may abstain instead)."""
    with session_locked(session) as state:
        review = Review.objects.select_for_update().filter(session=session,
                                                           status=Status.PENDING).first()
        if review is None:
            raise Conflict("there is no pending review in this session to withdraw")
        if review.stage == Stage.DELIVERY:
            raise Conflict("a delivery review is not the agent's to withdraw: wait for the "
                           "person's decision, or abstain")
        _decide(review, state, decision=Status.CANCELLED, decided_by={"kind": "agent"})
    return review


def review_delivery_close(session: Session, state: SessionState) -> None:
    """The contract ended while a person was reviewing its delivery (the agent abstained):
    the review is cancelled, inside the same lock, after the terminal was written."""
    review = Review.objects.select_for_update().filter(
        session=session, status=Status.PENDING, stage=Stage.DELIVERY).first()
    if review is not None:
        _decide(review, state, decision=Status.CANCELLED, decided_by={"kind": "system"})


def reviews_expire_due() -> int:
    """Expire every pending review whose time has passed (fails closed even if nobody looks)."""
    expired = 0
    for review in Review.objects.filter(status=Status.PENDING, expires_at__lte=timezone.now()):
        review_expire_due(review.session)
        expired += 1
    return expired

"""Reads of reviews (rules §6). A proposal whose time has passed reads as expired before
the expiry is recorded (`governor.services.reviews.review_expire_due`, which every decision,
begin and the periodic task call): nothing here writes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from governor.domain import messages
from governor.domain.attempts import budget_of, reviews_deliveries, written_by_decision
from governor.domain.documents import SentComment
from governor.domain.treediff import ANSWERED, UNANSWERED, as_text, comment_answered
from governor.lib.blobstore import blob_read
from governor.lib.errors import ServiceError
from governor.models import Blob, Session, WorkspaceTree
from governor.selectors.treediff import DIFF_BLOB_BYTES
from reviews.models import Approval, LineComment, Review, Side, Stage, Status


def review_url(review: Review) -> str:
    """The reviewer's page, absolute (GOVERNOR_PUBLIC_URL): agents, webhooks and e-mails pass
    it on to people."""
    return settings.PUBLIC_URL + reverse("reviews:detail", args=[review.pk])


def review_as_read(review: Review) -> Review:
    """`review`, shown as expired when its time has passed and nothing recorded it yet (the
    object only: it is never saved from here)."""
    if review.status == Status.PENDING and review.expires_at <= timezone.now():
        review.status = Status.EXPIRED
    return review


def review_pending(session: Session) -> Review | None:
    """The session's pending review whose time has not passed."""
    return Review.objects.filter(session=session, status=Status.PENDING,
                                 expires_at__gt=timezone.now()).first()


def review_newest(session: Session) -> Review | None:
    """The session's newest review, as read (`review_as_read`)."""
    review = Review.objects.filter(session=session).order_by("-created_at").first()
    return None if review is None else review_as_read(review)


def review_status(review: Review, *, include_feedback: bool = True) -> dict[str, Any]:
    review = review_as_read(review)
    answer: dict[str, Any] = {
        "id": str(review.pk), "stage": review.stage, "status": review.status,
        "proposal_receipt": review.receipt, "review_url": review_url(review),
        "expires_at": review.expires_at.isoformat(),
        "decision": None if review.status == Status.PENDING else review.status,
        "decision_receipt": review.decision_receipt or None,
    }
    if include_feedback:
        answer["feedback"] = review.feedback or None
        # The line comments reach the agent with the feedback, once the review is decided.
        answer["comments"] = [] if review.status == Status.PENDING else [
            comment.as_sent() for comment in review.comments.all()]
    return answer


def contract_deliveries(session: Session, contract_id: str, *,
                        status: str | None = None) -> list[Review]:
    """The delivery reviews of one contract of the session (with `status`, only those), newest
    first."""
    reviews = Review.objects.filter(session=session, stage=Stage.DELIVERY).order_by(
        "-created_at")
    if status is not None:
        reviews = reviews.filter(status=status)
    return [review for review in reviews if review.plan.get("contract_id") == contract_id]


def revision_to_answer(session: Session, contract_id: str) -> Review | None:
    """Issue 40: the newest revision request of the contract's delivered change — the review
    whose feedback and line comments the agent must answer while the contract is open."""
    requests = contract_deliveries(session, contract_id, status=Status.REVISION_REQUESTED)
    return requests[0] if requests else None


def budget_panel(session: Session, status: Mapping[str, Any]) -> dict[str, object]:
    """The timeline's budget (issue 40): the contract's `budget` after its attempts; whether
    a person reviews its deliveries (`delivery_review`); and while it is active, the revision
    request of its delivered change the agent is to answer."""
    delivery_review = reviews_deliveries(session.project.delivery_review)
    contract = status["contract"]
    return {"budget": budget_of(contract, len(status["attempts"]), status["terminal"]),
            "delivery_review": delivery_review,
            "revision_request": revision_to_answer(session, contract["contractId"])
            if delivery_review and status["state"] == "active" else None}


def sent_comments(review: Review) -> list[SentComment]:
    return [comment.as_sent() for comment in review.comments.all()]


def untold_and_pending(session: Session) -> tuple[Review | None, list[Review]]:
    """One read of the session's reviews for a turn-stop with no open contract: the pending
    review whose time has not passed, and the decided delivery reviews no turn-stop has told
    the agent of (issue 40)."""
    rows = list(Review.objects.filter(session=session).filter(
        Q(status=Status.PENDING, expires_at__gt=timezone.now())
        | Q(stage=Stage.DELIVERY, decided_at__isnull=False, agent_told_at__isnull=True))
        .order_by("-created_at"))
    pending = next((review for review in rows if review.status == Status.PENDING), None)
    return pending, [review for review in rows if review.status != Status.PENDING]


def terminal_decision(terminal: Mapping[str, Any], decided: list[Review]) -> Review | None:
    """Of the `decided` delivery reviews, the one whose decision wrote `terminal`
    (`governor.domain.attempts.written_by_decision`), or None: an attempt or an abstain wrote
    it."""
    return next((review for review in decided if written_by_decision(
        terminal, contract_id=review.plan.get("contract_id"),
        attempt_receipt=review.proposal.get("attemptReceipt"),
        decision_receipt=review.decision_receipt)), None)


def decision_message(terminal: Mapping[str, Any], decided: Review, maximum: int) -> str:
    """Issue 40: the `terminal` that `decided`'s decision wrote (`terminal_decision`), as the
    agent hears of it, with what the person said."""
    return messages.delivery_decided_message(terminal, decision=decided.status,
                                             feedback=decided.feedback,
                                             comments=sent_comments(decided), maximum=maximum)


def request_message(request: Review, *, used: int, maximum: int, unchanged: bool) -> str:
    """Issue 40: a revision request of the delivered change, as the agent must answer it, with
    what is left of the budget after `used` of `maximum` attempts."""
    return messages.revision_requested_message(
        feedback=request.feedback, comments=sent_comments(request), used=used,
        maximum=maximum, review_url=review_url(request), unchanged=unchanged)


def comments_shown(review: Review) -> dict[str, dict[str, list[LineComment]]]:
    """The line comments on a delivery review, by path and spot ("n<line>", "o<line>")."""
    shown: dict[str, dict[str, list[LineComment]]] = {}
    for comment in review.comments.select_related("user"):
        spot = f"{'o' if comment.side == Side.OLD else 'n'}{comment.line}"
        shown.setdefault(comment.path, {}).setdefault(spot, []).append(comment)
    return shown


@dataclass(frozen=True)
class AnsweredComment:
    comment: LineComment
    answer: str  # governor.domain.treediff ANSWERED, ELSEWHERE or UNANSWERED

    @property
    def answered(self) -> bool:
        return self.answer == ANSWERED


def _text(project_id: int, blob: str | None, sizes: Mapping[str, int]) -> str | None:
    """A kept blob's text for judging a comment; None when absent, not kept, too large or not
    text (the file is then judged whole)."""
    if blob is None or sizes.get(blob, DIFF_BLOB_BYTES + 1) > DIFF_BLOB_BYTES:
        return None
    try:
        return as_text(blob_read(project_id, blob))
    except ServiceError:
        return None


def comments_answered(previous: Review, review: Review) -> list[AnsweredComment]:
    """The line comments of the previous delivery round, each judged against this round's
    delivered tree (issue 40): a comment on a delivered line is `answered` when that line (or
    the place right before or after it) changed, `file changed elsewhere` when only other
    lines of its file did, `not answered` when the file is the same; one on a removed line (of
    the contract-start tree) is answered when its file differs from the previous delivery's."""
    comments = list(previous.comments.select_related("user"))
    if not comments:
        return []
    now = str((review.proposal.get("tree") or {}).get("id"))
    before = str((previous.proposal.get("tree") or {}).get("id"))
    trees = {comment.tree for comment in comments} | {now, before}
    project_id = review.session.project_id
    blobs: dict[tuple[str, str], str] = {}
    for tree_id, manifest in WorkspaceTree.objects.filter(
            project_id=project_id, tree_id__in=trees).values_list("tree_id", "manifest"):
        for entry in manifest:
            blobs[(tree_id, entry[0])] = entry[2]
    sizes = dict(Blob.objects.filter(project_id=project_id, blob_id__in=set(blobs.values()))
                 .values_list("blob_id", "size"))
    shown = []
    for comment in comments:
        was = blobs.get((before if comment.side == Side.OLD else comment.tree, comment.path))
        is_now = blobs.get((now, comment.path))
        if was == is_now:
            answer = UNANSWERED
        elif comment.side == Side.OLD or is_now is None:
            answer = ANSWERED
        else:
            old_text, new_text = _text(project_id, was, sizes), _text(project_id, is_now, sizes)
            answer = ANSWERED if old_text is None or new_text is None else comment_answered(
                old_text, new_text, comment.line)
        shown.append(AnsweredComment(comment, answer))
    return shown


def carried_approval(user: User, review: Review) -> Approval | None:
    """`user`'s approval of an earlier intent proposal of this session with exactly this
    proposal's receipt, whose stage it approved (rules §13); None for any other."""
    if review.stage != Stage.INTENT:
        return None
    return (Approval.objects.select_related("review")
            .filter(user_id=user.pk, review__session_id=review.session_id,
                    review__stage=Stage.INTENT, review__receipt=review.receipt,
                    review__status=Status.APPROVED)
            .exclude(review_id=review.pk).order_by("-created_at").first())

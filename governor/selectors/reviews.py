"""Reads of reviews (rules §6). A proposal whose time has passed reads as expired before
the expiry is recorded (`governor.services.reviews.review_expire_due`, which every decision,
begin and the periodic task call): nothing here writes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.urls import reverse
from django.utils import timezone

from governor.models import Session, WorkspaceTree
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
    answered: bool


def comments_answered(previous: Review, review: Review) -> list[AnsweredComment]:
    """The line comments of the previous delivery round, each marked `answered` when the file it
    points at is another in this round's delivered tree than in the tree it was made on."""
    comments = list(previous.comments.select_related("user"))
    if not comments:
        return []
    trees = {comment.tree for comment in comments} | {(review.proposal.get("tree") or {}).get("id")}
    blobs: dict[tuple[str, str], str] = {}
    for tree_id, manifest in WorkspaceTree.objects.filter(
            project_id=review.session.project_id, tree_id__in=trees).values_list("tree_id",
                                                                                 "manifest"):
        for entry in manifest:
            blobs[(tree_id, entry[0])] = entry[2]
    now = str((review.proposal.get("tree") or {}).get("id"))
    return [AnsweredComment(comment, blobs.get((comment.tree, comment.path))
                            != blobs.get((now, comment.path))) for comment in comments]


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

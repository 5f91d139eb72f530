"""Reads of reviews (SEMANTICS §6). A proposal whose time has passed reads as expired before
the expiry is recorded (`governor.services.reviews.review_expire_due`, which every decision,
begin and the periodic task call): nothing here writes."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from governor.models import Session
from reviews.models import Approval, Review, Stage, Status


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


def delivery_pending(session: Session) -> Review | None:
    """The session's pending delivery review whose time has not passed (issue 28)."""
    review = review_pending(session)
    return review if review is not None and review.stage == Stage.DELIVERY else None


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
    return answer


def carried_approval(user: Any, review: Review) -> Approval | None:
    """`user`'s approval of an earlier intent proposal of this session with exactly this
    proposal's receipt, whose stage it approved (SEMANTICS §13); None for any other."""
    if review.stage != Stage.INTENT:
        return None
    return (Approval.objects.select_related("review")
            .filter(user_id=user.pk, review__session_id=review.session_id,
                    review__stage=Stage.INTENT, review__receipt=review.receipt,
                    review__status=Status.APPROVED)
            .exclude(review_id=review.pk).order_by("-created_at").first())

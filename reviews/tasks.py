"""Thin Celery tasks: load by id, call one function. The review service queues the
notifications by name once a proposal is committed (governor/lib/queue.py)."""

from __future__ import annotations

import logging
import urllib.request
from typing import Any

from celery import Task, shared_task
from django.core.mail import send_mail

from governor.domain.lifecycle import OUTCOME_TERMINAL
from governor.models import Event, Membership, Project, Role, Session
from governor.services.reviews import reviews_expire_due
from reviews import notifications
from reviews.models import Review, Status

log = logging.getLogger(__name__)



@shared_task
def notify_reviewers(review_id: str) -> int:
    review = Review.objects.select_related("session__project").get(pk=review_id)
    if review.status != Status.PENDING:
        return 0
    project = review.session.project
    reviewers = [m.user for m in Membership.objects.select_related("user")
                 .filter(project=project, role=Role.REVIEWER)]
    unreachable = sorted(user.get_username() for user in reviewers if not user.email)
    if unreachable:
        log.warning("reviewers of %s with no e-mail address are not told that review %s "
                    "waits: %s (set their address in the admin, Users)", project.slug,
                    review.pk, ", ".join(unreachable))
    emails = sorted({user.email for user in reviewers if user.email})
    if not emails:
        return 0
    payload = notifications.waiting_payload(review)
    send_mail(
        subject=f"[{project.slug}] {review.stage} proposal waiting for review",
        message=(f"An agent's {review.stage} proposal in project {project.slug} waits for your "
                 f"review until {payload['expires_at']}.\n\nReview it: {payload['url']}\n"
                 f"Proposal receipt: {review.receipt}\n"),
        from_email=None, recipient_list=emails,
    )
    return len(emails)


@shared_task(bind=True, max_retries=6, retry_backoff=True, retry_backoff_max=600,
             retry_jitter=True)
def post_webhook(self: Task[[str], int], review_id: str) -> int:
    review = Review.objects.select_related("session__project").get(pk=review_id)
    return _post_signed(self, review.session.project, notifications.waiting_payload(review))


def _post_signed(task: Task[Any, int], project: Project, payload: dict[str, Any]) -> int:
    """POST `payload` to the project's webhook, signed with its secret; the receiver's status.
    A failure retries `task` (with backoff, at most its max_retries)."""
    body, headers = notifications.signed_request(project.webhook_secret, payload)
    request = urllib.request.Request(project.webhook_url, data=body, headers=headers,  # noqa: S310
                                     method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return int(response.status)
    except OSError as exc:
        raise task.retry(exc=exc) from exc


@shared_task(bind=True, max_retries=6, retry_backoff=True, retry_backoff_max=600,
             retry_jitter=True)
def notify_outcome(self: Task[[str, str], int], session_id: str, outcome_id: str) -> int:
    """An outcome terminal: e-mail the project's reviewers and post the signed webhook."""
    session = Session.objects.select_related("project").get(pk=session_id)
    terminal = (Event.objects.filter(session=session, type=OUTCOME_TERMINAL)
                .order_by("-seq").values_list("data", flat=True).first())
    if not terminal or terminal.get("outcomeContractId") != outcome_id:
        return 0
    project = session.project
    payload = notifications.outcome_payload(str(session.pk), project.slug, terminal)
    emails = sorted({m.user.email for m in Membership.objects.select_related("user")
                     .filter(project=project, role=Role.REVIEWER) if m.user.email})
    if emails and not self.request.retries:  # a webhook retry sends no second e-mail
        send_mail(subject=f"[{project.slug}] outcome {terminal['status']}",
                  message=f"{terminal['reason']}\n\nSee it: {payload['url']}\n"
                          f"Terminal receipt: {terminal['receipt']}\n",
                  from_email=None, recipient_list=emails)
    if project.webhook_url:
        _post_signed(self, project, payload)
    return len(emails)


@shared_task
def expire_due_reviews() -> int:
    """Periodic: logs only when a review expired."""
    expired = reviews_expire_due()
    if expired:
        log.info("expired %d reviews past their time", expired)
    return expired

"""The review metrics (docs/operations.md, "Metrics") are counted by the review service once
its decision commits: by stage and decision, with the time from the proposal to it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from prometheus_client import REGISTRY

from governor.services.reviews import review_decide
from reviews.models import Review

LABELS = {"stage": "intent", "decision": "approved"}


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_an_approval_counts_once_by_stage_and_decision_with_its_time_to_decide(
        intent_review: Review, reviewer: Any, django_capture_on_commit_callbacks: Any) -> None:
    Review.objects.filter(pk=intent_review.pk).update(
        created_at=intent_review.created_at - timedelta(minutes=20))
    intent_review.refresh_from_db()
    before = sample("governor_review_decisions_total", **LABELS, project="acme")
    seconds_before = sample("governor_review_decision_seconds_sum", **LABELS)
    slow_before = sample("governor_review_decision_seconds_bucket", **LABELS, le="900.0")
    with django_capture_on_commit_callbacks(execute=True):
        review_decide(user=reviewer, review=intent_review, receipt=intent_review.receipt,
                      decision="approved")
    assert sample("governor_review_decisions_total", **LABELS, project="acme") == before + 1
    waited = sample("governor_review_decision_seconds_sum", **LABELS) - seconds_before
    assert 20 * 60 <= waited < 21 * 60
    # Twenty minutes is above the 15-minute bucket: that bucket did not grow.
    assert sample("governor_review_decision_seconds_bucket", **LABELS, le="900.0") == slow_before


def test_a_decision_rolled_back_counts_nothing(intent_review: Review, reviewer: Any) -> None:
    """Without a commit (the test's transaction never commits) nothing is counted."""
    before = sample("governor_review_decisions_total", **LABELS, project="acme")
    review_decide(user=reviewer, review=intent_review, receipt=intent_review.receipt,
                  decision="approved")
    assert sample("governor_review_decisions_total", **LABELS, project="acme") == before

"""Two-stage review (SEMANTICS §6): one Review per stage, bound to its proposal receipt."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from governor.models import AgentToken, JSONTextField, Session


class Stage(models.TextChoices):
    INTENT = "intent"
    EVIDENCE = "evidence"


class Status(models.TextChoices):
    PENDING = "pending"
    APPROVED = "approved"
    REVISION_REQUESTED = "revision-requested"
    REJECTED = "rejected"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


class Review(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    session = models.ForeignKey(Session, on_delete=models.PROTECT, related_name="reviews")
    stage = models.CharField(max_length=16, choices=Stage.choices)
    proposal = JSONTextField(help_text="Exactly what reviewers are shown.")
    receipt = models.CharField(max_length=71, db_index=True)
    plan = JSONTextField(help_text="The validated proposal to activate once approved.")
    # Tokens are revoked, never deleted: separation of duties needs to know who proposed.
    proposed_by = models.ForeignKey(
        AgentToken, null=True, on_delete=models.PROTECT, related_name="+",
        help_text="The agent token that sent the proposal: its owner may not approve it.")
    status = models.CharField(max_length=24, choices=Status.choices, default=Status.PENDING)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.PROTECT, related_name="+")
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_receipt = models.CharField(max_length=71, blank=True)
    expires_at = models.DateTimeField()
    feedback = models.TextField(blank=True, help_text="Kept out of the event log.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session"], condition=models.Q(status="pending"),
                                    name="one_pending_review_per_session")
        ]
        indexes = [models.Index(fields=["status", "expires_at"], name="review_status_expiry")]

    def __str__(self) -> str:
        return f"{self.stage} review of {self.session_id} ({self.status})"


class Approval(models.Model):
    """One reviewer's approval of one receipt; a stage needs `required_approvals` of them."""

    review = models.ForeignKey(Review, on_delete=models.CASCADE, related_name="approvals")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    carried_from = models.CharField(
        max_length=71, blank=True,
        help_text="The decision receipt of this reviewer's earlier approval of exactly the same "
                  "intent receipt in this session, when this approval carried it (SEMANTICS §13).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["review", "user"], name="one_approval_per_reviewer")
        ]

    def __str__(self) -> str:
        return f"{self.user_id} approved {self.review_id}"

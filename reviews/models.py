"""Review (rules §6): one Review per stage — the intent, the evidence plan and, where the
project asks for it, the delivered change — bound to its proposal receipt."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from governor.domain.documents import SentComment
from governor.models import AgentToken, JSONTextField, Session


class Stage(models.TextChoices):
    INTENT = "intent"
    EVIDENCE = "evidence"
    DELIVERY = "delivery"  # the optional third stage: the delivered change, once checks pass


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
    agent_told_at = models.DateTimeField(
        null=True, blank=True,
        help_text="A delivery's decision: when a turn-stop first told the agent of it "
                  "(it is steered with it once, and allowed after).")
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
                  "intent receipt in this session, when this approval carried it (rules §13).")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["review", "user"], name="one_approval_per_reviewer")
        ]

    def __str__(self) -> str:
        return f"{self.user_id} approved {self.review_id}"


class Passkey(models.Model):
    """A reviewer's WebAuthn credential (issue 18): its public key signs their decisions.
    Removed passkeys are kept (`removed_at`): the signatures they made stay checkable in
    exports."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT,
                             related_name="passkeys")
    name = models.CharField(max_length=100, help_text="The reviewer's name for the device.")
    credential_id = models.CharField(max_length=1400, unique=True,
                                     help_text="The credential id, base64url.")
    public_key = models.BinaryField(help_text="The COSE public key, as registered.")
    algorithm = models.SmallIntegerField(help_text="COSE algorithm: -7 ES256, -8 EdDSA, "
                                                   "-257 RS256.")
    rp_id = models.CharField(max_length=253, help_text="The relying-party id it is bound to.")
    sign_count = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    removed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name} ({self.user_id})"


class DecisionSignature(models.Model):
    """One reviewer's passkey assertion over one decision (governor.domain.passkey): kept with
    the decision and exported with the reviewer's public key."""

    review = models.ForeignKey(Review, on_delete=models.PROTECT, related_name="signatures")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    passkey = models.ForeignKey(Passkey, on_delete=models.PROTECT, related_name="signatures")
    decision = models.CharField(max_length=24, choices=Status.choices)
    nonce = models.CharField(max_length=32, unique=True)
    authenticator_data = models.TextField(help_text="base64url")
    client_data_json = models.TextField(help_text="base64url")
    signature = models.TextField(help_text="base64url")
    digest = models.CharField(max_length=71, help_text='receipt("review-assertion", …)')
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["review", "user"], name="one_signature_per_reviewer")
        ]

    def __str__(self) -> str:
        return f"{self.user_id} signed {self.decision} of {self.review_id}"


class Side(models.TextChoices):
    OLD = "old"  # a line of the contract-start tree (a removed line)
    NEW = "new"  # a line of the delivered tree


class LineComment(models.Model):
    """A reviewer's comment on one line of the delivered change (issue 28). Every reviewer of
    the project sees it; the agent receives it with the feedback of the decision that ends the
    review, whose receipt binds it (`commentsCount`, `commentsReceipt`)."""

    review = models.ForeignKey(Review, on_delete=models.PROTECT, related_name="comments")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    path = models.CharField(max_length=4096)
    side = models.CharField(max_length=3, choices=Side.choices)
    line = models.PositiveIntegerField()
    tree = models.CharField(max_length=80, help_text="The tree the line is a line of.")
    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return f"{self.user_id} on {self.path}:{self.side}{self.line} of {self.review_id}"

    def as_sent(self) -> SentComment:
        """The comment as the agent receives it and the decision's receipt binds it."""
        return {"path": self.path, "side": self.side, "line": self.line, "body": self.body,
                "userId": self.user_id}

"""The one form a reviewer posts: a decision about the exact receipt the page showed."""

from __future__ import annotations

from typing import Any

from django import forms

from governor.domain.review import MAX_FEEDBACK_CHARS
from reviews.models import Status

DECISIONS = [(Status.APPROVED, "Approve"), (Status.REVISION_REQUESTED, "Request revision"),
             (Status.REJECTED, "Reject")]


class FeedbackField(forms.CharField):
    """Browsers send textarea line breaks as CRLF but count them as one character against
    `maxlength`; count them the same way here."""

    def to_python(self, value: Any) -> str:
        return str(super().to_python(value)).replace("\r\n", "\n")


class DecisionForm(forms.Form):
    """One box, as a code review's: a comment and the decision of the button pressed. Rejecting
    or requesting a revision needs a reason; a rejection is confirmed by a second press (the
    page posts `confirm`), with or without JavaScript."""

    receipt = forms.CharField(max_length=200, widget=forms.HiddenInput)
    decision = forms.ChoiceField(choices=DECISIONS)
    feedback = FeedbackField(
        label="Comment for the agent", required=False,
        max_length=MAX_FEEDBACK_CHARS,
        widget=forms.Textarea(attrs={"rows": 4, "maxlength": MAX_FEEDBACK_CHARS}),
        help_text=f"Required to request a revision or reject, optional to approve. At most "
                  f"{MAX_FEEDBACK_CHARS:,} characters. The agent receives it, and every reviewer "
                  "of this project sees it on this page; the session log keeps its size and "
                  "receipt, never the text.",
    )
    confirm = forms.BooleanField(required=False, widget=forms.HiddenInput)
    carried_from = forms.CharField(required=False, max_length=71, widget=forms.HiddenInput)
    # The reviewer's passkey signature of this decision (static/passkeys.js), when signed.
    assertion = forms.CharField(required=False, max_length=64 * 1024, widget=forms.HiddenInput)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        decision = data.get("decision")
        if decision in (Status.REVISION_REQUESTED, Status.REJECTED) and not (
                data.get("feedback") or "").strip():
            verb = "reject" if decision == Status.REJECTED else "request a revision"
            self.add_error("feedback", f"Say why: a reason is required to {verb}.")
        return data

    @property
    def needs_confirmation(self) -> bool:
        """A valid rejection not yet confirmed: nothing is decided until it is."""
        return (self.cleaned_data["decision"] == Status.REJECTED
                and not self.cleaned_data["confirm"])

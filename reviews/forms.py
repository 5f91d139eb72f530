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
    receipt = forms.CharField(max_length=200, widget=forms.HiddenInput)
    decision = forms.ChoiceField(choices=DECISIONS, widget=forms.HiddenInput)
    feedback = FeedbackField(
        label="Feedback for the agent (optional)", required=False,
        max_length=MAX_FEEDBACK_CHARS,
        widget=forms.Textarea(attrs={"rows": 4, "maxlength": MAX_FEEDBACK_CHARS}),
        help_text=f"At most {MAX_FEEDBACK_CHARS:,} characters. Only the agent reads it; the "
                  "session log keeps its size and receipt, never the text.",
    )

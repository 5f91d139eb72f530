"""The sessions list's filter form."""

from __future__ import annotations

import uuid
from typing import Any, cast

from django import forms
from django.db.models import Q, QuerySet

from governor.domain import lifecycle
from governor.models import AgentToken, Project
from reviews.models import Review


class SessionFilter(forms.Form):
    """The sessions list's filters, all optional; the choices are the member's own."""

    q = forms.CharField(required=False, max_length=100, label="Session id or receipt",
                        help_text="A whole session id, or a proposal or decision receipt "
                                  "(sha256:…).")
    project = forms.ModelChoiceField(queryset=Project.objects.none(), required=False,
                                     empty_label="any")
    state = forms.ChoiceField(required=False,
                              choices=[("", "any")] + [(s, s) for s in lifecycle.STATE_NAMES])
    token = forms.ModelChoiceField(queryset=AgentToken.objects.none(), required=False,
                                   label="Agent token", empty_label="any")
    since = forms.DateField(required=False, label="Created on or after",
                            widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, label="Created on or before",
                            widget=forms.DateInput(attrs={"type": "date"}))

    def __init__(self, data: Any, projects: QuerySet[Project]) -> None:
        super().__init__(data)
        cast("forms.ModelChoiceField[Project]", self.fields["project"]).queryset = projects
        cast("forms.ModelChoiceField[AgentToken]", self.fields["token"]).queryset = (
            AgentToken.objects.filter(project__in=projects).select_related("project"))

    def filter(self, sessions: QuerySet[Any, Any]) -> QuerySet[Any, Any]:
        data = self.cleaned_data
        if data["project"]:
            sessions = sessions.filter(project=data["project"])
        if data["token"]:
            sessions = sessions.filter(created_by=data["token"])
        if data["since"]:
            sessions = sessions.filter(created_at__date__gte=data["since"])
        if data["until"]:
            sessions = sessions.filter(created_at__date__lte=data["until"])
        text = data["q"].strip()
        if text.startswith("sha256:"):
            sessions = sessions.filter(pk__in=Review.objects.filter(
                Q(receipt=text) | Q(decision_receipt=text)).values("session_id"))
        elif text:
            try:
                sessions = sessions.filter(pk=uuid.UUID(text))
            except ValueError:
                self.add_error("q", "Not a session id (a UUID) or a receipt (sha256:…).")
                return sessions.none()
        return sessions

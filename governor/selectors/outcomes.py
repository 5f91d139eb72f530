"""Reads of outcome profiles (the agent's view)."""

from __future__ import annotations

from typing import Any

from governor.domain.outcomes import agent_view, summary_words
from governor.models import Project
from verification.models import OutcomeProfile


def outcome_profiles_view(project: Project) -> list[dict[str, Any]]:
    """Each outcome profile as an agent sees it (never argv, env or network), with the
    sentence a reviewer reads."""
    views = []
    for profile in OutcomeProfile.objects.filter(project=project).order_by("profile_id"):
        view = agent_view(profile.definition(), profile.description, profile.receipt)
        views.append({**view, "summary": summary_words(view)})
    return views

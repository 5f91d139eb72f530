"""Verifier profiles as the rest of the system sees them."""

from __future__ import annotations

from governor.models import Project
from verification.models import VerifierProfile


def profile_receipts(project: Project) -> dict[str, str]:
    """Each profile's current receipt, by profile id (rule 4.10 freshness needs it)."""
    return dict(VerifierProfile.objects.filter(project=project)
                .values_list("profile_id", "receipt"))


def required_profile_ids(project: Project) -> list[str]:
    return sorted(VerifierProfile.objects.filter(project=project, required=True)
                  .values_list("profile_id", flat=True))

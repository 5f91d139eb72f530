"""The verifier profiles a contract reads (rules §8, §14.3): their current receipts, which are
required, the directories and protected paths the named ones declare."""

from __future__ import annotations

from collections.abc import Iterable

from governor.models import Project
from verification.models import VerifierProfile


def profile_receipts(project: Project) -> dict[str, str]:
    """Each profile's current receipt, by profile id (rule 4.10 freshness needs it)."""
    return dict(VerifierProfile.objects.filter(project=project)
                .values_list("profile_id", "receipt"))


def required_profile_ids(project: Project) -> list[str]:
    return sorted(VerifierProfile.objects.filter(project=project, required=True)
                  .values_list("profile_id", flat=True))


def profile_environments(project: Project, ids: Iterable[str]) -> dict[str, list[str]]:
    """The environment directories of each named profile that declares some."""
    rows = VerifierProfile.objects.filter(project=project, profile_id__in=list(ids))
    return {profile_id: list(paths) for profile_id, paths in
            rows.values_list("profile_id", "environment") if paths}


def profile_protected_paths(project: Project, ids: Iterable[str]) -> set[str]:
    """The protected paths of the named profiles (rules §14.3)."""
    rows = VerifierProfile.objects.filter(project=project, profile_id__in=list(ids))
    return {pattern for paths in rows.values_list("protected_paths", flat=True)
            for pattern in paths or []}

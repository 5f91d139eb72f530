"""The verifier profiles a contract reads (rules §8, §14.3): their current receipts, which are
required, the directories and protected paths the named ones declare."""

from __future__ import annotations

from collections.abc import Iterable

from governor.domain.profiles import workspace_environment
from governor.models import Project
from verification.models import VerifierProfile


def profile_receipts(project: Project) -> dict[str, str]:
    """Each profile's current receipt, by profile id (rule 4.10 freshness needs it)."""
    return dict(VerifierProfile.objects.filter(project=project)
                .values_list("profile_id", "receipt"))


def required_profile_ids(project: Project) -> list[str]:
    return sorted(VerifierProfile.objects.filter(project=project, required=True)
                  .values_list("profile_id", flat=True))


def profiles_judging(project: Project, ids: Iterable[str]
                     ) -> tuple[dict[str, str], dict[str, list[str]]]:
    """What an attempt reads of the profiles, in one query: each profile's current receipt by
    id (rule 4.10 freshness), and the workspace environment directories of each named one that
    declares some (rules §10; its operator directories are not hashed, rules §17.8)."""
    named = set(ids)
    rows = VerifierProfile.objects.filter(project=project).values_list(
        "profile_id", "receipt", "environment")
    return ({profile_id: receipt for profile_id, receipt, _ in rows},
            {profile_id: workspace_environment(paths) for profile_id, _, paths in rows
             if workspace_environment(paths or []) and profile_id in named})


def workspace_environment_paths(project: Project) -> list[str]:
    """Every workspace environment directory the project's profiles declare (rules §17.8: what
    a session's reference hashes), sorted."""
    return sorted({path for paths in VerifierProfile.objects.filter(project=project)
                   .values_list("environment", flat=True)
                   for path in workspace_environment(paths or [])})


def profile_protected_paths(project: Project, ids: Iterable[str]) -> set[str]:
    """The protected paths of the named profiles (rules §14.3)."""
    rows = VerifierProfile.objects.filter(project=project, profile_id__in=list(ids))
    return {pattern for paths in rows.values_list("protected_paths", flat=True)
            for pattern in paths or []}

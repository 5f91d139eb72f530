"""Profiles: the one versioned store of both kinds, verifier (rules §8) and outcome
(docs/outcomes.md), which keeps every receipt; and the verifier profiles read for contracts
(required profiles, current receipts)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from django.db import transaction

from governor.models import Project
from verification.models import VerifierProfile, VersionedProfile


def profile_receipts(project: Project) -> dict[str, str]:
    """Each profile's current receipt, by profile id (rule 4.10 freshness needs it)."""
    return dict(VerifierProfile.objects.filter(project=project)
                .values_list("profile_id", "receipt"))


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


def required_profile_ids(project: Project) -> list[str]:
    return sorted(VerifierProfile.objects.filter(project=project, required=True)
                  .values_list("profile_id", flat=True))


P = TypeVar("P", bound=VersionedProfile[Any])


def profile_store(*, model: type[P], project: Project, validated: dict[str, Any]
                  ) -> tuple[P, bool]:
    """Create or update a profile of either kind (`VerifierProfile`, `OutcomeProfile`) from its
    validator's output, validated once where the input arrived (the admin's form, a file);
    (profile, changed). Its definition is stored with its receipt in its `versions`, where runs
    and bindings copy it from: it is never validated again. A receipt it already had makes no
    new version, so every receipt it ever had stays readable with the definition it covered."""
    columns, definition, receipt = model.stored(validated)
    fields = {**columns, "receipt": receipt}
    with transaction.atomic():
        profile = (model._default_manager.select_for_update()
                   .filter(project=project, profile_id=validated["id"]).first())
        if profile is None:
            profile = model._default_manager.create(project=project,
                                                    profile_id=validated["id"], **fields)
            changed = True
        else:
            changed = any(getattr(profile, name) != value for name, value in fields.items())
            for name, value in fields.items():
                setattr(profile, name, value)
            profile.save()
        profile.versions.get_or_create(receipt=receipt, defaults={"definition": definition})
    return profile, changed

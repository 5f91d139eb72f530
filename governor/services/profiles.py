"""Verifier profiles (rules §8): saved from operator input with every receipt kept, and read
for contracts (required profiles, current receipts)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction

from governor.domain.profiles import (
    STORED_FIELDS,
    profile_definition,
    profile_receipt,
    validate_profile,
)
from governor.models import Project
from verification.models import ProfileVersion, VerifierProfile


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


def report_profile_ids(project: Project, ids: Iterable[str]) -> list[str]:
    """The named profiles that write a trusted test report (§14.6)."""
    return sorted(VerifierProfile.objects.filter(project=project, profile_id__in=list(ids))
                  .exclude(report="").values_list("profile_id", flat=True))


def required_profile_ids(project: Project) -> list[str]:
    return sorted(VerifierProfile.objects.filter(project=project, required=True)
                  .values_list("profile_id", flat=True))


def profile_as_input(profile: VerifierProfile) -> dict[str, Any]:
    """The profile in the operator's file format (snake_case, as `validate_profile` reads it;
    every limit is stored, defaults included)."""
    return profile.as_input()


def profile_save(*, project: Project, raw: dict[str, Any]) -> tuple[VerifierProfile, bool]:
    """Create or update a profile from operator input (validated here, once); (profile,
    changed)."""
    return profile_store(project=project, validated=validate_profile(raw))


def profile_store(*, project: Project, validated: dict[str, Any]) -> tuple[VerifierProfile, bool]:
    """Create or update a profile from `validate_profile`'s output (the admin validates while it
    checks the form); (profile, changed). Its definition is stored with its receipt
    (`ProfileVersion`), where runs copy it from: it is never validated again. Every receipt it
    ever had stays readable."""
    definition = profile_definition(validated)
    receipt = profile_receipt(definition)
    fields = {**{name: validated[name] for name in STORED_FIELDS},
              "rootfs": validated["rootfs"] or "", "report": validated["report"] or "",
              "receipt": receipt}
    with transaction.atomic():
        profile = (VerifierProfile.objects.select_for_update()
                   .filter(project=project, profile_id=validated["id"]).first())
        if profile is None:
            profile = VerifierProfile.objects.create(project=project,
                                                     profile_id=validated["id"], **fields)
            changed = True
        else:
            changed = any(getattr(profile, name) != value for name, value in fields.items())
            for name, value in fields.items():
                setattr(profile, name, value)
            profile.save()
        ProfileVersion.objects.get_or_create(profile=profile, receipt=receipt,
                                             defaults={"definition": definition})
    return profile, changed

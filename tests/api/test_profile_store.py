"""Both profile kinds, verifier and outcome, are kept by one versioned store
(`governor.services.profiles.profile_store` over `verification.models.VersionedProfile`): a
rule about receipts and versions holds for both because it is written once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from governor.domain.outcomes import validate_outcome_profile
from governor.domain.profiles import validate_profile
from governor.models import Project
from governor.services.profiles import profile_store
from tests.api.test_profiles import PROFILE as VERIFIER_PROFILE
from tests.outcomes import PROFILE as OUTCOME_PROFILE
from verification.models import (
    OutcomeProfile,
    OutcomeProfileVersion,
    ProfileVersion,
    ProfileVersionBase,
    VerifierProfile,
    VersionedProfile,
)

# Each kind: its model, its version table, its validator, a profile and an edit of what it runs.
KINDS = [
    pytest.param(VerifierProfile, ProfileVersion, validate_profile, VERIFIER_PROFILE,
                 {"argv": ["pytest", "-x"]}, id="verifier"),
    pytest.param(OutcomeProfile, OutcomeProfileVersion, validate_outcome_profile, OUTCOME_PROFILE,
                 {"timeout_ms": 60_000}, id="outcome"),
]


@pytest.mark.parametrize(("model", "version_model", "validate", "raw", "edit"), KINDS)
def test_both_kinds_are_one_versioned_store(
        project: Project, model: type[VersionedProfile[Any]], version_model: type[Any],
        validate: Callable[[Any], dict[str, Any]], raw: dict[str, Any],
        edit: dict[str, Any]) -> None:
    assert issubclass(model, VersionedProfile) and issubclass(version_model, ProfileVersionBase)

    def save(document: dict[str, Any]) -> tuple[Any, bool]:
        return profile_store(model=model, project=project, validated=validate(document))

    profile, changed = save(raw)
    first = profile.receipt
    assert changed and first.startswith("sha256:")
    assert profile.definition() == model.stored(validate(raw))[1]
    assert save(raw)[1] is False  # the same profile again: nothing changed, no new version
    profile, changed = save({**raw, **edit})
    second = profile.receipt
    assert changed and second != first
    profile, changed = save({**raw, **edit, "description": "said another way"})
    assert changed and profile.receipt == second  # no part of the definition: no new version
    profile, changed = save(raw)  # back to the first: its version is there, kept as it was
    assert changed and profile.receipt == first
    versions = version_model.objects.filter(profile=profile)
    assert sorted(versions.values_list("receipt", flat=True)) == sorted([first, second])
    assert versions.get(receipt=first).definition == profile.definition()
    assert model.objects.get().receipt == first and str(profile).endswith(raw["id"])

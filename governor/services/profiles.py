"""Profiles: the one versioned store of both kinds, verifier (rules §8) and outcome
(docs/outcomes.md), which keeps every receipt."""

from __future__ import annotations

from typing import Any, TypeVar

from django.db import transaction

from governor.domain.profiles import ProfileError
from governor.models import Project
from governor.selectors.heldout import suites_unknown
from verification.models import VerifierProfile, VersionedProfile

P = TypeVar("P", bound=VersionedProfile[Any])


def profile_store(*, model: type[P], project: Project, validated: dict[str, Any]
                  ) -> tuple[P, bool]:
    """Create or update a profile of either kind (`VerifierProfile`, `OutcomeProfile`) from its
    validator's output, validated once where the input arrived (the admin's form, a file);
    (profile, changed). Its definition is stored with its receipt in its `versions`, where runs
    and bindings copy it from: it is never validated again. A receipt it already had makes no
    new version, so every receipt it ever had stays readable with the definition it covered.
    A verifier profile naming a held-out suite the project does not have is refused
    (ProfileError naming `heldout` or `oracle`)."""
    if model is VerifierProfile and (unknown := suites_unknown(project, validated)):
        raise ProfileError(unknown)  # rules §18.2, §18.3: a suite the project does not have
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

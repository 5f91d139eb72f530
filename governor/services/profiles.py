"""Profiles: the one versioned store of both kinds, verifier (rules §8) and outcome
(docs/outcomes.md), which keeps every receipt."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import transaction

from governor.domain.fields import join_path
from governor.domain.profiles import ProfileError, operator_environment, workspace_environment
from governor.domain.tree import directory_excluded
from governor.models import Project, Session, WorkspaceKind
from governor.selectors.heldout import suites_unknown
from governor.services.runs import runs_baseline_retry_edited
from governor.services.trees import operator_environment_problems
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
        if changed and isinstance(profile, VerifierProfile):
            # A contract whose baseline this profile could not run gets a new one (issue 40).
            runs_baseline_retry_edited(profile=profile)
    return profile, changed


@dataclass(frozen=True)
class EnvironmentJudged:
    """What loading a profile finds of its `environment` against the project (rules §17.8):
    `refused` (field, message) — nothing may be stored; `warnings` — stored, but said."""

    refused: list[tuple[str, str]]
    warnings: list[str]


SESSIONS_LOOKED_AT = 20  # the newest path sessions a workspace directory is looked for in


def profile_environment_judged(project: Project, validated: dict[str, Any]) -> EnvironmentJudged:
    """A validated profile's `environment` against `project` when it is loaded (the profile
    file, the admin): an operator directory that does not exist or lies inside a workspace
    root is refused, naming it; a workspace directory is stored with a warning when the
    project does not exclude it (every run would fail saying so until it does) or when none of
    the project's newest workspaces holds it (a later workspace could)."""
    declared = list(validated.get("environment") or [])
    refused: list[tuple[str, str]] = []
    for path in operator_environment(declared):
        for problem in operator_environment_problems([path]):
            refused.append((join_path("", "environment", declared.index(path)), problem))
    warnings: list[str] = []
    relative = workspace_environment(declared)
    if not relative:
        return EnvironmentJudged(refused, warnings)
    exclusions = list(project.tree_exclusions or [])
    sessions = list(Session.objects.filter(project=project, workspace_kind=WorkspaceKind.PATH,
                                           imported=False).order_by("-created_at")
                    .values_list("workspace_path", flat=True)[:SESSIONS_LOOKED_AT])
    for path in relative:
        field = join_path("", "environment", declared.index(path))
        if not directory_excluded(exclusions, path):
            warnings.append(f"{field}: {path!r} is not excluded by project {project.slug}'s "
                            f"tree exclusions, so every run fails as infrastructure until it "
                            f"is (add '{path}/**' with governor_project set)")
        holding = [root for root in sessions
                   if os.path.isdir(os.path.join(root, path))
                   and not os.path.islink(os.path.join(root, path))]
        if not holding:
            looked = (f"none of the project's {len(sessions)} newest workspaces has it"
                      if sessions else "the project has no workspace yet")
            warnings.append(
                f"{field}: {path!r} is a workspace directory, and {looked}: a run in a "
                "workspace without it fails as infrastructure. Loaded, because a later "
                "workspace could hold it; the agent can also change it (each run is held "
                "against the session's reference, rules §17.8). An operator directory (an "
                "absolute path outside every workspace root, mounted read-only) needs neither")
    return EnvironmentJudged(refused, warnings)

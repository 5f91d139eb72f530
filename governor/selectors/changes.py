"""Reading gated changes (rules §19): by a gate token of their project, or by a member of it."""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.urls import reverse

from governor.lib.errors import NotFound
from governor.models import Change, ChangeState
from governor.selectors.access import reviewed_projects
from governor.selectors.treediff import tree_changes
from verification.models import ChangeRun


def change_for_project(project_id: int, change_id: Any) -> Change:
    """The change of that project; another project's, or none, is 404 alike."""
    try:
        key = uuid.UUID(str(change_id))
    except ValueError:
        raise NotFound(f"no change {change_id}") from None
    change = (Change.objects.select_related("base_tree", "head_tree", "project")
              .filter(pk=key, project_id=project_id).first())
    if change is None:
        raise NotFound(f"no change {change_id}")
    return change


def change_url(change: Change) -> str:
    """The change's page, absolute (GOVERNOR_PUBLIC_URL): the CI job prints it for people."""
    return settings.PUBLIC_URL + reverse("projects:change", args=[change.project.slug, change.pk])


def change_runs(change: Change) -> list[ChangeRun]:
    return list(ChangeRun.objects.filter(change=change).select_related("run", "run__profile")
                .order_by("run__profile__profile_id", "role"))


def change_out(change: Change) -> dict[str, Any]:
    """The change as the gate's API answers it: `status` is `running` until every run ended,
    then the verdict."""
    runs = [{"id": str(link.run.pk), "profile": link.run.profile.profile_id, "role": link.role,
             "state": link.run.state,
             "passed": None if link.run.result is None else bool(link.run.result.get("passed")),
             "failureKind": None if link.run.result is None
             else link.run.result.get("failureKind")}
            for link in change_runs(change)]
    finished = change.state == ChangeState.FINISHED
    return {"id": str(change.pk), "status": change.verdict if finished else "running",
            "observe": change.observe, "url": change_url(change),
            "base": {"commit": change.base_commit, "tree": change.base_tree.tree_id},
            "head": {"commit": change.head_commit, "tree": change.head_tree.tree_id},
            "policy": {key: value for key, value in change.policy.items()
                       if key not in ("protected", "tamperMore")},
            "policyReceipt": change.policy_receipt, "changed": len(change.changes),
            "runs": runs, "findings": change.findings if finished else [],
            "proofs": change.proofs if finished else [],
            "receipt": change.receipt or None, "envelope": change.envelope}


LISTED = 100


def changes_listed(project: Any) -> list[Change]:
    """The project's newest gated changes (at most LISTED)."""
    return list(Change.objects.filter(project=project).select_related("project")
                .order_by("-created_at")[:LISTED])


def changes_reviewed(user: Any, limit: int) -> list[Change]:
    """The newest gated changes of the projects `user` reviews (the inbox lists them)."""
    return list(Change.objects.select_related("project")
                .filter(project__in=reviewed_projects(user)).order_by("-created_at")[:limit])


def change_page_context(change: Change) -> dict[str, Any]:
    """What the change's page shows: the change, its runs by profile (base and head), the diff
    from base to head as the delivery page shows one, the proofs and findings."""
    runs: dict[str, dict[str, Any]] = {}
    for link in change_runs(change):
        runs.setdefault(link.run.profile.profile_id, {})[link.role] = link.run
    diff = tree_changes(change, change.base_tree.tree_id, change.head_tree.tree_id)
    protected = {entry[0] for entry in change.protected}
    return {"change": change, "runs": sorted(runs.items()), "diff": diff,
            "protected_paths": protected, "url": change_url(change)}

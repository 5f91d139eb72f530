"""What a reviewer is shown of a plan and of a delivery (issue 28): for an evidence plan's
trusted run, the profile's description and exactly what runs; for a file check, the file as the
workspace holds it now (capped); for a delivery, the change from the contract-start tree to the
tree that passed, and the attempt and runs that proved each claim. Reads only."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any, cast

from governor.domain.attempts import Budget, budget_of
from governor.domain.contracts import FILE_CHECK_KINDS
from governor.domain.workspace import Workspace, WorkspaceError
from governor.lib.blobstore import blob_read
from governor.lib.errors import NotFound, ServiceError
from governor.lib.highlight import highlighted
from governor.models import Session, SessionState, Snapshot, WorkspaceKind
from governor.selectors.reviews import terminal_decision
from governor.selectors.sessions import lifecycle_of
from governor.selectors.treediff import tree_changes
from reviews.models import Review
from verification.models import VerificationRun, VerifierProfile

PREVIEW_BYTES = 4096
BINARY_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def size_shown(size: int) -> str:
    """A byte count as people read it: "256 MiB", "1.5 GiB", "512 B"."""
    for unit, scale in BINARY_UNITS:
        if size >= scale:
            return f"{size / scale:.1f}".removesuffix(".0") + f" {unit}"
    return f"{size} B"


def limits_shown(limits: Mapping[str, int]) -> list[tuple[str, str, str]]:
    """A profile's limits as (name, value as read, the exact value): sizes in binary units,
    their exact bytes kept for a title."""
    return [(name, size_shown(value), f"{value:,} bytes") if name.endswith("Bytes")
            else (name, f"{value:,}", "") for name, value in limits.items()]


def profile_shown(profile: VerifierProfile, proposed_receipt: str | None) -> dict[str, object]:
    """A profile as the evidence page shows it: every field that decides what runs."""
    definition = profile.definition()
    return {
        "id": profile.profile_id, "description": profile.description,
        # one string a shell would split back into exactly the argv: which words are one
        # argument shows (issue 40)
        "command": shlex.join(definition["argv"]), "sandbox_mode": definition["sandboxMode"],
        "timeout_ms": definition["timeoutMs"], "limits": limits_shown(
            cast(Mapping[str, int], definition["limits"])),
        "protected_paths": definition.get("protectedPaths", []),
        "report": definition.get("report"), "environment": definition.get("environment", []),
        "plugin_autoload": definition.get("pluginAutoload", False),
        "rootfs": definition["rootfs"], "env_names": sorted(definition["env"]),
        "receipt": profile.receipt, "proposed_receipt": proposed_receipt,
        "edited": proposed_receipt is not None and proposed_receipt != profile.receipt,
    }


def _file_now(session: Session, path: str) -> dict[str, object]:
    """The file at `path` as the workspace holds it now: its text, capped, highlighted; or
    why it cannot be shown."""
    try:
        if session.workspace_kind == WorkspaceKind.SNAPSHOT:
            latest = (Snapshot.objects.filter(session=session).select_related("tree")
                      .order_by("-number").first())
            manifest = latest.tree.manifest if latest is not None else []
            entry = next((e for e in manifest if e[0] == path and e[1] != "120000"), None)
            if entry is None:
                return {"missing": "not in the latest snapshot"}
            data = blob_read(session.project_id, entry[2])
        else:
            with Workspace(session.workspace_path, session.workspace_identity) as workspace:
                data = workspace.read_bytes(path, max_bytes=session.project.max_file_bytes)
    except (WorkspaceError, ServiceError) as exc:
        return {"missing": str(exc)}
    text = data[:PREVIEW_BYTES].decode("utf-8", errors="replace")
    return {"html": highlighted(path, text), "bytes": len(data),
            "cut": len(data) > PREVIEW_BYTES}


def plan_details(session: Session, proposal: Mapping[str, Any]) -> dict[str, dict[str, object]]:
    """By check id: `profile` for a trusted run's check (or, for a later check naming the same
    profile, `same_profile_as`: the id and anchor of the check that shows it), `file` for a
    file check. A check's anchor is `check-<its index>`, as the evidence page numbers them."""
    checks = proposal.get("checks", [])
    named = {str(check.get("profile")) for check in checks
             if check.get("kind") == "code_verification_succeeded"}
    proposed = proposal.get("profileReceipts") or {}
    profiles = {profile.profile_id: profile_shown(profile, proposed.get(profile.profile_id))
                for profile in VerifierProfile.objects.filter(project_id=session.project_id,
                                                              profile_id__in=named)}
    details: dict[str, dict[str, object]] = {}
    files: dict[str, dict[str, object]] = {}
    shown_at: dict[str, dict[str, str]] = {}  # profile id -> the check that shows it in full
    for index, check in enumerate(checks):
        kind = check.get("kind")
        if kind == "code_verification_succeeded":
            profile_id = str(check.get("profile"))
            if profile_id in shown_at:  # a required profile the agent names too: shown once
                details[str(check.get("id"))] = {"same_profile_as": shown_at[profile_id]}
                continue
            if profile_id in profiles:
                shown_at[profile_id] = {"id": str(check.get("id")), "anchor": f"check-{index}"}
            details[str(check.get("id"))] = {"profile": profiles.get(profile_id)}
        elif kind in FILE_CHECK_KINDS and kind != "file_absent":
            path = str(check.get("path"))
            if path not in files:
                files[path] = _file_now(session, path)
            details[str(check.get("id"))] = {"file": {"path": path, **files[path]}}
    return details


DELIVERY_DIFFED = 200  # files diffed on the delivery page; all are listed


def delivery_shown(review: Review) -> dict[str, object]:
    """The delivery page's reads: the contract, its passing attempt (the one the proposal
    names), the runs that attempt counted with their report counts, and the changes."""
    proposal = review.proposal
    session = review.session
    folded = lifecycle_of(SessionState.objects.only("lifecycle").get(session=session))
    record = folded["contract"]
    contract: dict[str, Any] | None = dict(record["data"]) if record else None
    attempt: dict[str, Any] | None = next(
        (dict(item["data"]) for item in folded["attempts"]
         if item["data"].get("receipt") == proposal.get("attemptReceipt")), None)
    receipts = set(proposal["runReceipts"])
    runs = [run for run in VerificationRun.objects.filter(session=session, baseline=False)
            .select_related("profile").order_by("created_at")
            if isinstance(run.result, dict) and run.result.get("receipt") in receipts]
    start = (proposal.get("startTree") or {}).get("id")
    tree = (proposal.get("tree") or {}).get("id")
    changes = None
    if start and tree:
        try:
            changes = tree_changes(session, start, tree, diffed=DELIVERY_DIFFED, listed=None)
        except NotFound:
            changes = None
    claims = []
    results = {result["id"]: result for result in (attempt or {}).get("results", [])}
    for claim in (contract or {}).get("claims", []):
        claims.append({**claim, "results": [results[check_id] for check_id in
                                            claim.get("checkIds", []) if check_id in results]})
    return {"contract": contract, "attempt": attempt, "claims_proved": claims,
            "runs_counted": runs, "changes": changes}


def delivery_budget(review: Review) -> Budget | None:
    """Issue 40: the repair budget of the contract a delivery review is of, as the review
    leaves it: `used` is the attempt delivered (none is made while a person reviews), `ended`
    the status of the terminal this review's decision wrote, if it wrote one. None once
    another contract replaced it."""
    folded = lifecycle_of(SessionState.objects.only("lifecycle").get(session_id=review.session_id))
    record, ended = folded["contract"], folded["terminal"]
    if record is None or record["data"]["contractId"] != review.proposal.get("contractId"):
        return None
    terminal = ended["data"] if ended else None
    written = terminal if terminal and terminal_decision(terminal, [review]) else None
    return budget_of(record["data"], int(review.proposal.get("attempt", 0)), written)

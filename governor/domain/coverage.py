"""rules §5: the structural coverage assessment of a proposal's claims by its checks.

`assess` takes claims and checks in stored camelCase form (as `contracts.Proposal` holds them).
The assessment::

    {"status": "ready" | "not-ready",
     "findings": [{"code", "severity": "warning" | "error", "message", "claimId"?, "checkId"?}],
     "scores": {"critical": {"covered", "total", "percent"},
                "weighted": {"covered", "total", "percent"}},
     "claims": [{"id", "importance", "verification", "covered", "sources", "requiredSources"}],
     "evidenceSources": {"<check id>": "<source>"},
     "receipt": receipt("coverage-assessment", {objective, claims, checks, assessment})}

A claim is covered when it is deterministic, names at least one check and its checks draw on at
least `minimumIndependentSources` distinct evidence sources. Weighted scores count claim weights
(critical 5, important 3, minor 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, NotRequired, TypedDict

from governor.domain.canonical import receipt
from governor.domain.changes import PROTECTED_CLAIM_ID
from governor.domain.contracts import (
    FILE_CHECK_KINDS,
    REQUIRED_CODE_CLAIM_ID,
    SCOPE_CHECK_KINDS,
    TOOL_CHECK_KINDS,
    normalise_path,
)
from governor.domain.documents import Check, Claim
from governor.domain.tamper import TAMPER_CHECK_KIND, TAMPER_CLAIM_ID

WEIGHTS = {"critical": 5, "important": 3, "minor": 1}
TRAJECTORY_SOURCE = "session-trajectory:tool-events"
CHANGES_SOURCE = "workspace-changes"  # every scope check of a contract is one source (§14.2)
BASELINES = ("fails", "passes", "unknown")
INJECTED = frozenset({PROTECTED_CLAIM_ID, REQUIRED_CODE_CLAIM_ID})  # the governor's claims

# check kind -> (finding code, message) for the per-claim, per-supporting-check warnings.
CHECK_WARNINGS = {
    "file_contains": (
        "exact_literal_brittleness",
        "an exact, case-sensitive substring match breaks on harmless rewording",
    ),
    "file_not_contains": (
        "exact_literal_brittleness",
        "an exact, case-sensitive substring match misses reworded content",
    ),
    "file_exists": ("presence_only_evidence", "the file's presence says nothing about its content"),
    "no_tool_errors": (
        "trajectory_not_outcome",
        "error-free tool calls describe the path taken, not the outcome reached",
    ),
    "tool_succeeded": (
        "tool_success_not_outcome",
        "a tool call that succeeded does not prove the outcome it was meant for",
    ),
}


class Finding(TypedDict):
    code: str
    severity: Literal["warning", "error"]
    message: str
    claimId: NotRequired[str]
    checkId: NotRequired[str]


class Score(TypedDict):
    covered: int
    total: int
    percent: float


class ClaimCoverage(TypedDict):
    id: str
    importance: str
    verification: str
    covered: bool
    sources: list[str]
    requiredSources: int


def evidence_source(check: Check, heldout: Mapping[str, str] | None = None) -> str:
    """Where a check's evidence comes from: one file, the session trajectory, a profile — or,
    for a profile judged by a held-out suite (`heldout`: the suite's name by profile id), the
    suite: every profile judged by one suite is one source (rules §18.4)."""
    kind = check["kind"]
    if kind in FILE_CHECK_KINDS:
        return f"workspace-file:{normalise_path(check['path'])}"
    if kind in TOOL_CHECK_KINDS:
        return TRAJECTORY_SOURCE
    if kind == "code_verification_succeeded":
        suite = (heldout or {}).get(str(check["profile"]))
        return f"heldout:{suite}" if suite else f"trusted-profile:{check['profile']}"
    if kind in SCOPE_CHECK_KINDS or kind == TAMPER_CHECK_KIND:  # both read the changes
        return CHANGES_SOURCE
    raise ValueError(f"unknown check kind {kind!r}")


def _score(covered: int, total: int) -> Score:
    percent = round(covered / total * 100, 2) if total else 0
    return {"covered": covered, "total": total, "percent": percent}


def assess(
    objective: str, claims: Sequence[Claim], checks: Sequence[Check], *,
    baselines: Mapping[str, str] | None = None, require_discriminating: bool = False,
    heldout: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The coverage assessment of §5, with its receipt. With `baselines` (each check's result on
    the contract-start state, §14.5: `fails`, `passes` or `unknown`), a critical claim none of
    whose checks fails there does not tell done from not done: a warning, or an error when the
    project requires discriminating evidence. The baselines are part of the assessment (and so
    of its receipt). `heldout`: the held-out suite judging each profile that has one (§18.4)."""
    checks_by_id = {check["id"]: check for check in checks}
    sources = {check["id"]: evidence_source(check, heldout) for check in checks}
    users: dict[str, list[str]] = {check["id"]: [] for check in checks}
    for claim in claims:
        for check_id in claim["checkIds"]:
            users.setdefault(check_id, []).append(claim["id"])

    findings: list[Finding] = [
        {
            "code": "structural_coverage_only",
            "severity": "warning",
            "message": "Coverage is structural: it shows which declared claims have checks, not "
            "that the checks prove them, and it covers the declared claims only.",
        }
    ]
    if not any(claim["importance"] == "critical" for claim in claims):
        findings.append(
            {
                "code": "missing_critical_claim",
                "severity": "error",
                "message": "No claim is critical: at least one claim must state what completion "
                "critically requires.",
            }
        )
    for claim in claims:
        for check_id in claim["checkIds"]:
            kind = checks_by_id[check_id]["kind"]
            if kind in CHECK_WARNINGS:
                code, reason = CHECK_WARNINGS[kind]
                findings.append(
                    {
                        "code": code,
                        "severity": "warning",
                        "claimId": claim["id"],
                        "checkId": check_id,
                        "message": f"Claim {claim['id']!r} relies on {kind} check "
                        f"{check_id!r}: {reason}.",
                    }
                )

    others_critical = any(claim["importance"] == "critical" and claim["id"] not in INJECTED
                          for claim in claims)
    for claim in claims:
        if claim["id"] in (PROTECTED_CLAIM_ID, TAMPER_CLAIM_ID):  # injected constraints
            continue
        kinds = {checks_by_id[check_id]["kind"] for check_id in claim["checkIds"]}
        if kinds and kinds <= SCOPE_CHECK_KINDS:
            findings.append({
                "code": "constraint_not_outcome", "severity": "warning", "claimId": claim["id"],
                "message": f"Claim {claim['id']!r} is supported by scope checks alone: what "
                           "changed, or did not, is a constraint on the work, not its outcome."})
        known = [baselines.get(check_id) for check_id in claim["checkIds"]] if baselines else []
        if baselines is not None and claim["importance"] == "critical" and "fails" not in known:
            # A trusted run's baseline is known only from its baseline run (§14.7): a claim
            # that rests on one is warned about, never refused, before that run — a report
            # profile's check then fails unless a test failed in it (§17.6).
            refused = require_discriminating and "unknown" not in known
            if claim["id"] == REQUIRED_CODE_CLAIM_ID and not refused and others_critical:
                continue  # injected: the agent's own critical claims carry the warning
            if refused:
                why = " (the project requires discriminating evidence)"
            elif "unknown" in known:
                why = " — unless its trusted run fails on the start tree" + (
                    " (the project requires it: a test run none of whose tests failed there "
                    "does not count)" if require_discriminating else "")
            else:
                why = ""
            findings.append({
                "code": "claim_not_discriminating",
                "severity": "error" if refused else "warning",
                "claimId": claim["id"],
                "message": f"Critical claim {claim['id']!r} has no check that fails before the "
                           f"work: its evidence cannot tell done from not done{why}."})

    claim_rows: list[ClaimCoverage] = []
    for claim in claims:
        claim_sources = sorted({sources[check_id] for check_id in claim["checkIds"]})
        required = claim.get("minimumIndependentSources", 1)
        if claim["verification"] == "human-required":
            findings.append(
                {
                    "code": "claim_requires_human",
                    "severity": "error",
                    "claimId": claim["id"],
                    "message": f"Claim {claim['id']!r} needs human judgement; the "
                    "governor cannot certify it.",
                }
            )
        elif claim["verification"] == "unsupported":
            findings.append(
                {
                    "code": "claim_unsupported",
                    "severity": "error",
                    "claimId": claim["id"],
                    "message": f"Claim {claim['id']!r} is marked unsupported: no check "
                    "can establish it.",
                }
            )
        enough = len(claim_sources) >= required
        if not enough:
            findings.append(
                {
                    "code": "insufficient_independent_sources",
                    "severity": "error",
                    "claimId": claim["id"],
                    "message": f"Claim {claim['id']!r} draws on {len(claim_sources)} "
                    f"independent evidence source(s); it requires {required}.",
                }
            )
        claim_rows.append(
            {
                "id": claim["id"],
                "importance": claim["importance"],
                "verification": claim["verification"],
                "covered": claim["verification"] == "deterministic"
                and bool(claim_sources)
                and enough,
                "sources": claim_sources,
                "requiredSources": required,
            }
        )

    for check in checks:
        used_by = users[check["id"]]
        if not used_by:
            findings.append(
                {
                    "code": "orphan_check",
                    "severity": "warning",
                    "checkId": check["id"],
                    "message": f"Check {check['id']!r} supports no claim.",
                }
            )
        elif len(used_by) > 1:
            findings.append(
                {
                    "code": "shared_check",
                    "severity": "warning",
                    "checkId": check["id"],
                    "message": f"Check {check['id']!r} supports {len(used_by)} claims "
                    f"({', '.join(used_by)}), so they are not independent.",
                }
            )

    critical = [row for row in claim_rows if row["importance"] == "critical"]
    weighted_total = sum(WEIGHTS[row["importance"]] for row in claim_rows)
    weighted_covered = sum(WEIGHTS[row["importance"]] for row in claim_rows if row["covered"])
    assessment: dict[str, Any] = {
        "status": "not-ready" if any(f["severity"] == "error" for f in findings) else "ready",
        "findings": findings,
        "scores": {
            "critical": _score(sum(1 for row in critical if row["covered"]), len(critical)),
            "weighted": _score(weighted_covered, weighted_total),
        },
        "claims": claim_rows,
        "evidenceSources": sources,
    }
    if baselines is not None:
        assessment["baselines"] = dict(baselines)
    assessment["receipt"] = assessment_receipt(objective, claims, checks, assessment)
    return assessment


def assessment_receipt(
    objective: str,
    claims: Sequence[Claim],
    checks: Sequence[Check],
    assessment: Mapping[str, object],
) -> str:
    """Recompute the receipt an assessment carries (for verifiers)."""
    return receipt(
        "coverage-assessment",
        {
            "objective": objective,
            "claims": list(claims),
            "checks": list(checks),
            "assessment": {key: value for key, value in assessment.items() if key != "receipt"},
        },
    )

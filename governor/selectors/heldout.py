"""Held-out suites as they are read (rules §18): a version's files and cases back from the
blob store — for a run, and for the project's reviewers and operators only — and what an agent
or an export is shown of one: its name, version receipt and counts."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.db.models import Q

from governor.domain.heldout import Case, agent_view, oracle_evidence, shown_input, stored_cases
from governor.lib.blobstore import blob_read
from governor.models import Project, Session
from verification.models import (
    HeldoutSuite,
    HeldoutSuiteVersion,
    VerificationRun,
    VerifierProfile,
)


def suite_version_files(version: HeldoutSuiteVersion) -> list[tuple[str, str, bytes]]:
    """The files of a suite version (never its cases), read back from the store."""
    project = version.suite.project_id
    return [(item["path"], item["mode"], blob_read(project, item["blob"], heldout=True))
            for item in version.document["files"]]


def suite_version_cases_data(version: HeldoutSuiteVersion) -> bytes | None:
    """A suite version's cases.jsonl as loaded, or None when it has no cases."""
    cases = version.document.get("cases")
    if not cases:
        return None
    return blob_read(version.suite.project_id, cases["blob"], heldout=True)


def suite_version_cases(version: HeldoutSuiteVersion) -> tuple[Case, ...]:
    """The cases of a suite version, expected values included: for the worker's comparison and
    the project's reviewers and operators only."""
    data = suite_version_cases_data(version)
    return () if data is None else stored_cases(data)


def suite_current(project: Project, name: str) -> HeldoutSuiteVersion | None:
    """The current version of the project's suite `name`, or None."""
    row = (HeldoutSuite.objects.filter(project=project, name=name)
           .select_related("version").first())
    return row.version if row is not None else None


def suites_current(project: Project, definition: Mapping[str, Any]
                   ) -> dict[str, HeldoutSuiteVersion | None]:
    """Rules §18.2, §18.3: the current versions of the held-out suites a profile definition
    names, by field — what its run mounts or answers (None when it names none, or the suite is
    gone: the run then fails as `infrastructure`, saying so)."""
    return {field: suite_current(project, str(definition.get(field)))
            if definition.get(field) else None for field in ("heldout", "oracle")}


def suites_unknown(project: Project, validated: Mapping[str, Any]) -> list[dict[str, str]]:
    """Rules 18.2, 18.3: the suites a validated profile names that its project does not have,
    as field errors (``heldout``, ``oracle``); a profile naming one is refused."""
    named = {field: validated.get(field) for field in ("heldout", "oracle")
             if validated.get(field)}
    known = set(HeldoutSuite.objects.filter(project=project, name__in=named.values(),
                                            version__isnull=False)
                .values_list("name", flat=True))
    return [{"path": field, "message": f"no held-out suite {name!r} in project "
                                       f"{project.slug} (load it first: manage.py "
                                       f"governor_heldout load DIR --project {project.slug} "
                                       f"--name {name})"}
            for field, name in named.items() if name not in known]


def heldout_sources(project: Project) -> dict[str, str]:
    """Rule 18.4: the held-out suite judging each of the project's profiles that has one (its
    oracle's, else its held-out tests'), by profile id: coverage counts one source per suite."""
    rows = VerifierProfile.objects.filter(project=project).filter(
        Q(heldout__gt="") | Q(oracle__gt="")).values_list("profile_id", "heldout", "oracle")
    return {profile_id: oracle or heldout for profile_id, heldout, oracle in rows}


def suite_versions(project: Project) -> dict[str, dict[str, str]]:
    """Rule 18: the current version of each held-out suite each of the project's profiles
    names, by profile id and field (`heldout`, `oracle`): a run of another version is stale."""
    current = dict(HeldoutSuite.objects.filter(project=project, version__isnull=False)
                   .values_list("name", "version__receipt"))
    rows = VerifierProfile.objects.filter(project=project).filter(
        Q(heldout__gt="") | Q(oracle__gt="")).values_list("profile_id", "heldout", "oracle")
    return {profile_id: {field: current.get(name, "") for field, name
                         in (("heldout", heldout), ("oracle", oracle)) if name}
            for profile_id, heldout, oracle in rows}


def suite_agent_view(version: HeldoutSuiteVersion) -> dict[str, Any]:
    """All an agent or an export is shown of a suite version (rule 18.1)."""
    return agent_view(version.document, version.receipt)


def session_suites(session: Session, runs: Sequence[VerificationRun] | None = None,
                   profiles: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Rule 18.4: the held-out suite versions the session's runs mounted or answered, and the
    current versions of those the named `profiles` are judged by (what an evidence plan's
    checks will run), as the project's reviewers and operators see them — every file (path,
    mode, size, blob id) and every case with its input and expected value — with each oracle
    run's failing cases. Only for the session pages and the review pages, which only members
    of the project open. `runs`: the session's runs when the caller has read them already (no
    query unless one of them used a suite)."""
    named = sorted(set(profiles))
    versions: dict[int, HeldoutSuiteVersion] = {}
    if named:
        for heldout, oracle in VerifierProfile.objects.filter(
                project_id=session.project_id, profile_id__in=named).values_list(
                "heldout", "oracle"):
            for name in filter(None, (heldout, oracle)):
                current = suite_current(session.project, name)
                if current is not None:
                    versions.setdefault(current.pk, current)
    if runs is not None and not any(run.heldout_id or run.oracle_id for run in runs):
        runs = []
    else:
        runs = list(VerificationRun.objects.filter(session=session)
                    .filter(Q(heldout__isnull=False) | Q(oracle__isnull=False))
                    .select_related("heldout__suite", "oracle__suite", "profile")
                    .order_by("created_at"))
    for run in runs:
        for version in (run.heldout, run.oracle):
            if version is not None:
                versions.setdefault(version.pk, version)
    shown = []
    for version in versions.values():
        verdicts = [{"profile": run.profile.profile_id, "baseline": run.baseline,
                     "evidence": oracle_evidence(run.result["oracle"]),
                     "outcomes": dict(map(tuple, run.tests or []))}
                    for run in runs if run.oracle_id == version.pk and run.result
                    and isinstance(run.result.get("oracle"), dict)]
        cases = [{"id": case.id, "compare": case.compare, "tolerance": case.tolerance,
                  "input": shown_input(case.input), "expected": shown_input(case.expected)}
                 for case in suite_version_cases(version)]
        shown.append({**suite_agent_view(version), "file_list": version.document["files"],
                      "case_list": cases, "verdicts": verdicts})
    return shown

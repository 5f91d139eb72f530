"""rules §19: gating a change at the pull request, with no session.

`change_create` records the base and head trees (uploaded as §11 snapshots are: blobs first,
then the entries), reads the policy from the base (`governor/domain/gate.py`), judges what it
can at once (changes, protected paths, scope, tamper scan) and queues the policy's profiles on
the base (reusing a base run of the same tree and profile receipt) and on the head with the
base's protected content laid over it (rules §17.2). `change_judge` decides once every run has
finished: `certified` with a signed attestation of the head tree, or `not-certified` with the
findings as repair texts."""

from __future__ import annotations

import logging
import re
from typing import Any, cast

from django.db import transaction
from django.utils import timezone

from governor.domain import attestation
from governor.domain.canonical import receipt
from governor.domain.changes import WorkspaceChange, changes_digest, offending, protected_check
from governor.domain.checkout import checkout_attributes, is_attributes_file, refusal_text
from governor.domain.fields import FieldErrors, FieldsInvalid
from governor.domain.gate import (
    POLICY_FILE,
    Policy,
    PolicyError,
    RunOutcome,
    gate_policy,
    judge_change,
    policy_file_parse,
)
from governor.domain.runner_control import in_force
from governor.domain.tamper import scan, scanned_paths
from governor.domain.tree import TREE_ID_PREFIX, exclusions_digest, validate_exclusions
from governor.lib import metrics, queue
from governor.lib.blobstore import blob_read
from governor.lib.errors import Invalid, ServiceError, Unavailable
from governor.lib.notify import announce_on_commit, change_topic, inbox_topic
from governor.lib.queue import task_send_on_commit
from governor.models import AgentToken, Change, ChangeState, ChangeVerdict, WorkspaceTree
from governor.selectors.heldout import suites_current
from governor.selectors.treediff import changes_read
from governor.services import keys
from governor.services.snapshots import tree_from_entries
from verification.models import ChangeRun, RunState, VerificationRun, VerifierProfile

log = logging.getLogger(__name__)
RUN_TASK = "verification.tasks.run_verification"
COMMIT = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
SUBJECT_PREFIX = "change:"


def _body_checked(body: Any) -> dict[str, Any]:
    """The body's shape: `base {commit, entries}`, `head {commit, entries | changes}`,
    `observe?`; FieldsInvalid naming every refused field."""
    errors = FieldErrors()
    if type(body) is not dict:
        raise FieldsInvalid([{"path": "", "message": "must be a JSON object"}])
    errors.keys("", body, ("base", "head", "observe"), required=("base", "head"))
    if "observe" in body and type(body["observe"]) is not bool:
        errors.add("observe", "must be true or false")
    for side in ("base", "head"):
        value = body.get(side)
        if value is None:
            continue
        if type(value) is not dict:
            errors.add(side, "must be a JSON object {commit, entries}")
            continue
        allowed = ("commit", "entries", "changes") if side == "head" else ("commit", "entries",
                                                                           "tree")
        errors.keys(side, value, allowed, required=("commit",))
        commit = value.get("commit")
        if commit is not None and (type(commit) is not str or not COMMIT.match(commit)):
            errors.add(f"{side}.commit", "must be a commit id: 40 or 64 lowercase hex digits")
        given = [key for key in ("entries", "changes", "tree") if key in value]
        if len(given) != 1:
            errors.add(f"{side}.entries", "required" if not given else
                       "give entries (the whole tree), or for the head its changes over the "
                       "base, or for the base the id of a tree the server keeps: one of them")
    if not errors.items:
        base, head = body["base"]["commit"], body["head"]["commit"]
        if len(base) != len(head):
            errors.add("head.commit", "the base and the head must be commits of one repository "
                                      "(one object format: both 40 or both 64 hex digits)")
    if errors.items:
        raise FieldsInvalid(errors.items)
    return body


def _kept_base(project: Any, tree_id: Any) -> WorkspaceTree:
    """A base named by its id: a tree the project keeps under its exclusions now (an earlier
    change's, say), so its entries need not be sent again; otherwise refused naming
    `base.tree`, and the client sends the entries."""
    exclusions = list(validate_exclusions(project.tree_exclusions, "tree_exclusions"))
    kept = WorkspaceTree.objects.filter(
        project=project, tree_id=tree_id if isinstance(tree_id, str) else "",
        exclusions_digest=exclusions_digest(exclusions)).first()
    if kept is None:
        raise Invalid("base.tree: this server keeps no such tree of the project: send the "
                      "base's entries", details=[{"path": "base.tree", "message": "not kept: "
                                                  "send entries"}])
    return kept


def _policy_file(project_id: int, base: WorkspaceTree) -> dict[str, Any] | None:
    """The base's `.governor-gate.toml`, parsed; None when the base has none. A file that is
    not a regular file, or cannot be parsed, is refused naming it (and its line and key)."""
    entry = next((e for e in base.manifest if e[0] == POLICY_FILE), None)
    if entry is None:
        return None
    if entry[1] == "120000":
        raise Invalid(f"base: {POLICY_FILE} is a symbolic link; the gate reads a regular file",
                      details=[{"path": f"base: {POLICY_FILE}", "message": "a symbolic link"}])
    try:
        return policy_file_parse(blob_read(project_id, entry[2]))
    except PolicyError as exc:
        details = [{"path": f"base: {e['path']}", "message": e["message"]} for e in exc.errors]
        raise Invalid("the base's gate policy is refused: " + "; ".join(
            f"{d['path']}: {d['message']}" for d in details), details=details) from None


def _profiles(change_project: Any, policy: Policy, file: dict[str, Any] | None
              ) -> list[VerifierProfile]:
    profiles = {p.profile_id: p for p in VerifierProfile.objects.filter(
        project=change_project, profile_id__in=policy.required_profiles)}
    unknown = [name for name in policy.required_profiles if name not in profiles]
    if unknown:
        where = (f"base: {POLICY_FILE} required_profiles"
                 if file and set(unknown) & set(file.get("required_profiles", []))
                 else "required_profiles")
        raise Invalid(f"{where}: no verifier profile {unknown[0]!r} in project "
                      f"{change_project.slug}", details=[{"path": where, "message":
                                                          f"unknown profile {unknown[0]!r}"}])
    return [profiles[name] for name in policy.required_profiles]


def _project_policy(project: Any, file: dict[str, Any] | None) -> Policy:
    required = VerifierProfile.objects.filter(project=project, required=True).values_list(
        "profile_id", flat=True)
    return gate_policy(project_required=list(required),
                       project_protected=list(project.protected_paths),
                       project_discriminating=project.require_discriminating_evidence,
                       file=file)


def _run_for(*, profile: VerifierProfile, tree: WorkspaceTree, baseline: bool,
             overlay: dict[str, Any] | None) -> tuple[VerificationRun, bool]:
    """A gate run of `profile` on `tree`: one already queued, running or finished with a
    result (not lost to the infrastructure) for the same profile receipt, tree and overlay, or
    a new one (then True)."""
    definition = profile.definition()
    suites = suites_current(profile.project, definition)  # the held-out versions it runs (§18)
    same = VerificationRun.objects.filter(
        session__isnull=True, profile=profile, profile_receipt=profile.receipt,
        tree=tree.tree_id, tree_exclusions=tree.exclusions_digest, baseline=baseline, **suites,
    ).order_by("-created_at")
    for run in same[:20]:
        if run.overlay != overlay:
            continue
        if run.state == RunState.FINISHED and (run.result or {}).get(
                "failureKind") == "infrastructure":
            continue
        return run, False
    run = VerificationRun.objects.create(
        profile=profile, profile_receipt=profile.receipt, definition=definition,
        tree=tree.tree_id, tree_exclusions=tree.exclusions_digest, baseline=baseline,
        overlay=overlay, **suites)
    return run, True


def change_create(*, token: AgentToken, body: Any) -> Change:
    """Record a change to gate and queue its runs; the refusal of any part stores nothing."""
    project = token.project
    body = _body_checked(body)
    head_body = body["head"]
    with transaction.atomic():
        if "tree" in body["base"]:
            base = _kept_base(project, body["base"]["tree"])
        else:
            base = tree_from_entries(project, body["base"]["entries"], where="base")
        if "changes" in head_body:
            head = tree_from_entries(project, head_body["changes"], base_tree=base,
                                     where="head", base_field="base", field="changes")
        else:
            head = tree_from_entries(project, head_body["entries"], where="head")
        file = _policy_file(project.pk, base)
        policy = _project_policy(project, file)
        profiles = _profiles(project, policy, file)
        control = in_force(project.runner_control_exempt)
        patterns = [*policy.protected_paths, *control.paths, POLICY_FILE,
                    *(path for profile in profiles
                      for path in cast(list[str],
                                       profile.definition().get("protected_paths") or []))]
        check = protected_check(patterns, (), control.sections)
        changes = changes_read(project.pk, base.manifest, head.manifest)
        protected = offending(check, changes)
        findings, more = [], 0
        if policy.tamper_scan:
            paths = scanned_paths((c.path, c.kind) for c in changes)
            entries = {e[0]: e for e in head.manifest}

            def read(path: str) -> bytes | str:
                try:
                    return blob_read(project.pk, entries[path][2])
                except ServiceError as exc:
                    return f"unreadable: {exc.message}"

            found, more = scan(paths, read)
            findings = [f.as_dict() for f in found]
        converted = _converted(project.pk, head)
        change = Change.objects.create(
            project=project, token=token, base_commit=body["base"]["commit"],
            head_commit=head_body["commit"], base_tree=base, head_tree=head,
            observe=bool(body.get("observe")), policy={**policy.as_dict(),
                                                       "protected": check, "tamperMore": more},
            policy_receipt=policy.receipt, converted=converted,
            changes=[[c.path, c.kind, list(c.sections)] for c in changes],
            protected=[[c.path, c.kind, list(c.sections)] for c in protected],
            tamper=findings)
        overlay = {"reference": {"id": base.tree_id, "exclusions": base.exclusions_digest},
                   "check": check}
        queued = []
        for profile in profiles:
            for role, tree, laid in (("base", base, None), ("head", head, overlay)):
                run, new = _run_for(profile=profile, tree=tree, baseline=role == "base",
                                    overlay=laid)
                ChangeRun.objects.get_or_create(change=change, run=run, role=role)
                if new:
                    queued.append(run)
        for run in queued:
            task_send_on_commit(RUN_TASK, str(run.pk), on_failure=_unqueued(change))
        # A change whose runs were all run before (or that has none) is decided at once.
        queue.after_commit(lambda: change_judge(change_id=change.pk))
        announce_on_commit(inbox_topic(project.pk))
    return change


def _converted(project_id: int, head: WorkspaceTree) -> dict[str, Any]:
    """Rules §17.9: the head's paths a checkout would convert (its own `.gitattributes`),
    as the refusal names them; empty when none."""
    paths = [entry[0] for entry in head.manifest]
    files = {}
    for entry in head.manifest:
        if is_attributes_file(entry[0]):
            try:
                files[entry[0]] = blob_read(project_id, entry[2])  # a link: its text
            except ServiceError as exc:
                return {"text": f"{entry[0]} cannot be read: {exc.message}",
                        "paths": [entry[0]]}
    found = checkout_attributes(paths, files)
    if not found:
        return {}
    return {"text": refusal_text(found), "paths": sorted({item.path for item in found})}


def _unqueued(change: Change) -> Any:
    def unqueued(exc: Exception) -> None:
        log.warning("change %s: a run was not queued: %s", change.pk, exc)
        raise Unavailable("the task broker is unavailable, so the change's runs cannot be "
                          "queued; they end as infrastructure failures unless a worker takes "
                          "them — gate again later") from None
    return unqueued


def _outcome(run: VerificationRun) -> RunOutcome:
    result = run.result or {}
    tests = None if run.tests is None else {str(t[0]): str(t[1]) for t in run.tests}
    return RunOutcome(profile=run.profile.profile_id, passed=bool(result.get("passed")),
                      failure=result.get("failureKind"), tests=tests,
                      receipt=result.get("receipt"))


def change_judge(*, change_id: Any) -> Change | None:
    """Decide the change once every run it waits for has finished (called when it is created
    and when each of its runs ends); None while one still runs or when it was decided."""
    with transaction.atomic():
        change = Change.objects.select_for_update().select_related(
            "base_tree", "head_tree", "project").get(pk=change_id)
        if change.state == ChangeState.FINISHED:
            return None
        links = list(ChangeRun.objects.filter(change=change).select_related("run",
                                                                            "run__profile"))
        if any(link.run.state != RunState.FINISHED for link in links):
            return None
        runs = {role: {link.run.profile.profile_id: _outcome(link.run)
                       for link in links if link.role == role} for role in ("base", "head")}
        stored = change.policy
        policy = Policy(required_profiles=tuple(stored["required_profiles"]),
                        protected_paths=tuple(stored["protected_paths"]),
                        changes_within=(None if stored["changes_within"] is None
                                        else tuple(stored["changes_within"])),
                        tamper_scan=stored["tamper_scan"],
                        require_discriminating_evidence=stored["require_discriminating_evidence"],
                        from_file=stored["from_file"])
        changes = [WorkspaceChange(c[0], c[1], tuple(c[2])) for c in change.changes]
        protected = [WorkspaceChange(c[0], c[1], tuple(c[2])) for c in change.protected]
        reports = [link.run.profile.profile_id for link in links
                   if link.run.definition.get("report")]
        verdict = judge_change(
            policy=policy, changes=changes, protected=protected,
            sections=stored["protected"].get("sections") or [], tamper=change.tamper,
            tamper_more=int(stored.get("tamperMore") or 0), base_runs=runs["base"],
            head_runs=runs["head"], report_profiles=reports,
            converted=change.converted.get("text", ""),
            converted_paths=change.converted.get("paths", []))
        run_receipts = sorted(o.receipt for o in runs["head"].values() if o.receipt)
        change.verdict = str(ChangeVerdict.CERTIFIED.value if verdict.certified
                             else ChangeVerdict.NOT_CERTIFIED.value)
        change.findings, change.proofs = verdict.findings, verdict.proofs
        change.rules = sorted({f["rule"] for f in verdict.findings})
        change.receipt = receipt("gate-change", {
            "baseCommit": change.base_commit, "headCommit": change.head_commit,
            "baseTree": change.base_tree.tree_id, "headTree": change.head_tree.tree_id,
            "policyReceipt": change.policy_receipt, "runReceipts": run_receipts,
            "verdict": change.verdict, "findings": verdict.findings})
        if verdict.certified:
            change.envelope = _attested(change, changes, run_receipts, links)
        change.state = ChangeState.FINISHED
        change.finished_at = timezone.now()
        change.save(update_fields=["verdict", "findings", "proofs", "rules", "receipt",
                                   "envelope", "state", "finished_at"])
        announce_on_commit(change_topic(change.pk))
        announce_on_commit(inbox_topic(change.project_id))
        _count(change)
    return change


def _attested(change: Change, changes: list[WorkspaceChange], run_receipts: list[str],
              links: list[ChangeRun]) -> dict[str, Any]:
    """rules §19.2: the §16 predicate for the head tree, with the base as start tree; its
    subject is the change (`change:<id>`, the change's receipt as digest)."""
    statement = attestation.build_statement(
        session_id="", contract_id="", chain_head=change.receipt.removeprefix("sha256:"),
        kind="terminal", event_seq=0, contract_receipt=change.policy_receipt,
        profile_receipts=sorted({link.run.profile_receipt for link in links}),
        status="certified", reason={"code": "gate-certified", "baseCommit": change.base_commit,
                                    "headCommit": change.head_commit},
        terminal_receipt=change.receipt, run_receipts=run_receipts,
        workspace_tree=change.head_tree.tree_id.removeprefix(TREE_ID_PREFIX),
        start_tree=change.base_tree.tree_id, changes_digest=changes_digest(changes),
        subject=f"{SUBJECT_PREFIX}{change.pk}")
    _, envelope = keys.statement_sign(statement)
    return dict(envelope)


def _count(change: Change) -> None:
    outcome = change.verdict
    rules = list(change.rules) or [""]
    observe = "observe" if change.observe else "enforce"

    def record() -> None:
        for rule in rules:
            metrics.CHANGES.labels(project=change.project.slug, verdict=outcome, rule=rule,
                                   mode=observe).inc()
    metrics.count_on_commit(record)

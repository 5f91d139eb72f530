"""Completion contracts: assess, begin, attempts, turn-stop, abstain (rules §5–7). A contract
becomes active in `governor/services/activation.py`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from governor.domain import attempts, coverage, drafting, lifecycle, messages
from governor.domain import contracts as domain
from governor.domain.changes import PROTECTED_CHECK_ID, WorkspaceChange, changes_digest, left_in
from governor.domain.checkout import refusal_text
from governor.domain.checks import (
    LogEvidence,
    evaluate_checks,
    runs_counted,
    unjudged_results,
)
from governor.domain.documents import ContractDocument
from governor.domain.runner_control import in_force
from governor.domain.tamper import TAMPER_CHECK_KIND
from governor.domain.tree import Tree
from governor.lib import metrics
from governor.lib.errors import Conflict, Invalid, ReviewRequired, ServiceError
from governor.models import (
    AgentToken,
    AuthoringMode,
    Project,
    ReviewMode,
    Session,
    SessionState,
    UnattendedEvidence,
)
from governor.selectors.drafts import draft_receipt_used
from governor.selectors.evidence import DatabaseEvidence
from governor.selectors.heldout import heldout_sources, suite_versions
from governor.selectors.outcomes import outcome_binding, outcome_words
from governor.selectors.profiles import (
    profile_protected_paths,
    profile_receipts,
    profiles_judging,
    required_profile_ids,
)
from governor.selectors.reviews import (
    contract_deliveries,
    decision_message,
    request_message,
    review_pending,
    review_url,
    terminal_decision,
    untold_and_pending,
)
from governor.selectors.sessions import lifecycle_of
from governor.selectors.snapshots import tree_named
from governor.selectors.treediff import changes_read, kept_manifest, kept_manifests
from governor.services import reviews
from governor.services.activation import contract_activate
from governor.services.events import (
    governor_event_append,
    session_locked,
)
from governor.services.runs import runs_request_baseline
from governor.services.terminals import TerminalEvidence, terminal_write
from governor.services.trees import TreeUnavailable, workspace_hashed
from reviews.models import Review, Stage


@dataclass
class BeginResult:
    status: str  # "active" | "review-pending" | "review-required"
    contract: ContractDocument | None = None
    assessment: dict[str, Any] | None = None
    review: dict[str, Any] | None = None


@dataclass
class AttemptResult:
    attempt: Mapping[str, Any] | None  # an AttemptDocument, or one as recorded
    terminal: Mapping[str, Any] | None
    decision: str
    message: str
    replayed: bool = False
    results: list[Any] = field(default_factory=list)
    # decision "revision-requested": the revision request the agent must answer (issue 40)
    review: Review | None = None


def _proposal(project: Project, body: Any, *, kind: str, assess_only: bool = False,
              require_intent: bool = False) -> domain.Proposal:
    code = kind == "code"
    proposal = own = domain.validate_proposal(
        body, max_checks=project.max_checks, max_attempts_cap=project.max_attempts,
        allow_empty_checks=assess_only or code, allow_empty_claims=code,
        require_intent=require_intent,
    )
    domain.refuse_tamper_ids(own)
    if proposal.draft_receipt is not None and project.authoring_mode != "auxiliary-model":
        raise Invalid("draft_receipt is only accepted when the project drafts contracts with an "
                      "auxiliary model", details=[{"path": "draft_receipt",
                                                    "message": "not accepted in this mode"}])
    if code:
        proposal = domain.inject_code_profiles(proposal, required_profile_ids(project),
                                               max_checks=project.max_checks)
    if proposal.protected_changes and project.review_mode != ReviewMode.REQUIRED:
        raise Invalid("protected_changes: protected paths can only be opened by a person's "
                      "review, and this project's review is off",
                      details=[{"path": "protected_changes",
                                "message": "protected paths can only be opened by a person's "
                                           "review"}])
    if proposal.environment_changes and project.review_mode != ReviewMode.REQUIRED:
        raise Invalid("environment_changes: the environment is the operator's, and only a "
                      "person's review can open it; this project's review is off",
                      details=[{"path": "environment_changes",
                                "message": "the environment can only be opened by a person's "
                                           "review"}])
    if proposal.outcome_profile is not None:
        proposal = replace(proposal, outcome=outcome_binding(project, proposal.outcome_profile))
    protected = sorted(set(project.protected_paths) | profile_protected_paths(
        project, _profiles_named(proposal.checks)))
    if (project.review_mode != ReviewMode.REQUIRED
            and project.unattended_evidence == UnattendedEvidence.OPERATOR):
        # rules §17.7: judged on the agent's own claims (what the server injects is the
        # operator's), so each refusal names the claim's index in the body as sent.
        refusals = domain.unattended_refusals(own.claims, own.checks, protected)
        if refusals:
            raise ReviewRequired("; ".join(f"{item['path']}: {item['message']}"
                                           for item in refusals), details=refusals)
    proposal = domain.inject_protected_paths(
        proposal, protected, runner_control=in_force(project.runner_control_exempt),
        max_checks=project.max_checks)
    return domain.inject_tamper_scan(proposal, max_checks=project.max_checks)


def _profiles_named(checks: Sequence[Mapping[str, Any]]) -> set[str]:
    return {str(check["profile"]) for check in checks
            if check["kind"] == "code_verification_succeeded"}


def _since_reference(project: Project, reference: Mapping[str, str] | None,
                     base: Sequence[Sequence[str]] | None,
                     tree: Tree) -> list[WorkspaceChange] | None:
    """Rule 17.2: the changes between the session's reference (`base`, its kept manifest; None
    when there is none) and the hashed `tree`, which the injected protected-paths check
    judges; a reference recorded under other exclusions is read as the tree's leave it."""
    if base is None or reference is None:
        return None
    if reference["exclusions"] != tree.exclusions_digest:
        base = left_in(base, project.tree_exclusions)
    return changes_read(project.pk, base, tree.manifest)


def _baselines(session: Session, state: SessionState, proposal: domain.Proposal,
               tree: Any) -> tuple[dict[str, str], dict[str, str] | None]:
    """§14.5: each check's result on the contract-start state — the tree as it is now, no
    event after the last one — `fails` (it will show the work), `passes` (it holds already) or
    `unknown` (a trusted run's result is known only from the baseline run, §14.7); and the
    reference of the tree they were judged on. A workspace that cannot be hashed leaves every
    check unknown (and no tree)."""
    unknown = {str(check["id"]): "unknown" for check in proposal.checks}
    project = session.project
    try:
        with workspace_hashed(session, tree) as hashed:
            judged = hashed.reference
            # The injected protected-paths check judges the start tree against the reference
            # (rule 17.2): a change made before begin shows already.
            reference = (session.reference or {}).get("tree")
            protects = any(check["id"] == PROTECTED_CHECK_ID for check in proposal.checks)
            base = kept_manifest(project.pk, reference) if protects and reference else None
            # No event after the boundary, by definition: the log checks are judged on an
            # empty log, with no query (20 checks at begin cost what they did before §14.5).
            results = evaluate_checks(
                {"checks": proposal.checks, "startedAtSeq": state.next_seq - 1},
                evidence=LogEvidence(()), workspace=hashed.workspace, tree=judged,
                current_profile_receipts=profile_receipts(project),
                max_file_bytes=project.max_file_bytes, changes=[], scanned=[],
                reference_changes=_since_reference(project, reference, base, hashed.tree))
    except (TreeUnavailable, ServiceError):  # no snapshot yet, or one that cannot be read
        return unknown, None
    kinds = {str(check["id"]): check["kind"] for check in proposal.checks}
    return {result["id"]: ("unknown" if kinds[result["id"]] == "code_verification_succeeded"
                           else "passes" if result["passed"] else "fails")
            for result in results}, judged


def _assessment(session: Session, state: SessionState, proposal: domain.Proposal,
                tree: Any) -> tuple[dict[str, Any], dict[str, str] | None]:
    baselines, judged = _baselines(session, state, proposal, tree)
    return coverage.assess(proposal.objective, proposal.claims, proposal.checks,
                           baselines=baselines,
                           require_discriminating=session.project.require_discriminating_evidence,
                           heldout=heldout_sources(session.project)), judged


def _refuse_imported(session: Session) -> None:
    if session.imported:
        raise Conflict(messages.IMPORTED)


def contract_assess(*, session: Session, body: Any, kind: str = "general") -> dict[str, Any]:
    """The coverage preflight of §5, with each check's baseline on the tree as it is now.
    Writes no event."""
    proposal = _proposal(session.project, body, kind=kind, assess_only=True)
    state = SessionState.objects.defer("trace").get(session=session)
    assessment, _ = _assessment(session, state, proposal, None)
    return {"status": assessment["status"], "assessment": assessment}


# --- §9: a begin in auxiliary-model mode needs the latest draft, matched exactly -------------


def _draft_for_begin(session: Session, state: SessionState,
                     proposal: domain.Proposal) -> dict[str, Any]:
    """The draft this begin is bound to, or a refusal: `draft_receipt` must be the receipt of
    the session's latest draft, must not have opened a contract before, and the proposal's
    kind, objective, claims and checks must equal the draft's canonically."""
    receipt = proposal.draft_receipt
    if receipt is None:
        raise Invalid("this project drafts contracts with an auxiliary model: begin needs the "
                      "draft_receipt of the session's latest draft (POST /sessions/{id}/drafts)",
                      details=[{"path": "draft_receipt", "message": "required in this mode"}])
    used_by = draft_receipt_used(session, receipt)
    if used_by is not None:
        raise Conflict(f"draft {receipt} already opened contract {used_by}; a draft receipt "
                       "opens at most one contract — draft again",
                       details=[{"path": "draft_receipt", "message": "already used"}])
    latest = lifecycle_of(state)["latestDraft"]
    if latest is None or latest["imported"]:
        raise Invalid("this session has no draft made by this server to begin from",
                      details=[{"path": "draft_receipt", "message": "no draft in this session"}])
    if latest["data"].get("receipt") != receipt:
        raise Invalid("draft_receipt is not the receipt of the session's latest draft",
                      details=[{"path": "draft_receipt", "message": "not the latest draft "
                                f"(latest: {latest['data'].get('receipt')})"}])
    draft = latest["data"]
    if draft.get("kind") != proposal.kind:
        route = "/code-contracts" if draft.get("kind") == "code" else "/contracts"
        raise Invalid(f"the draft is a {draft.get('kind')} contract; begin it through {route}",
                      details=[{"path": "", "message": "contract kind differs from the draft"}])
    differences = drafting.plan_differences(draft, proposal.plan())
    if differences:
        raise Invalid("the proposal does not match the draft it names: "
                      + "; ".join(f"{d['path']}: {d['message']}" for d in differences),
                      details=differences)
    return draft


def _auxiliary(project: Project) -> bool:
    return project.authoring_mode == AuthoringMode.AUXILIARY_MODEL


def contract_begin(*, session: Session, token: AgentToken, body: Any, kind: str,
                   tree: Any = None) -> BeginResult:
    """Begin a contract proposed with `token`: active at once, or waiting for review. A snapshot
    session names its latest snapshot (`tree`, §11.3): the contract's start tree."""
    _refuse_imported(session)
    tree_named(session, tree)
    project = session.project
    review_required = project.review_mode == ReviewMode.REQUIRED
    proposal = _proposal(project, body, kind=kind, require_intent=review_required)
    if _auxiliary(project):  # refuse a mismatch before answering with an assessment
        _draft_for_begin(session, SessionState.objects.defer("trace").get(session=session),
                         proposal)
    reviews.review_expire_due(session)  # a proposal whose time has passed waits no more
    with session_locked(session) as state:
        # Judged under the lock, on the one hash of the tree the contract (review off) starts on.
        assessment, judged = _assessment(session, state, proposal, tree)
        if assessment["status"] != "ready":
            return BeginResult(status="review-required", assessment=assessment)
        if lifecycle_of(state)["open"]:
            raise Conflict("a contract is already active in this session; it must reach a "
                           "terminal (certified, exhausted or abstained) before another begins")
        if review_pending(session) is not None:
            raise Conflict("a contract proposal is already waiting for review in this session")
        draft = _draft_for_begin(session, state, proposal) if _auxiliary(project) else None
        started_at_seq = state.next_seq - 1
        if review_required:
            review = reviews.review_open(session=session, proposed_by=token, proposal=proposal,
                                         assessment=assessment, started_at_seq=started_at_seq,
                                         authorship=drafting.contract_authorship(
                                             str(project.authoring_mode), draft))
            return BeginResult(status="review-pending", review=review, assessment=assessment)
        contract = contract_activate(
            session=session, state=state, proposal=proposal, started_at_seq=started_at_seq,
            version=domain.CONTRACT_VERSION_REVIEW_OFF, coverage_receipt=assessment["receipt"],
            baselines=assessment["baselines"], tree=tree, start_tree=judged, begun_by=token,
        )
    runs_request_baseline(session=session, contract=contract)
    return BeginResult(status="active", contract=contract, assessment=assessment)


def _current(state: SessionState) -> tuple[lifecycle.LifecycleState, ContractDocument | None]:
    folded = lifecycle_of(state)
    record = folded["contract"]
    return folded, (record["data"] if record else None)


def _terminal_answer(session: Session, folded: lifecycle.LifecycleState) -> AttemptResult:
    """The terminal again, in the words of what wrote it: an attempt, an abstain, or a
    person's decision on the delivered change (issue 40)."""
    terminal = folded["terminal"]["data"] if folded["terminal"] else None
    assert terminal is not None
    last = folded["attempts"][-1]["data"] if folded["attempts"] else None
    results = last["results"] if last else []
    record = folded["contract"]
    decided = terminal_decision(terminal, contract_deliveries(session, terminal["contractId"]))
    message = messages.terminal_message(terminal, results) if decided is None or record is None \
        else decision_message(terminal, decided, attempts.max_attempts_of(record["data"]))
    return AttemptResult(attempt=last, terminal=terminal, decision=terminal["status"],
                         message=message, replayed=True, results=results)


def _with_outcome(session: Session, result: AttemptResult) -> AttemptResult:
    """A certified delivery that watches an outcome says so: delivery-certified, the outcome
    status, and not to claim the business goal."""
    words = outcome_words(session, result.terminal)
    if words:
        result.message = f"{result.message}\n\n{words}" if result.message else words
    return result


def _no_contract(pending: Review | None, action: str) -> Conflict:
    """Nothing to `action`: none was proposed, or one (`pending`) waits for a person's
    review."""
    if pending is None:
        return Conflict(f"there is no contract in this session to {action}")
    return Conflict(f"a contract is waiting for review ({pending.stage} stage), so none is "
                    f"active yet and there is nothing to {action}: a reviewer decides at "
                    f"{review_url(pending)}",
                    details=[{"path": "review", "message": "pending"}])


def attempt_record(*, session: Session, token: AgentToken, trigger: str,
                   tree: Any = None) -> AttemptResult:
    """Evaluate every check now and record the attempt, made with `token`; end the contract
    when it decides. A snapshot session's checks read the snapshot `tree` names (its latest,
    §11.3)."""
    _refuse_imported(session)
    tree_named(session, tree)
    # A due review's expiry is recorded in its own transaction: it stands when there is no
    # contract to verify (409).
    reviews.review_expire_due(session)
    with session_locked(session) as state:
        result = _attempt(session, state, token=token, trigger=trigger, tree=tree)
    return _with_outcome(session, result)


def _attempt(session: Session, state: SessionState, *, token: AgentToken, trigger: str,
             tree: Any) -> AttemptResult:
    """The attempt, inside `session_locked` on the session state it read (`state`, read once):
    the pending review read once (a due one expired first), the workspace hashed once, every
    check evaluated on it, and the verdict `governor.domain.attempts.decide_attempt` gives
    written — a repair, a terminal, or a delivery review that certifies once approved. On a
    tree a person reviewed and asked to change, no attempt: their request (issue 40)."""
    settled = reviews.reviews_settle(session, state)  # its expiry may end the contract
    pending = settled.pending
    folded, contract = _current(state)
    if contract is None:
        raise _no_contract(pending, "verify")
    if folded["terminal"] is not None:
        return _terminal_answer(session, folded)
    maximum = attempts.max_attempts_of(contract)
    if pending is not None and pending.stage == Stage.DELIVERY:  # a person reviews it now
        last = folded["attempts"][-1]["data"] if folded["attempts"] else None
        return AttemptResult(attempt=last, terminal=None, decision="delivery-pending",
                             message=messages.delivery_pending_message(
                                 review_url(pending),
                                 findings=bool(pending.proposal.get("tamperFindings")),
                                 used=len(folded["attempts"]), maximum=maximum),
                             replayed=True)
    project = session.project
    requests = [request for request in settled.revision_requests
                if request.plan.get("contract_id") == contract["contractId"]]
    evidence = DatabaseEvidence(session, state)
    current_profiles, declared = profiles_judging(project, {
        str(check.get("profile")) for check in contract["checks"]
        if check.get("kind") == "code_verification_succeeded"})
    suites = suite_versions(project)
    environments: dict[str, str | None] = {}
    changes: list[WorkspaceChange] | None = None
    try:
        with workspace_hashed(session, tree, declared) as hashed:
            judged, environments = hashed.reference, hashed.environments
            if attempts.reviewed_already(
                    [(request.proposal.get("tree"), request.plan.get("environments"))
                     for request in requests], judged, environments):
                return _revision_answer(requests[0], used=len(folded["attempts"]),
                                        maximum=maximum)
            # §14.1: the changes since the contract started, and (§17.2) since the session's
            # reference, from their kept manifests, with the runner-control sections their
            # content changed (§17.3).
            reference = (session.reference or {}).get("tree")
            kept = kept_manifests(project.pk, [contract.get("startTree"), reference])
            start, base = (kept.get((ref["id"], ref["exclusions"])) if ref else None
                           for ref in (contract.get("startTree"), reference))
            changes = None if start is None else changes_read(
                project.pk, start, hashed.tree.manifest)
            since_reference = _since_reference(project, reference, base, hashed.tree)
            # §17.5: the tamper scan reads what changed since the reference (code written
            # before begin included), or since the contract start where there is none.
            scanned = (changes if since_reference is None else since_reference) if any(
                check.get("kind") == TAMPER_CHECK_KIND for check in contract["checks"]) else None
            # §17.9: a tree whose own .gitattributes make a checkout differ from its bytes is
            # never certified, so nothing is judged on it.
            converted = hashed.checkout_converted(max_bytes=project.max_file_bytes)
            results = unjudged_results(contract, refusal_text(converted)) if converted else (
                evaluate_checks(
                    contract, evidence=evidence, workspace=hashed.workspace, tree=judged,
                    current_profile_receipts=current_profiles,
                    max_file_bytes=project.max_file_bytes, environments=environments,
                    changes=changes, scanned=scanned,
                    require_discriminating=project.require_discriminating_evidence,
                    reference_changes=since_reference, suite_versions=suites,
                ))
    except TreeUnavailable as exc:  # §10: nothing is judged on part of a workspace
        judged, results = None, unjudged_results(contract, str(exc))
    number = len(folded["attempts"]) + 1
    attempt = attempts.attempt_payload(contract_id=contract["contractId"], attempt=number,
                                       trigger=trigger, results=results, tree=judged,
                                       made_by=token.as_ref())
    governor_event_append(session=session, state=state, type=lifecycle.ATTEMPT, data=attempt)
    decision, reason = attempts.decide_attempt(results, number, maximum,
                                               delivery_review=project.delivery_review)
    if decision == "repair":
        return AttemptResult(attempt=attempt, terminal=None, decision=decision,
                             message=messages.repair_message(
                                 results, number, maximum,
                                 delivery_review=attempts.reviews_deliveries(
                                     project.delivery_review)),
                             results=list(results))
    runs = runs_counted(contract, evidence=evidence, current_profile_receipts=current_profiles,
                        tree=judged, environments=environments, suite_versions=suites)
    evidence_used = TerminalEvidence(
        attempt_receipt=attempt["receipt"], tree=judged,
        profile_receipts=[run.profile_receipt for run in runs],
        run_receipts=[run.receipt for run in runs if run.receipt],
        changes_digest=None if changes is None else changes_digest(changes))
    if decision == "delivery-pending":
        review = reviews.review_open_delivery(
            session=session, state=state, token=token, contract=contract,
            evidence=evidence_used,
            changes=[{"path": change.path, "kind": change.kind} for change in changes]
            if changes is not None else None, environments=environments)
        return AttemptResult(attempt=attempt, terminal=None, decision=decision,
                             message=messages.delivery_pending_message(
                                 review["review_url"], findings=messages.tamper_only(results),
                                 used=number, maximum=maximum),
                             results=list(results))
    terminal = terminal_write(session=session, state=state, contract=contract,
                              status=decision, reason=reason, evidence=evidence_used)
    return AttemptResult(attempt=attempt, terminal=terminal, decision=decision,
                         message=messages.terminal_message(terminal, results),
                         results=list(results))


def _revision_answer(request: Review, *, used: int, maximum: int) -> AttemptResult:
    """No attempt on the tree a person asked to change: their revision request, quoted, with
    what is left of the budget."""
    return AttemptResult(attempt=None, terminal=None, decision="revision-requested",
                         message=request_message(request, used=used, maximum=maximum,
                                                 unchanged=True), review=request)


def turn_stop(*, session: Session, token: AgentToken, tree: Any = None) -> dict[str, Any]:
    """§7: the agent wants to stop. Allow when nothing is active, or while a person reviews
    the delivered change; otherwise attempt (made with `token`) and steer
    (`governor/domain/attempts.py` decides). Issue 40: a person's decision on the delivered
    change that ended the contract, and a revision request while the workspace is still the
    tree they reviewed (no attempt), are each steered once. Counted by the action answered."""
    answer = _turn_stop(session, token, tree)
    metrics.TURN_STOPS.labels(action=str(answer["action"])).inc()
    return answer


def _turn_stop(session: Session, token: AgentToken, tree: Any) -> dict[str, Any]:
    if session.imported:  # history: nothing to attempt, and nothing to read
        allowed = attempts.turn_stop_without_attempt(imported=True, contract_open=False,
                                                     review_pending=False)
        assert allowed is not None
        return allowed
    # The session state and the pending review are each read once, under the lock, and what
    # was read is passed down.
    with session_locked(session) as state:
        folded, contract = _current(state)
        contract_open = contract is not None and folded["terminal"] is None
        pending, untold = untold_and_pending(session) if not contract_open else (None, [])
        allowed = attempts.turn_stop_without_attempt(
            imported=False, contract_open=contract_open, review_pending=pending is not None)
        if allowed is not None:
            terminal = folded["terminal"]["data"] if folded["terminal"] else None
            told = _delivery_decision_news(session, terminal, contract, untold)
            if told is not None:
                return told
            if not allowed["message"]:
                allowed["message"] = outcome_words(session, terminal)
            return allowed
        tree_named(session, tree)
        outcome = _attempt(session, state, token=token, trigger="turn-stop", tree=tree)
        if outcome.review is not None:
            # Issue 40: steered once with the person's request, then allowed with it: stopping
            # on the tree they reviewed can neither spend an attempt nor loop.
            first = reviews.review_agent_told(outcome.review)
            return {"action": "steer" if first else "allow", "message": outcome.message,
                    "attempt": None}
        if outcome.replayed and outcome.terminal is not None:
            # The contract was open when this stop took the lock, so the terminal is the one
            # the expiry of its delivery review, recorded by this very stop, wrote: told now.
            told = _delivery_decision_news(session, outcome.terminal, contract,
                                           contract_deliveries(session,
                                                               outcome.terminal["contractId"]))
            if told is not None:
                return told
    outcome = _with_outcome(session, outcome)
    if outcome.decision == "delivery-pending":  # it may stop, but claim nothing yet
        return {"action": "allow", "message": outcome.message, "attempt": outcome.attempt}
    return attempts.turn_stop_after_attempt(message=outcome.message, attempt=outcome.attempt,
                                            terminal=outcome.terminal,
                                            replayed=outcome.replayed)


def _delivery_decision_news(session: Session, terminal: Mapping[str, Any] | None,
                            contract: Mapping[str, Any] | None,
                            untold: list[Review]) -> dict[str, Any] | None:
    """Issue 40: a person's decision on the delivered change wrote the terminal, and no
    turn-stop has told the agent yet (`untold`: the decided deliveries no stop told of): it is
    steered once with it — certified with the receipt to cite, or exhausted with what the
    person said."""
    if terminal is None or contract is None:
        return None
    decided = terminal_decision(terminal, untold)
    if decided is None or not reviews.review_agent_told(decided):
        return None
    message = decision_message(terminal, decided, attempts.max_attempts_of(contract))
    words = outcome_words(session, terminal)
    return {"action": "steer", "message": f"{message}\n\n{words}" if words else message,
            "terminal": terminal}


def contract_abstain(*, session: Session, reason: Any) -> AttemptResult:
    _refuse_imported(session)
    with session_locked(session) as state:
        folded, contract = _current(state)
        if contract is None:
            raise _no_contract(review_pending(session), "abstain from")
        if folded["terminal"] is not None:
            return _terminal_answer(session, folded)
        text = attempts.abstain_reason(reason)
        terminal = terminal_write(session=session, state=state, contract=contract,
                                  status="abstained", reason=text,
                                  evidence=TerminalEvidence(attempt_receipt=None))
        reviews.review_delivery_close(session, state)
    return AttemptResult(attempt=None, terminal=terminal, decision="abstained",
                         message=messages.terminal_message(terminal))

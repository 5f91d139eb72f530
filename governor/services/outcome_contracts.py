"""Outcome contracts (governor/domain/outcomes.py): the operator's profiles (saved with every
receipt kept by `governor.services.profiles.profile_store`, as verifier profiles are) bound at
begin, a baseline probe when the delivery contract activates, started when it is certified,
observed on schedule (and on request) until a signed outcome terminal.

The clock is a parameter (`now_ms`) everywhere a window is judged, so tests move it rather than
wait. Probes run outside the session's lock: a claim on the schedule row (a compare-and-set of
`next_observe_at_ms`, or of `agent_observed_at_ms` for the agent's one-a-minute limit) makes
sure a due time is observed once, whichever beat or worker gets there first."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings

from governor.domain import attestation, lifecycle
from governor.domain import outcomes as domain
from governor.domain.documents import ContractDocument
from governor.lib.clock import now_ms
from governor.lib.errors import Conflict, RetryLater, Unavailable
from governor.lib.notify import announce_on_commit, session_topic
from governor.lib.probes import probe_run
from governor.lib.queue import task_send_on_commit
from governor.models import Attestation, Session, SessionState
from governor.selectors.outcomes import (
    BOUND,
    DROPPED,
    OBSERVING,
    outcome_document,
    outcome_observations,
)
from governor.services import keys
from governor.services.events import governor_event_append, session_locked
from verification.models import OutcomeContract, OutcomeProfile

log = logging.getLogger(__name__)

Probe = Callable[[dict[str, Any], int], dict[str, Any]]


# --- binding, baseline, start -----------------------------------------------------------------


def outcome_contract_bind(*, session: Session, contract: ContractDocument) -> None:
    """When a delivery contract naming an outcome profile activates (inside its transaction):
    the schedule row, and the baseline probe queued once it commits."""
    binding = contract.get("outcomeProfile")
    if not binding:
        return
    profile = OutcomeProfile.objects.get(project=session.project, profile_id=binding["id"])
    version = profile.versions.get(receipt=binding["receipt"])
    row = OutcomeContract.objects.create(
        id=f"outcome-{contract['contractId'].removeprefix('contract-')}", session=session,
        profile=profile, delivery_contract_id=contract["contractId"], binding=binding,
        definition=version.definition)

    def unqueued(exc: Exception) -> None:
        log.warning("outcome %s: the baseline probe could not be queued (%s); the outcome "
                    "contract will have no baseline", row.pk, exc)

    task_send_on_commit("verification.tasks.outcome_baseline", row.pk, on_failure=unqueued)


def _probe(row: OutcomeContract, now: int) -> dict[str, Any]:
    sandbox = domain.probe_definition(row.definition)
    data_dir = settings.GOVERNOR_OUTCOME_DATA_DIR
    if data_dir:
        sandbox["readOnlyBinds"] = [[data_dir, "/outcome-data"]]
    return probe_run(row.definition, sandbox, now_ms=now)


def outcome_baseline_take(*, contract_id: str, now: int | None = None,
                          probe: Probe | None = None) -> None:
    """The baseline probe, once (claimed by flipping `baseline_taken`), and only before the
    delivery is certified: a measurement after it would be no baseline."""
    if not OutcomeContract.objects.filter(pk=contract_id, baseline_taken=False,
                                          status=BOUND).update(baseline_taken=True):
        return
    row = OutcomeContract.objects.get(pk=contract_id)
    at = now_ms() if now is None else now
    result = probe(row.definition, at) if probe else _probe(row, at)
    row.baseline = {**result, "takenAt": at}
    row.save(update_fields=["baseline"])


def outcome_contract_start(*, session: Session, state: SessionState,
                           delivery: ContractDocument, now: int | None = None) -> None:
    """At certification (inside its lock): the window starts now; `reliability/outcome-contract`
    records the bound profile, the baseline and the window."""
    row = OutcomeContract.objects.filter(session=session,
                                         delivery_contract_id=delivery["contractId"],
                                         status=BOUND).first()
    if row is None:
        return
    at = now_ms() if now is None else now
    baseline = row.baseline if row.baseline and row.baseline.get("passed") else None
    document = domain.outcome_contract_payload(
        outcome_contract_id=row.pk, delivery_contract=dict(delivery), view=row.binding,
        baseline=baseline, started_at=at)
    governor_event_append(session=session, state=state, type=lifecycle.OUTCOME_CONTRACT,
                          data=document)
    row.status, row.started_at_ms = OBSERVING, at
    row.deadline_at_ms = document["deadlineAt"]
    row.next_observe_at_ms = at  # the first scheduled observation right away, then every …
    row.save(update_fields=["status", "started_at_ms", "deadline_at_ms", "next_observe_at_ms"])


def outcome_contract_drop(*, session: Session, delivery_contract_id: str) -> None:
    """A delivery contract that ended without certification has no outcome to watch."""
    OutcomeContract.objects.filter(session=session, delivery_contract_id=delivery_contract_id,
                                   status=BOUND).update(status=DROPPED)


# --- observation ------------------------------------------------------------------------------


def _current_row(session: Session) -> OutcomeContract:
    row = (OutcomeContract.objects.filter(session=session).exclude(status=DROPPED)
           .order_by("-created_at").first())
    if row is None:
        raise Conflict("this session has no outcome contract (begin with outcome_profile)")
    if row.status == BOUND:
        raise Conflict("the outcome is not observed yet: observation starts once delivery is "
                       "certified")
    return row


OBSERVE_TASK = "verification.tasks.outcome_observe"


def outcome_observe(*, session: Session, trigger: str, now: int | None = None) -> int:
    """Ask for an observation now, for the agent (at most once a minute: 429 with the seconds
    to wait) or a reviewer; the time asked, returned, stays in `requested_at_ms` until a
    worker has recorded it. The probe runs in a worker, as every sandboxed command does
    (queued once this commits). A profile edited after it was bound runs nothing: the
    observation is recorded as unbound here and refused (409)."""
    row = _current_row(session)
    at = now_ms() if now is None else now
    if row.status != OBSERVING:
        raise Conflict(f"the outcome is already {row.status}: nothing more is observed")
    last = row.agent_observed_at_ms
    if trigger == "agent":  # claimed first: an unbound observation counts against it too
        wait_ms = last + domain.AGENT_OBSERVE_INTERVAL_MS - at
        claimed = wait_ms <= 0 and OutcomeContract.objects.filter(
            pk=row.pk, agent_observed_at_ms=last).update(agent_observed_at_ms=at)
        if not claimed:
            seconds = max(1, -(-max(wait_ms, 1) // 1000))
            raise RetryLater(f"the agent may ask for one outcome observation a minute; try "
                             f"again in {seconds} s", retry_after=seconds)
    if _profile_receipt(row) != row.binding["receipt"]:
        _observe(session, row, trigger, at, probe=None)  # records it unbound, then refuses
    OutcomeContract.objects.filter(pk=row.pk).update(requested_at_ms=at)

    def unqueued(exc: Exception) -> None:
        OutcomeContract.objects.filter(pk=row.pk, requested_at_ms=at).update(
            requested_at_ms=None)
        if trigger == "agent":  # the minute given back
            OutcomeContract.objects.filter(pk=row.pk, agent_observed_at_ms=at).update(
                agent_observed_at_ms=last)
        raise Unavailable("the task broker is unavailable, so the observation cannot be "
                          "queued; nothing was recorded — try again later") from exc

    task_send_on_commit(OBSERVE_TASK, row.pk, trigger, str(at), on_failure=unqueued)
    return at


def outcome_observation_take(*, contract_id: str, trigger: str, requested_at: int,
                             now: int | None = None, probe: Probe | None = None) -> None:
    """The worker's part of `outcome_observe` (asked at `requested_at`): the probe and the
    observation, observed now; a profile edited since is recorded unbound (logged, as the
    schedule's are)."""
    row = OutcomeContract.objects.select_related("session").get(pk=contract_id)
    try:
        if row.status == OBSERVING:
            _observe(row.session, row, trigger, now_ms() if now is None else now, probe,
                     requested_at=requested_at)
    except Conflict as exc:
        log.warning("outcome %s: %s", row.pk, exc)
    finally:  # nothing recorded (already over, or the probe raised): no longer on its way
        OutcomeContract.objects.filter(pk=row.pk, requested_at_ms=requested_at).update(
            requested_at_ms=None)
        announce_on_commit(session_topic(row.session_id))


def outcomes_observe_due(*, now: int | None = None, probe: Probe | None = None,
                         limit: int = 100) -> int:
    """The periodic task: every outcome contract whose observation is due, claimed by moving
    its next due time on with a compare-and-set (a second scheduler or worker that read the
    same due time updates nothing and skips it); the number observed."""
    at = now_ms() if now is None else now
    count = 0
    due = list(OutcomeContract.objects.filter(status=OBSERVING, next_observe_at_ms__lte=at)
               .values_list("pk", "next_observe_at_ms")[:limit])
    for pk, due_at in due:
        assert due_at is not None
        row = OutcomeContract.objects.get(pk=pk)
        every = row.binding["windows"]["observeEveryMs"]
        assert row.deadline_at_ms is not None
        following = None if due_at >= row.deadline_at_ms else min(
            max(due_at + every, at + 1), row.deadline_at_ms)
        if not OutcomeContract.objects.filter(pk=pk, status=OBSERVING,
                                              next_observe_at_ms=due_at).update(
                next_observe_at_ms=following):
            continue
        try:
            _observe(row.session, row, "schedule", at, probe)
        except Conflict as exc:  # recorded as unbound; the others are still due
            log.warning("outcome %s: %s", pk, exc)
        count += 1
    return count


def _profile_receipt(row: OutcomeContract) -> str | None:
    """The bound profile's receipt as it is now (it differs from the binding's once edited)."""
    receipt: str | None = OutcomeProfile.objects.filter(pk=row.profile_id).values_list(
        "receipt", flat=True).first()
    return receipt


def _observe(session: Session, row: OutcomeContract, trigger: str, at: int,
             probe: Probe | None, *, requested_at: int | None = None) -> None:
    """Probe (when the profile is still the bound one) and record the observation and what it
    decides; the request it answers (`requested_at`) is no longer pending in the same commit."""
    current = _profile_receipt(row)
    bound = current == row.binding["receipt"]
    assert row.deadline_at_ms is not None
    result = None
    if bound:
        result = probe(row.definition, at) if probe else _probe(row, at)
    with session_locked(session) as state:
        fresh = OutcomeContract.objects.select_for_update().get(pk=row.pk)
        if fresh.status != OBSERVING:
            return
        contract = outcome_document(session, fresh)
        earlier = outcome_observations(session, row.pk)
        evaluation = domain.judge(contract, result, at, earlier)
        document = domain.observation_payload(
            contract=contract, number=len(earlier) + 1, trigger=trigger, observed_at=at,
            profile_receipt=current or "", result=result, evaluation=evaluation)
        governor_event_append(session=session, state=state,
                              type=lifecycle.OUTCOME_OBSERVATION, data=document)
        if requested_at is not None:
            OutcomeContract.objects.filter(pk=row.pk, requested_at_ms=requested_at).update(
                requested_at_ms=None)
        if trigger != "schedule":  # the period counts from the last observation, whoever asked
            later = min(at + fresh.binding["windows"]["observeEveryMs"], row.deadline_at_ms)
            OutcomeContract.objects.filter(pk=row.pk, next_observe_at_ms__lt=later).update(
                next_observe_at_ms=later)
        if evaluation["status"] in domain.TERMINAL_STATUSES:
            _terminal(session, state, fresh, contract, evaluation["status"], evaluation,
                      document["receipt"])
    if not bound:
        raise Conflict("refused: the outcome profile was edited after it was bound (its "
                       f"receipt is {current}, the contract bound {row.binding['receipt']}); "
                       "the observation is recorded as unbound and judges nothing")


def _terminal(session: Session, state: SessionState, row: OutcomeContract,
              contract: dict[str, Any], status: str, evaluation: dict[str, Any] | None,
              observation_receipt: str | None) -> None:
    terminal = domain.outcome_terminal_payload(
        contract=contract, status=status,
        reason=domain.terminal_reason(status, evaluation, contract),
        observation_receipt=observation_receipt)
    event = governor_event_append(session=session, state=state, type=lifecycle.OUTCOME_TERMINAL,
                                  data=terminal)
    statement = attestation.build_outcome_statement(
        session_id=str(session.pk), chain_head=event.hash, event_seq=event.seq,
        terminal=terminal, delivery_contract_receipt=contract["deliveryContractReceipt"],
        profile_receipt=contract["profileReceipt"])
    keyid, envelope = keys.statement_sign(statement)
    Attestation.objects.create(event=event, keyid=keyid, envelope=envelope)
    row.status, row.next_observe_at_ms = status, None
    row.save(update_fields=["status", "next_observe_at_ms"])
    announce_on_commit(session_topic(session.pk))
    task_send_on_commit("reviews.tasks.notify_outcome", str(session.pk), row.pk,
                        on_failure=lambda exc: log.warning(
                            "outcome %s: notification not queued (%s)", row.pk, exc))

"""Thin tasks: load by id, claim with a compare-and-set, call a service."""

from __future__ import annotations

import logging

import structlog
from celery import shared_task

from governor.services import outcome_contracts, runs

log = logging.getLogger(__name__)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def run_verification(run_id: str) -> None:
    run = runs.run_claim(run_id)
    if run is not None:
        structlog.contextvars.bind_contextvars(run_id=run_id, session_id=str(run.session_id),
                                               project=run.profile.project.slug)
        runs.run_perform(run)


@shared_task
def expire_lost_runs() -> int:
    """Periodic: logs only when it ended a run (docs/operations.md, "Logs")."""
    ended = runs.runs_expire_lost()
    if ended:
        log.info("ended %d lost verification runs as infrastructure failures", ended)
    return ended


@shared_task(acks_late=True)
def outcome_baseline(outcome_contract_id: str) -> None:
    outcome_contracts.outcome_baseline_take(contract_id=outcome_contract_id)


@shared_task
def observe_due_outcomes() -> int:
    """Beat sends this every GOVERNOR_OUTCOME_TICK_SECONDS; two beats or two workers at once
    observe each due time once (the claim is a compare-and-set in the database)."""
    return outcome_contracts.outcomes_observe_due()


@shared_task(acks_late=True)
def outcome_observe(outcome_contract_id: str, trigger: str, requested_at: str) -> None:
    """An observation the agent or a reviewer asked for (the probe runs here, not on the web
    node)."""
    outcome_contracts.outcome_observation_take(contract_id=outcome_contract_id, trigger=trigger,
                                               requested_at=int(requested_at))

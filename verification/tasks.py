"""Thin tasks: load by id, claim with a compare-and-set, call a service."""

from __future__ import annotations

import logging

from celery import shared_task

from governor.services import runs

log = logging.getLogger(__name__)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def run_verification(run_id: str) -> None:
    run = runs.run_claim(run_id)
    if run is not None:
        runs.run_perform(run)


@shared_task
def expire_lost_runs() -> int:
    """Periodic: logs only when it ended a run (docs/operations.md, "Logs")."""
    ended = runs.runs_expire_lost()
    if ended:
        log.info("ended %d lost verification runs as infrastructure failures", ended)
    return ended

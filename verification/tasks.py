"""Thin tasks: load by id, claim with a compare-and-set, call a service."""

from __future__ import annotations

from celery import shared_task

from governor.services import runs


@shared_task(acks_late=True, reject_on_worker_lost=True)
def run_verification(run_id: str) -> None:
    run = runs.run_claim(run_id)
    if run is not None:
        runs.run_perform(run)


@shared_task
def expire_lost_runs() -> int:
    return runs.runs_expire_lost()

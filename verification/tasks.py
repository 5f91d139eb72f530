"""Thin tasks: load by id, claim with a compare-and-set, call a service."""

from __future__ import annotations

from celery import shared_task

from verification.services import run_claim, run_perform, runs_expire_lost


@shared_task(acks_late=True, reject_on_worker_lost=True)
def run_verification(run_id: str) -> None:
    run = run_claim(run_id)
    if run is not None:
        run_perform(run)


@shared_task
def expire_lost_runs() -> int:
    return runs_expire_lost()

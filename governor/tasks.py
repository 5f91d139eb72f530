"""Thin periodic tasks of the governor app."""

from __future__ import annotations

from celery import shared_task

from governor.services.blobs import blobs_collect


@shared_task
def collect_blobs() -> dict[str, int]:
    """SEMANTICS §11.4: blobs no kept tree references, untouched for the grace period."""
    return blobs_collect()

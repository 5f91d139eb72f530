"""Thin periodic tasks of the governor app."""

from __future__ import annotations

import logging

from celery import shared_task

from governor.services.blobs import blobs_collect
from governor.services.sessions import sessions_purge_abandoned_imports
from governor.services.snapshots import snapshots_collect

log = logging.getLogger(__name__)


@shared_task
def collect_blobs() -> dict[str, int]:
    """rules §11.4: snapshots superseded for the grace period that nothing names, then the
    blobs no kept tree references, untouched for the grace period."""
    collected = {**snapshots_collect(), **blobs_collect()}
    if any(count for name, count in collected.items() if name != "kept"):
        log.info("collected superseded snapshots and unreferenced blobs: %s", collected)
    return collected


@shared_task
def purge_abandoned_imports() -> int:
    """Imports whose process died mid-way (hidden sessions, `Session.importing`), deleted."""
    purged = sessions_purge_abandoned_imports()
    if purged:
        log.info("deleted %d abandoned imports", purged)
    return purged

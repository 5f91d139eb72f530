"""Thin periodic tasks of the governor app."""

from __future__ import annotations

from celery import shared_task

from governor.services.blobs import blobs_collect
from governor.services.sessions import sessions_purge_abandoned_imports
from governor.services.snapshots import snapshots_collect


@shared_task
def collect_blobs() -> dict[str, int]:
    """SEMANTICS §11.4: snapshots superseded for the grace period that nothing names, then the
    blobs no kept tree references, untouched for the grace period."""
    superseded = snapshots_collect()
    return {**superseded, **blobs_collect()}


@shared_task
def purge_abandoned_imports() -> int:
    """Imports whose process died mid-way (hidden sessions, `Session.importing`), deleted."""
    return sessions_purge_abandoned_imports()

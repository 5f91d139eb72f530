"""Queueing Celery tasks from the write paths, by name (ARCHITECTURE §7): a service never
imports a task's module — the tasks call the services — and a task is sent only once the
transaction that wrote its row has committed, so a worker never looks for a row that is not
there yet. The Celery app (governor/celery.py) is loaded when Django is ready."""

from __future__ import annotations

from collections.abc import Callable

from celery import current_app
from django.db.transaction import on_commit


def task_send(name: str, *args: str) -> None:
    """Send the task registered as `name` now; raises whatever the broker's transport raises."""
    current_app.tasks[name].apply_async(args=args, retry=False)


def task_send_on_commit(name: str, *args: str,
                        on_failure: Callable[[Exception], None]) -> None:
    """Send the task once the current transaction commits (at once outside one). A transport
    that fails calls `on_failure` with the error; what it raises reaches the caller of the
    outermost `atomic` (or this function's caller outside one)."""

    def send() -> None:
        try:
            task_send(name, *args)
        except Exception as exc:  # noqa: BLE001 - whatever the transport raises
            on_failure(exc)

    on_commit(send)

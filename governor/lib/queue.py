"""Queueing Celery tasks from the write paths, by name (docs/architecture.md): a service never
imports a task's module — the tasks call the services — and a task is sent only once the
transaction that wrote its row has committed, so a worker never looks for a row that is not
there yet. The Celery app (governor/celery.py) is loaded when Django is ready."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from celery import current_app
from django.conf import settings
from django.db.transaction import on_commit

from governor.lib.notify import redis_client, redis_url


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


def after_commit(call: Callable[[], object]) -> None:
    """`call()` once the current transaction commits (at once outside one)."""
    on_commit(call)


def queue_depth() -> int:
    """Task messages waiting in the default queue: the Redis list Celery pushes them onto, or
    the filesystem broker's files. Raises whatever the broker's client raises."""
    url = str(settings.BROKER_URL)
    queue = str(current_app.conf.task_default_queue)
    if url.startswith(("redis://", "rediss://")):
        return int(redis_client(url).llen(queue))
    if url.startswith("filesystem://"):
        folder = Path(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"])  # type: ignore[arg-type]
        return sum(1 for message in folder.iterdir() if message.name.endswith(f".{queue}.msg"))
    return 0


def broker_ping() -> None:
    """Raises when the broker does not answer: Redis on this process's kept connection (not a
    new one per check), any other transport through Celery's own connection."""
    if (url := redis_url()) is not None:
        redis_client(url).ping()
        return
    with current_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=1)

"""The Celery app. Settings come from Django settings (CELERY_* names)."""

import os
from typing import Any

import structlog
from celery import Celery
from celery.signals import setup_logging, task_postrun, task_prerun
from django.conf import settings

from governor.logs import configure
from governor.startup import prepare

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governor.settings")
prepare()  # a worker started on its own (`celery -A governor.celery worker`) chooses here

app = Celery("governor")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.update(
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_ignore_result=True,
    broker_connection_retry_on_startup=True,
    broker_connection_timeout=2,
)
app.autodiscover_tasks(["governor", "verification", "reviews"])


@setup_logging.connect
def _logging_as_configured(**_: Any) -> None:
    """The worker logs as the web processes do (governor.logs), not with Celery's own set-up."""
    configure(settings.LOGGING)


_outer_context: dict[str, dict[str, Any]] = {}  # by task id: the lines' context before it


@task_prerun.connect
def _log_context(task_id: str, task: Any, **_: Any) -> None:
    """Every line a task logs names the task and its id (a task adds what it works on, as
    `run_verification` adds the run, session and project), and nothing of what ran before it;
    afterwards the context is as it was (a task run inline keeps its caller's request id)."""
    _outer_context[task_id] = structlog.contextvars.get_contextvars()
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(task=task.name, task_id=task_id)


@task_postrun.connect
def _log_context_restored(task_id: str, **_: Any) -> None:
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(**_outer_context.pop(task_id, {}))

"""The Celery app. Settings come from Django settings (CELERY_* names)."""

import os
from typing import Any

from celery import Celery
from celery.signals import setup_logging
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

"""The Celery app. Settings come from Django settings (CELERY_* names)."""

import os

from celery import Celery

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

import logging
from typing import Any

from celery.signals import worker_ready
from django.apps import AppConfig

from verification.sandbox import worker_shortfalls

log = logging.getLogger("verification")


def say_shortfalls(**_: Any) -> None:
    """At a worker's start, what its runs will lack (a non-root worker, no cgroups)."""
    for shortfall in worker_shortfalls():
        log.warning("%s (docs/deployment.md, 'Root or not')", shortfall)


class VerificationConfig(AppConfig):
    name = "verification"

    def ready(self) -> None:
        worker_ready.connect(say_shortfalls, weak=False, dispatch_uid="verification-shortfalls")

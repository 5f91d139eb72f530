from importlib import import_module

from django.apps import AppConfig

TASK_MODULES = ("governor.tasks", "reviews.tasks", "verification.tasks")


class GovernorConfig(AppConfig):
    name = "governor"
    verbose_name = "Reliability Governor"

    def ready(self) -> None:
        # Load the Celery app with Django so tasks queued from views use its configuration, and
        # register every app's tasks (the services queue them by name: governor/lib/queue.py);
        # then the start-up checks.
        from governor import celery, system_checks  # noqa: F401

        for module in TASK_MODULES:
            import_module(module)

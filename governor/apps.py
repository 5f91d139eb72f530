from django.apps import AppConfig


class GovernorConfig(AppConfig):
    name = "governor"
    verbose_name = "Reliability Governor"

    def ready(self) -> None:
        # Load the Celery app with Django so tasks queued from views use its configuration, and
        # register the start-up checks.
        from governor import celery, system_checks  # noqa: F401

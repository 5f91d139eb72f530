"""Logging (docs/operations.md, "Logs"): every record — the governor's, Django's, Celery's,
gunicorn's workers' — one line on standard error, a JSON object (GOVERNOR_LOG_FORMAT=json) or
`key=value` text, with the request's context (request id, session, project, token prefix) bound
by `governor.middleware.RequestObserved` and the API's authentication.

What a log line never holds: a secret (an agent token, the metrics token, the secret key, a
password), the agent's content or a reviewer's feedback. The code logs none of them, and
`redact` replaces any that reaches a line all the same, by its shape (`gov_…`, `Bearer …`) or
its value. Periodic tasks log only when they did something (`PeriodicQuiet`)."""

from __future__ import annotations

import logging
import logging.config
import re
from collections.abc import Mapping, MutableMapping
from typing import Any

import structlog
from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.dispatch import receiver
from django.http import HttpRequest

log = structlog.get_logger("governor.audit")

# An agent token's shape (governor.services.tokens.TOKEN_PREFIX and what follows): read before
# the models are, as Django configures logging first.
TOKEN_SHAPE = re.compile(r"gov_[A-Za-z0-9_-]{9,}")  # longer than the prefix kept
BEARER_SHAPE = re.compile(r"(?i)\b(bearer)\s+[^\s\"',;]+")
SECRET_KEYS = ("password", "secret", "authorization", "cookie", "csrf")
SHOWN_PREFIX = 12  # what AgentToken.prefix keeps of a token: never enough to use it
CELERY_NOISE = ("celery.worker.strategy", "celery.app.trace")


def _secret_values() -> list[str]:
    values = [str(getattr(settings, name, "") or "") for name in ("SECRET_KEY",
                                                                    "GOVERNOR_METRICS_TOKEN")]
    return [value for value in values if len(value) >= 8]


def _scrub(text: str, secrets: list[str]) -> str:
    for value in secrets:
        text = text.replace(value, "[redacted]")
    text = TOKEN_SHAPE.sub(lambda found: found.group(0)[:SHOWN_PREFIX] + "…", text)
    return BEARER_SHAPE.sub(lambda found: f"{found.group(1)} [redacted]", text)


def redact(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: no secret leaves in a log line."""
    secrets = _secret_values()
    for key, value in list(event.items()):
        if any(word in key.lower() for word in SECRET_KEYS):
            event[key] = "[redacted]"
        elif isinstance(value, str):
            event[key] = _scrub(value, secrets)
        elif value is not None and not isinstance(value, int | float | bool):
            event[key] = _scrub(str(value), secrets)
    return event


class PeriodicQuiet(logging.Filter):
    """Celery's INFO lines about the periodic tasks (sent, received, succeeded) are dropped:
    every few seconds they would say nothing happened. The tasks log what they did."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.INFO:
            return True
        if record.name == "celery.beat":
            return False
        if record.name in CELERY_NOISE and isinstance(record.args, Mapping):
            periodic = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
            return record.args.get("name") not in periodic
        return True


SHARED: list[Any] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True, key="time"),
]


def configure(options: Mapping[str, Any]) -> None:
    """settings.LOGGING_CONFIG: called by Django at set-up with settings.LOGGING (its level and
    format), and by the Celery worker instead of Celery's own logging set-up."""
    json = options["format"] == "json"
    renderer: Any = (structlog.processors.JSONRenderer() if json
                     else structlog.dev.ConsoleRenderer(colors=False, pad_event_to=0,
                                                        timestamp_key="time"))
    logging.config.dictConfig({
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"periodic_quiet": {"()": PeriodicQuiet}},
        "formatters": {"governor": {
            "()": structlog.stdlib.ProcessorFormatter,
            "foreign_pre_chain": SHARED,
            "processors": [structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                           structlog.processors.dict_tracebacks if json
                           else structlog.processors.format_exc_info, redact, renderer],
        }},
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "governor",
                                 "filters": ["periodic_quiet"]}},
        "root": {"handlers": ["console"], "level": options["level"]},
        "loggers": {
            # Django's own handlers (console in DEBUG, mail to admins) give way to the one above.
            "django": {"handlers": [], "propagate": True, "level": options["level"]},
            "django.server": {"handlers": [], "propagate": True},
            "django.db.backends": {"level": "INFO"},
        },
    })
    structlog.configure(
        processors=[*SHARED, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )


def client_address(request: HttpRequest | None) -> str:
    if request is None:
        return ""
    return str(request.META.get("REMOTE_ADDR", ""))


@receiver(user_login_failed)
def login_failed(sender: Any, credentials: Mapping[str, Any], request: HttpRequest | None = None,
                 **_: Any) -> None:
    """The audit trail of failed logins: who was tried, from where (masked with
    GOVERNOR_LOG_MASK_LOGINS=1). Never the password."""
    username, address = str(credentials.get("username", "")), client_address(request)
    if settings.GOVERNOR_LOG_MASK_LOGINS:
        username, address = "[masked]", "[masked]"
    log.warning("login failed", username=username, address=address,
                path=request.path if request is not None else "")

"""Plain Django views of the core app."""

from __future__ import annotations

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from governor.celery import app as celery_app
from governor.lib.notify import redis_client, redis_url


def _database_status() -> dict[str, str]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return {"status": "ok", "vendor": connection.vendor}
    except Exception as exc:  # noqa: BLE001 - any failure is reported, not raised
        return {"status": "error", "vendor": connection.vendor, "error": str(exc)}


def _broker_status() -> dict[str, str]:
    transport = settings.BROKER_URL.split("://", 1)[0]
    try:
        if (url := redis_url()) is not None:
            redis_client(url).ping()  # on a kept connection, not a new one per health check
        else:
            with celery_app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=1, timeout=1)
        return {"status": "ok", "transport": transport}
    except Exception as exc:  # noqa: BLE001
        return {"status": "error", "transport": transport, "error": str(exc)}


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    database, broker = _database_status(), _broker_status()
    # The broker only carries verification runs; without it the log and turn-stop still work,
    # so only a database failure makes the service unhealthy.
    healthy = database["status"] == "ok"
    status = "ok" if healthy and broker["status"] == "ok" else "degraded" if healthy else "down"
    return JsonResponse(
        {"status": status, "database": database, "broker": broker, "broker_choice":
         settings.BROKER_REASON},
        status=200 if healthy else 503,
    )

"""Plain Django views of the core app: health, readiness and metrics for operators."""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable

from django.conf import settings
from django.db import connection
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

from governor.lib import metrics
from governor.lib.blobstore import store_probe
from governor.lib.queue import broker_ping
from governor.selectors.operations import StateCollector, database_check, signing_keys_check

log = logging.getLogger(__name__)


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
        broker_ping()
        return {"status": "ok", "transport": transport}
    except Exception as exc:  # noqa: BLE001
        return {"status": "error", "transport": transport, "error": str(exc)}


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Cheap: the process answers, with its database and broker. A load balancer's probe."""
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


def _failed(name: str, probe: Callable[[], object]) -> bool:
    """Did the probe of part `name` fail? What failed, and why, goes to the log only: the
    answer is public, and an exception's text can hold a path, a host name or an address."""
    try:
        probe()
    except Exception:  # noqa: BLE001 - every failure is named, never raised
        log.warning("readiness: %s failed", name, exc_info=True)
        return True
    return False


@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """Whether this process can do all of its work: the database, the broker, the blob store
    (an object written, read back and deleted) and the signing keys. 503 naming only the parts
    that failed otherwise; the reasons are logged."""
    probes: dict[str, Callable[[], object]] = {
        "database": database_check, "broker": broker_ping, "blob_store": store_probe,
        "signing_keys": signing_keys_check}
    failed = [name for name, probe in probes.items() if _failed(name, probe)]
    return JsonResponse({"status": "failed" if failed else "ready", "failed": failed},
                        status=503 if failed else 200)


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus's text format for the bearer of GOVERNOR_METRICS_TOKEN only: without the
    setting, or without that token, the route does not exist (404), so the public learns
    nothing, not even that metrics are kept."""
    expected = settings.GOVERNOR_METRICS_TOKEN
    given = request.headers.get("Authorization", "")
    if not expected or not hmac.compare_digest(given.encode(), f"Bearer {expected}".encode()):
        raise Http404("not found")
    return HttpResponse(metrics.exposition([StateCollector()]),
                        content_type=metrics.CONTENT_TYPE)

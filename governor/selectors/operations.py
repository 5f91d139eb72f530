"""What operators read about the service itself: the gauges `/metrics` reads at scrape time
and the database's and signing keys' part of `/readyz`. Each gauge is one aggregate query
whatever the row count."""

from __future__ import annotations

from collections.abc import Iterator

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.db import connection
from django.db.models import Count, Q, Sum
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from governor.domain import attestation
from governor.lib.queue import queue_depth
from governor.lib.waits import ABANDONED_AFTER, FINISHING
from governor.models import Blob, SigningKey, WaitSlot
from verification.models import RunState, VerificationRun


class StateCollector(Collector):
    """Gauges of the shared state, the same from every process and host."""

    def collect(self) -> Iterator[Metric]:
        now = timezone.now()
        waits = GaugeMetricFamily("governor_waits_held", "Long polls holding a wait slot now, "
                                  "by who waits.", labels=["waiter"])
        live = WaitSlot.objects.filter(until__gte=now - FINISHING - ABANDONED_AFTER)
        held = live.aggregate(tokens=Count("pk", filter=Q(token__isnull=False)),
                              people=Count("pk", filter=Q(token__isnull=True)))
        waits.add_metric(["token"], held["tokens"] or 0)
        waits.add_metric(["person"], held["people"] or 0)
        yield waits
        runs = GaugeMetricFamily("governor_verification_runs_in_progress",
                                 "Verification runs not finished, by state.", labels=["state"])
        counts = dict(VerificationRun.objects.exclude(state=RunState.FINISHED)
                      .values_list("state").annotate(n=Count("pk")).values_list("state", "n"))
        for state in (RunState.QUEUED, RunState.RUNNING):
            runs.add_metric([str(state)], counts.get(state, 0))
        yield runs
        depth = GaugeMetricFamily("governor_queue_depth", "Task messages waiting in the "
                                  "broker's queue (-1: the broker did not answer).")
        try:
            depth.add_metric([], queue_depth())
        except Exception:  # noqa: BLE001 - a broker outage is a value, /readyz says why
            depth.add_metric([], -1)
        yield depth
        stored = GaugeMetricFamily("governor_blob_store_bytes", "Bytes of the blobs the store "
                                   "keeps, by project.", labels=["project"])
        blobs = GaugeMetricFamily("governor_blob_store_blobs", "Blobs the store keeps, by "
                                  "project.", labels=["project"])
        for project, size, count in (Blob.objects.values("project__slug")
                                     .annotate(size=Sum("size"), count=Count("pk"))
                                     .values_list("project__slug", "size", "count")):
            stored.add_metric([project], size or 0)
            blobs.add_metric([project], count)
        yield stored
        yield blobs


def database_check() -> str:
    """The database answers a query; its vendor."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return connection.vendor


def signing_keys_check() -> str:
    """Exactly one active key, whose private half signs what its public half verifies; its
    key id. Raises ValueError naming what is wrong."""
    active = list(SigningKey.objects.filter(active=True)[:2])
    if len(active) > 1:
        raise ValueError("more than one signing key is active")
    if not active:
        return "none yet (the first signature creates one)"
    key = active[0]
    probe = b"readiness probe"
    try:
        public = attestation.decode_public_key(key.public_key)
        if attestation.key_id(public) != key.keyid:
            raise ValueError("its public key is not the one its key id names")
        signature = Ed25519PrivateKey.from_private_bytes(bytes(key.private_key)).sign(probe)
        public.verify(signature, probe)
    except (ValueError, InvalidSignature) as exc:
        raise ValueError(f"the active key {key.keyid} does not sign: "
                         f"{type(exc).__name__}: {exc}") from None
    return key.keyid

"""The Prometheus metrics (docs/operations.md, "Metrics"): each counted once, by the write path
that records the event, once its transaction commits (a rolled-back write counts nothing).

`governor_serve` gives the web processes and its Celery worker one PROMETHEUS_MULTIPROC_DIR
(its own var/metrics, emptied when it starts, unless the environment names one that separately
started workers share), so `/metrics` on any web process adds up every process of the host
(prometheus-client's multiprocess mode). Without it a process counts
for itself alone. What is read at scrape time (queue depth, waits held, the blob store's bytes)
comes from the database and the broker, for every process and host alike."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from django.db import transaction
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = CONTENT_TYPE_LATEST
SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
RUN_SECONDS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 900)
DECISION_SECONDS = (10, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400,
                    7 * 86400)

REQUESTS = Counter("governor_http_requests", "HTTP requests answered, by route pattern "
                   "(never the path itself), method and status.", ["route", "method", "status"])
REQUEST_SECONDS = Histogram("governor_http_request_duration_seconds",
                            "Time to answer an HTTP request (a long poll's wait included).",
                            ["route", "method"], buckets=SECONDS)
TURN_STOPS = Counter("governor_turn_stops", "Turn-stops answered, by the action returned "
                     "(allow or steer).", ["action"])
TERMINALS = Counter("governor_terminals", "Contracts ended, by terminal status and project.",
                    ["status", "project"])
ATTEMPTS_PER_CERTIFICATION = Histogram(
    "governor_attempts_per_certification", "Attempts a certified contract took (1: certified "
    "at the first attempt).", ["project"], buckets=(1, 2, 3, 4, 5, 6, 7, 8, 9, 10))
REVIEW_DECISIONS = Counter("governor_review_decisions", "Review decisions recorded, by stage and "
                           "decision (expired and cancelled included).",
                           ["stage", "decision", "project"])
REVIEW_DECISION_SECONDS = Histogram("governor_review_decision_seconds",
                                    "From a proposal's opening to its decision.",
                                    ["stage", "decision"], buckets=DECISION_SECONDS)
WAITS = Counter("governor_waits", "Long polls that held a wait slot, by who waited (an agent "
                "token or a signed-in person).", ["waiter"])
RUNS = Counter("governor_verification_runs", "Verification runs finished, by profile, outcome "
               "(passed or the failure kind) and project.", ["profile", "outcome", "project"])
CHANGES = Counter("governor_gated_changes", "Changes gated at the pull request (rules §19), by "
                  "verdict (certified, not-certified), the rule a finding names (empty when "
                  "certified; a change with findings under two rules counts under both) and "
                  "mode (enforce, observe).", ["project", "verdict", "rule", "mode"])
RUN_DURATION = Histogram("governor_verification_run_duration_seconds",
                         "A finished run's sandbox time.", ["profile", "outcome"],
                         buckets=RUN_SECONDS)


def count_on_commit(record: Callable[[], None]) -> None:
    """Count once the current transaction commits (at once outside one)."""
    transaction.on_commit(record)


def multiprocess_directory() -> Path | None:
    raw = os.environ.get(MULTIPROC_ENV, "")
    return Path(raw) if raw else None


def prepare_multiprocess_directory(directory: Path) -> None:
    """Create `directory` (0700), without the files of processes that ran before: called by
    the one process that starts every other process writing into it, before it starts them."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    directory.chmod(0o700)
    for stale in directory.glob("*.db"):
        stale.unlink()


def exposition(extra: Iterable[Collector] = ()) -> bytes:
    """The text every process of the host counted (or this process alone, without the
    multiprocess directory), and what `extra` collects now."""
    counted = REGISTRY
    if (directory := multiprocess_directory()) is not None:
        counted = CollectorRegistry()
        MultiProcessCollector(counted, path=str(directory))  # type: ignore[no-untyped-call]
    now = CollectorRegistry()
    for collector in extra:
        now.register(collector)
    return bytes(generate_latest(counted)) + bytes(generate_latest(now))

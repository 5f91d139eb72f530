"""Long polls hold a server thread each, so a token holds at most GOVERNOR_MAX_WAITS_PER_TOKEN
of them at once. The slots are rows under a unique constraint: one count for every thread and
process, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import TypeVar

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Min
from django.utils import timezone

from governor.models import AgentToken, WaitSlot
from governor.services.errors import TooManyWaits

# A slot outlives its wait only when the process holding it died (its `finally` never ran);
# after this much longer it counts as free again.
ABANDONED_AFTER = timedelta(seconds=30)
# A wait whose deadline just passed is still answering: its slot is free in a moment.
FINISHING = timedelta(seconds=5)
MAX_WAIT_SECONDS = 60
POLL_SECONDS = 0.05

T = TypeVar("T")


def _claim(token: AgentToken, seconds: int) -> WaitSlot | None:
    now = timezone.now()
    WaitSlot.objects.filter(token=token, until__lt=now - ABANDONED_AFTER).delete()
    for slot in range(settings.GOVERNOR_MAX_WAITS_PER_TOKEN):
        try:
            with transaction.atomic():
                return WaitSlot.objects.create(token=token, slot=slot,
                                               until=now + timedelta(seconds=seconds))
        except IntegrityError:
            continue  # held by another wait of this token
    return None


@contextmanager
def wait_slot(token: AgentToken, seconds: int) -> Iterator[None]:
    """Hold one of `token`'s wait slots while a long poll of up to `seconds` runs, released on
    every way out; refuse with TooManyWaits when all are held. No slot for `seconds` = 0."""
    if seconds <= 0:
        yield
        return
    held = _claim(token, seconds)
    if held is None:
        now = timezone.now()
        soonest = WaitSlot.objects.filter(token=token).aggregate(until=Min("until"))["until"]
        if soonest is not None and soonest < now - FINISHING:  # its process died
            soonest += ABANDONED_AFTER
        left = (soonest - now).total_seconds() if soonest is not None else 0
        retry_after = max(1, math.ceil(left))
        raise TooManyWaits(
            f"this token already holds {settings.GOVERNOR_MAX_WAITS_PER_TOKEN} long polls "
            "(wait=), the most one token may hold at once (GOVERNOR_MAX_WAITS_PER_TOKEN); retry "
            f"in {retry_after} s (Retry-After), or read without wait", retry_after=retry_after)
    try:
        yield
    finally:
        WaitSlot.objects.filter(pk=held.pk).delete()


def long_poll(token: AgentToken, wait: int, read: Callable[[], T],
              settled: Callable[[T], bool]) -> T:
    """The one long poll (`?wait=`): `read()` until `settled` says its value is the answer or
    `wait` seconds (clamped to 0..MAX_WAIT_SECONDS) have passed, every POLL_SECONDS, holding
    one of the token's wait slots meanwhile."""
    wait = max(0, min(wait, MAX_WAIT_SECONDS))
    with wait_slot(token, wait):
        deadline = time.monotonic() + wait
        value = read()
        while not settled(value) and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
            value = read()
    return value

"""Long polls. A waiting request holds no server thread and no database connection: it awaits
a wake-up (governor.services.notify) and re-reads, with a bounded re-check as the safety net.
Still, an agent token holds at most GOVERNOR_MAX_WAITS_PER_TOKEN of them at once, and a signed-in
person (the live parts of the pages) at most GOVERNOR_MAX_WAITS_PER_USER. The slots are rows
under unique constraints: one count for every thread and process, on SQLite and PostgreSQL
alike."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import timedelta
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.handlers.asgi import ASGIRequest
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import Min
from django.http import HttpRequest
from django.utils import timezone

from governor.models import AgentToken, WaitSlot
from governor.services.errors import TooManyWaits
from governor.services.notify import Listener

T = TypeVar("T")

# A slot outlives its wait only when the process holding it died (its `finally` never ran);
# after this much longer it counts as free again.
ABANDONED_AFTER = timedelta(seconds=30)
# A wait whose deadline just passed is still answering: its slot is free in a moment.
FINISHING = timedelta(seconds=5)
MAX_WAIT_SECONDS = 60


# Who waits: an agent token (the API's long polls) or a signed-in person (the pages' live parts).
Waiter = AgentToken | AbstractBaseUser


def _holder(waiter: Waiter) -> tuple[dict[str, Any], int, str]:
    """The slot rows' filter for `waiter`, its cap and the cap's setting."""
    if isinstance(waiter, AgentToken):
        return {"token": waiter}, settings.GOVERNOR_MAX_WAITS_PER_TOKEN, \
            "GOVERNOR_MAX_WAITS_PER_TOKEN"
    return {"user": waiter}, settings.GOVERNOR_MAX_WAITS_PER_USER, "GOVERNOR_MAX_WAITS_PER_USER"


@contextmanager
def _slot_transaction() -> Iterator[None]:
    """A transaction writing wait slots. Their rows need not outlive a crash of the database
    server, so on PostgreSQL its commit does not wait for the log to reach the disk
    (synchronous_commit off, several milliseconds per long poll): a claim lost in a crash was
    a wait that ended with it, a release lost is a slot that frees itself after its wait and
    ABANDONED_AFTER."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL synchronous_commit TO OFF")
        yield


def _claim(holder: dict[str, Any], cap: int, seconds: int) -> WaitSlot | None:
    """Writes only when a slot looks free (a refusal is a read: a flood of waits from one token
    does not queue on the database's write lock); the unique constraint decides races."""
    now = timezone.now()
    held = dict(WaitSlot.objects.filter(**holder).values_list("slot", "until"))
    if any(until < now - ABANDONED_AFTER for until in held.values()):
        with _slot_transaction():
            WaitSlot.objects.filter(**holder, until__lt=now - ABANDONED_AFTER).delete()
        held = {slot: until for slot, until in held.items() if until >= now - ABANDONED_AFTER}
    for slot in range(cap):
        if slot in held:
            continue
        try:
            with _slot_transaction():
                return WaitSlot.objects.create(**holder, slot=slot,
                                               until=now + timedelta(seconds=seconds))
        except IntegrityError:
            continue  # held by another wait of the same waiter
    return None


def slot_claim(waiter: Waiter, seconds: int) -> WaitSlot | None:
    """One of `waiter`'s wait slots for a long poll of up to `seconds` (None for 0 s); refuse
    with TooManyWaits when all are held."""
    if seconds <= 0:
        return None
    holder, cap, setting = _holder(waiter)
    held = _claim(holder, cap, seconds)
    if held is None:
        now = timezone.now()
        soonest = WaitSlot.objects.filter(**holder).aggregate(until=Min("until"))["until"]
        if soonest is not None and soonest < now - FINISHING:  # its process died
            soonest += ABANDONED_AFTER
        left = (soonest - now).total_seconds() if soonest is not None else 0
        retry_after = max(1, math.ceil(left))
        who = "token" if "token" in holder else "person"
        raise TooManyWaits(
            f"this {who} already holds {cap} long polls (wait=), the most one {who} may hold "
            f"at once ({setting}); retry in {retry_after} s (Retry-After), or read without "
            "wait", retry_after=retry_after)
    return held


def slot_release(held: WaitSlot | None) -> None:
    if held is not None:
        with _slot_transaction():
            WaitSlot.objects.filter(pk=held.pk).delete()


@contextmanager
def wait_slot(waiter: Waiter, seconds: int) -> Iterator[None]:
    """Hold a wait slot while a long poll of up to `seconds` runs, released on every way out."""
    held = slot_claim(waiter, seconds)
    try:
        yield
    finally:
        slot_release(held)


# The threads long polls read on (served over ASGI). Plain executor threads: sync_to_async
# would carry the request's context, and with it the request thread's connection.
READ_THREADS = 8
_readers = ThreadPoolExecutor(max_workers=READ_THREADS, thread_name_prefix="long-poll-read")


def _pooled(function: Callable[[], T]) -> T:
    """A read on a reader thread. With a connection pool (PostgreSQL) the connection goes back
    to it after every read, so waiting requests hold none of the pool's connections; otherwise
    the thread keeps its connection between reads. A connection that failed is closed, so the
    next read opens a fresh one."""
    try:
        return function()
    except DatabaseError:
        connection.close()
        raise
    finally:
        if _connections_pooled():
            connection.close()


def _connections_pooled() -> bool:
    return bool(connection.settings_dict.get("OPTIONS", {}).get("pool"))


def off_thread(request: HttpRequest, function: Callable[..., T], *args: Any) -> Awaitable[T]:
    """`function(*args)` for an async view. Served over ASGI it runs on a reader thread, so the
    request holds no connection of its own while it waits; under WSGI (and the test client) on
    the request's thread, as every other read of the request."""
    if isinstance(request, ASGIRequest):
        return asyncio.get_running_loop().run_in_executor(
            _readers, _pooled, lambda: function(*args))
    return sync_to_async(function)(*args)


async def long_poll(request: HttpRequest, *, waiter: Waiter, seconds: int,
                    topics: Sequence[str], read: Callable[[], T], settled: Callable[[T], bool],
                    changes_in: Callable[[T], float | None] = lambda _: None) -> T:
    """The one long poll (`?wait=`): `read()` until `settled(answer)` or `seconds` (clamped to
    0..MAX_WAIT_SECONDS) pass, waking when any of `topics` is announced, at least every
    GOVERNOR_WAIT_RECHECK_MS, and when `changes_in(answer)` seconds have passed (an answer
    that changes with time alone, with nobody to announce it: a run whose lease runs out, a
    proposal whose time runs out). `read` only reads: no write happens while waiting. Holds a
    wait slot of `waiter` (an agent token or a signed-in person) throughout, or raises
    TooManyWaits."""
    seconds = max(0, min(seconds, MAX_WAIT_SECONDS))
    async with Listener(*topics) as heard:
        # The slot and the first read on one trip to a reader thread (and one pooled
        # connection): what thousands of waits opening at once cost.
        held, answer = await off_thread(request, lambda: _claim_and_read(waiter, seconds, read))
        try:
            deadline = time.monotonic() + seconds
            recheck = settings.GOVERNOR_WAIT_RECHECK_MS / 1000
            while not settled(answer) and (left := deadline - time.monotonic()) > 0:
                due = changes_in(answer)
                await heard.wait(min(left, recheck, recheck if due is None else max(due, 0.01)))
                answer = await off_thread(request, read)
            return answer
        finally:
            await off_thread(request, slot_release, held)


def _claim_and_read(waiter: Waiter, seconds: int,
                    read: Callable[[], T]) -> tuple[WaitSlot | None, T]:
    held = slot_claim(waiter, seconds)
    try:
        return held, read()
    except BaseException:
        slot_release(held)
        raise

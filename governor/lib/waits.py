"""Long polls. A waiting request holds no server thread and no database connection: it awaits
a wake-up (governor.lib.notify) and re-reads, with a bounded re-check as the safety net.
Still, an agent token holds at most GOVERNOR_MAX_WAITS_PER_TOKEN of them at once, and a signed-in
person (the live parts of the pages) at most GOVERNOR_MAX_WAITS_PER_USER. The slots are rows
under unique constraints: one count for every thread and process, on SQLite and PostgreSQL
alike."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from datetime import timedelta
from typing import Any, TypeVar, cast

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.models import User
from django.core.handlers.asgi import ASGIRequest
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import Min, QuerySet
from django.http import HttpRequest
from django.utils import timezone

from governor.lib import metrics
from governor.lib.errors import TooManyWaits
from governor.lib.notify import Listener
from governor.models import AgentToken, WaitSlot

T = TypeVar("T")
R = TypeVar("R")

# A slot outlives its wait only when the process holding it died (its `finally` never ran);
# after this much longer it counts as free again.
ABANDONED_AFTER = timedelta(seconds=30)
# A wait whose deadline just passed is still answering: its slot is free in a moment.
FINISHING = timedelta(seconds=5)
MAX_WAIT_SECONDS = 60


# Who waits: an agent token (the API's long polls) or a signed-in person (the pages' live parts).
Waiter = AgentToken | User


def _holder(waiter: Waiter) -> tuple[dict[str, Any], int, str]:
    """The slot rows' filter for `waiter`, its cap and the cap's setting."""
    if isinstance(waiter, AgentToken):
        return {"token": waiter}, settings.GOVERNOR_MAX_WAITS_PER_TOKEN, \
            "GOVERNOR_MAX_WAITS_PER_TOKEN"
    return {"user": waiter}, settings.GOVERNOR_MAX_WAITS_PER_USER, "GOVERNOR_MAX_WAITS_PER_USER"


def _one_statement() -> AbstractContextManager[Any]:
    """A claim is one statement committed on its own (in a transaction, as in a test, a
    savepoint, so a conflict does not end it); so is a release (`_delete`). On PostgreSQL the
    table is UNLOGGED (migration 0013): a claim or release skips the write-ahead log and does
    not wait for the disk, as the slots need not outlive a crash of the database server: the
    waits end with it."""
    return transaction.atomic() if connection.in_atomic_block else nullcontext()


def _delete(slots: QuerySet[WaitSlot]) -> None:
    """One DELETE statement (QuerySet.delete() adds a transaction around it: two more trips)."""
    slots._raw_delete(slots.db)


def _claim(holder: dict[str, Any], cap: int, seconds: int) -> WaitSlot | None:
    """Writes only when a slot looks free (a refusal is a read: a flood of waits from one token
    does not queue on the database's write lock); the unique constraint decides races."""
    now = timezone.now()
    held = dict(WaitSlot.objects.filter(**holder).values_list("slot", "until"))
    if any(until < now - ABANDONED_AFTER for until in held.values()):
        _delete(WaitSlot.objects.filter(**holder, until__lt=now - ABANDONED_AFTER))
        held = {slot: until for slot, until in held.items() if until >= now - ABANDONED_AFTER}
    for slot in range(cap):
        if slot in held:
            continue
        try:
            with _one_statement():
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
    metrics.WAITS.labels(waiter="token" if "token" in holder else "person").inc()
    return held


def slot_release(held: WaitSlot | None) -> None:
    if held is not None:
        _delete(WaitSlot.objects.filter(pk=held.pk))


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


def _as_is(state: Any) -> Any:
    return state


async def long_poll(request: HttpRequest, *, waiter: Waiter, seconds: int,
                    topics: Sequence[str], read: Callable[[], T], settled: Callable[[T], bool],
                    changes_in: Callable[[T], float | None] = lambda _: None,
                    answer: Callable[[T], R] = _as_is) -> R:
    """The one long poll (`?wait=`): `read()` until `settled(state)` or `seconds` (clamped to
    0..MAX_WAIT_SECONDS) pass, waking when any of `topics` is announced, at least every
    GOVERNOR_WAIT_RECHECK_MS, and when `changes_in(state)` seconds have passed (a state that
    changes with time alone, with nobody to announce it: a run whose lease runs out, a proposal
    whose time runs out); then `answer(state)`, read after the wait. `read` only reads: no
    write happens while waiting. Holds a wait slot of `waiter` (an agent token or a signed-in
    person) throughout, or raises TooManyWaits.

    Each read is one trip to a reader thread, and the read that ends the wait also releases the
    slot and reads the answer on that trip: a wake-up costs one trip, as does a wait whose
    first read is already settled (the slot is claimed on that trip too)."""
    seconds = max(0, min(seconds, MAX_WAIT_SECONDS))
    async with Listener(*topics) as heard:
        held, (done, state) = await off_thread(
            request, _first_trip, waiter, seconds, read, settled, answer)
        try:
            deadline = time.monotonic() + seconds
            recheck = settings.GOVERNOR_WAIT_RECHECK_MS / 1000
            while not done:
                if (left := deadline - time.monotonic()) > 0:
                    due = changes_in(state)
                    await heard.wait(min(left, recheck,
                                         recheck if due is None else max(due, 0.01)))
                done, state = await off_thread(request, _trip, held, read, settled, answer,
                                               time.monotonic() >= deadline)
            return cast(R, state)  # done: the answer
        except BaseException:
            if not done:
                await off_thread(request, slot_release, held)
            raise


def _trip(held: WaitSlot | None, read: Callable[[], T], settled: Callable[[T], bool],
          answer: Callable[[T], R], last: bool) -> tuple[bool, Any]:
    """One read of a long poll: (False, state) while it waits on, or (True, answer) with the
    slot released."""
    state = read()
    if not (last or settled(state)):
        return False, state
    try:
        return True, answer(state)
    finally:
        slot_release(held)


def _first_trip(waiter: Waiter, seconds: int, read: Callable[[], T],
                settled: Callable[[T], bool], answer: Callable[[T], R],
                ) -> tuple[WaitSlot | None, tuple[bool, Any]]:
    held = slot_claim(waiter, seconds)
    try:
        return held, _trip(held, read, settled, answer, last=seconds == 0)
    except BaseException:
        slot_release(held)
        raise

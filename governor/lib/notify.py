"""Wake-ups for long polls (docs/architecture.md). What a waiting client waits for is a topic (a
session's review, a run; for the pages, a project's proposals and a session's timeline); the
transaction that changes it announces the topic when it commits. A waiter hears it in the same
process at once, and from any process through Redis pub/sub when Redis is the broker: each
process (each event loop) keeps one Redis connection subscribed to every topic and wakes its own
waiters, so a thousand waiting requests cost one connection, not a thousand. A notification is
only a hint to read again: the waiter re-reads the database on every wake-up and, heard or not,
every GOVERNOR_WAIT_RECHECK_MS, so a lost one costs that much time and never a wrong answer."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
import uuid
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import redis
import redis.asyncio as aioredis
from django.conf import settings
from django.db import transaction

log = logging.getLogger(__name__)
CHANNEL_PREFIX = "governor:wake:"
SUBSCRIBER_NAME = "governor-wakeups"  # the subscribers' Redis client name (CLIENT LIST)

_waiters_lock = threading.Lock()
_waiters: dict[str, set[Listener]] = {}
_publisher: tuple[str, redis.Redis] | None = None
# Tells this process's own announcements apart when Redis brings them back: its waiters were
# woken directly already. The pid, because a forked process shares the rest.
_BOOT = uuid.uuid4().hex


def review_topic(session_id: Any) -> str:
    return f"review:{session_id}"


def run_topic(run_id: Any) -> str:
    return f"run:{run_id}"


def change_topic(change_id: Any) -> str:
    """A gated change (rules §19) was decided."""
    return f"change:{change_id}"


def inbox_topic(project_id: Any) -> str:
    """A proposal of the project was opened or decided (approved, rejected, expired, withdrawn):
    what the review inbox shows."""
    return f"inbox:{project_id}"


def session_topic(session_id: Any) -> str:
    """Something the session's timeline shows changed: events appended, a run queued or
    started (a run's end appends its result event)."""
    return f"session:{session_id}"


def redis_url() -> str | None:
    url = str(settings.BROKER_URL)
    return url if url.startswith(("redis://", "rediss://")) else None


def channel(url: str, topic: str) -> str:
    """The channel `topic` is announced on through the Redis of `url`: one per Redis database,
    as Celery's queues are, so that governors sharing a Redis server hear only their own."""
    return f"{CHANNEL_PREFIX}{urlsplit(url).path.strip('/') or '0'}:{topic}"


def _origin() -> bytes:
    return f"{_BOOT}:{os.getpid()}".encode()


def announce_on_commit(topic: str) -> None:
    """Announce `topic` once the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: announce(topic))


def announce(topic: str) -> None:
    """Wake every waiter on `topic`: this process's directly, the others' through Redis. A
    failure to publish is logged and otherwise ignored: the waiters' re-check covers it."""
    _wake(topic)
    url = redis_url()
    if url is None:
        return
    try:
        redis_client(url).publish(channel(url, topic), _origin())
    except redis.RedisError as exc:
        log.warning("could not announce %s through Redis (%s); waiters re-check in %s ms",
                    topic, exc, settings.GOVERNOR_WAIT_RECHECK_MS)


def _wake(topic: str) -> None:
    with _waiters_lock:
        listeners = list(_waiters.get(topic, ()))
    for listener in listeners:
        listener.wake_threadsafe()


def _wake_all() -> None:
    with _waiters_lock:
        listeners = [listener for topic in _waiters.values() for listener in topic]
    for listener in listeners:
        listener.wake_threadsafe()


def redis_client(url: str) -> redis.Redis:
    """This process's kept (synchronous) connection to the Redis of `url`."""
    global _publisher
    if _publisher is None or _publisher[0] != url:
        _publisher = (url, redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2))
    return _publisher[1]


class Subscriber:
    """The one Redis connection of an event loop (a served process has one loop), subscribed to
    every topic's channel of its Redis database, waking the waiters of the topics it hears.
    It connects on the first wait and stays; when the connection breaks it reconnects, and
    wakes every waiter once it is back, as an announcement may have passed meanwhile."""

    RETRY_SECONDS = 1.0

    def __init__(self, url: str) -> None:
        self.url = url
        self.ready = asyncio.Event()
        self.failed_at: float | None = None  # the last attempt failed then (monotonic)
        self.task: asyncio.Task[None] | None = None

    async def subscribed(self) -> bool:
        """Whether announcements are heard from now on: connecting if need be (at most 2 s),
        at once False while Redis is known not to answer."""
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run())
        if self.ready.is_set():
            return True
        if self.failed_at is not None and time.monotonic() - self.failed_at < self.RETRY_SECONDS:
            return False
        try:
            await asyncio.wait_for(self.ready.wait(), timeout=2)
        except TimeoutError:
            return False
        return True

    async def _run(self) -> None:
        pattern = channel(self.url, "*")
        prefix = pattern[:-1].encode()
        missed = False  # whether announcements may have passed unheard (not at the start)
        while True:
            client = aioredis.Redis.from_url(self.url, socket_connect_timeout=2,
                                             client_name=SUBSCRIBER_NAME)
            pubsub: Any = client.pubsub()
            try:
                await pubsub.psubscribe(pattern)
                # Subscribed once Redis confirms: only then may a waiter's first read happen.
                confirmed = await pubsub.get_message(timeout=2)
                if confirmed is None or confirmed.get("type") != "psubscribe":
                    raise redis.RedisError("no subscription confirmed within 2 s")
                self.failed_at = None
                self.ready.set()
                if missed:
                    _wake_all()
                missed = False
                while True:
                    message = await pubsub.get_message(ignore_subscribe_messages=True,
                                                       timeout=None)
                    if message is not None and message.get("data") != _origin():
                        _wake(message["channel"].removeprefix(prefix).decode())
            except (redis.RedisError, OSError) as exc:
                log.warning("long polls without Redis wake-ups (%s); re-checking every %s ms "
                            "and reconnecting", exc, settings.GOVERNOR_WAIT_RECHECK_MS)
                self.failed_at = time.monotonic()
                missed = True
            finally:
                self.ready.clear()
                with contextlib.suppress(redis.RedisError, OSError):
                    await pubsub.aclose()
                    await client.aclose()
            await asyncio.sleep(self.RETRY_SECONDS)


_subscribers: dict[asyncio.AbstractEventLoop, Subscriber] = {}


def subscriber(url: str) -> Subscriber:
    """The running event loop's subscriber to `url`."""
    loop = asyncio.get_running_loop()
    for closed in [other for other in _subscribers if other.is_closed()]:
        del _subscribers[closed]  # the loops of finished asyncio.run calls (tests)
    found = _subscribers.get(loop)
    if found is None or found.url != url:
        if found is not None and found.task is not None:
            found.task.cancel()  # Redis moved (settings changed): only tests do that
        found = _subscribers[loop] = Subscriber(url)
    return found


class Listener:
    """Listens to topics while a long poll waits: `async with Listener(*topics) as heard:`,
    then `await heard.wait(seconds)`, woken by any of them. Entered before the first read, so
    nothing committed after that read goes unheard."""

    def __init__(self, *topics: str) -> None:
        self.topics = topics
        self.event = asyncio.Event()
        self.loop = asyncio.get_running_loop()

    def wake_threadsafe(self) -> None:
        with contextlib.suppress(RuntimeError):  # its loop closed: the wait is over
            self.loop.call_soon_threadsafe(self.event.set)

    async def __aenter__(self) -> Listener:
        with _waiters_lock:
            for topic in self.topics:
                _waiters.setdefault(topic, set()).add(self)
        url = redis_url()
        if url is not None and self.topics and not await subscriber(url).subscribed():
            log.warning("long poll on %s without Redis wake-ups; re-checking every %s ms",
                        ", ".join(self.topics), settings.GOVERNOR_WAIT_RECHECK_MS)
        return self

    async def wait(self, seconds: float) -> bool:
        """Until a topic is announced or `seconds` pass; whether one was announced."""
        try:
            await asyncio.wait_for(self.event.wait(), timeout=max(0.0, seconds))
        except TimeoutError:
            return False
        self.event.clear()
        return True

    async def __aexit__(self, kind: type[BaseException] | None, value: BaseException | None,
                        traceback: TracebackType | None) -> None:
        with _waiters_lock:
            for topic in self.topics:
                listeners = _waiters.get(topic, set())
                listeners.discard(self)
                if not listeners:
                    _waiters.pop(topic, None)

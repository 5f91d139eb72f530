"""Wake-ups for long polls (ARCHITECTURE §10). What a waiting client waits for is a topic (a
session's review, a run; for the pages, a project's proposals and a session's timeline); the
transaction that changes it announces the topic when it commits. A waiter hears it in the same
process at once, and from any process through Redis pub/sub when Redis is the broker. A
notification is only a hint to read again: the waiter re-reads the database on every wake-up
and, heard or not, every GOVERNOR_WAIT_RECHECK_MS, so a lost one costs that much time and never
a wrong answer."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from types import TracebackType
from typing import Any

import redis
import redis.asyncio as aioredis
from django.conf import settings
from django.db import transaction

log = logging.getLogger(__name__)
CHANNEL_PREFIX = "governor:wake:"

_waiters_lock = threading.Lock()
_waiters: dict[str, set[Listener]] = {}
_publisher: tuple[str, redis.Redis] | None = None


def review_topic(session_id: Any) -> str:
    return f"review:{session_id}"


def run_topic(run_id: Any) -> str:
    return f"run:{run_id}"


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


def announce_on_commit(topic: str) -> None:
    """Announce `topic` once the current transaction commits (at once outside one)."""
    transaction.on_commit(lambda: announce(topic))


def announce(topic: str) -> None:
    """Wake every waiter on `topic`: this process's directly, the others' through Redis. A
    failure to publish is logged and otherwise ignored: the waiters' re-check covers it."""
    with _waiters_lock:
        listeners = list(_waiters.get(topic, ()))
    for listener in listeners:
        listener.wake_threadsafe()
    url = redis_url()
    if url is None:
        return
    try:
        _redis(url).publish(CHANNEL_PREFIX + topic, b"")
    except redis.RedisError as exc:
        log.warning("could not announce %s through Redis (%s); waiters re-check in %s ms",
                    topic, exc, settings.GOVERNOR_WAIT_RECHECK_MS)


def _redis(url: str) -> redis.Redis:
    global _publisher
    if _publisher is None or _publisher[0] != url:
        _publisher = (url, redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2))
    return _publisher[1]


class Listener:
    """Listens to topics while a long poll waits: `async with Listener(*topics) as heard:`,
    then `await heard.wait(seconds)`, woken by any of them. Entered before the first read, so
    nothing committed after that read goes unheard."""

    def __init__(self, *topics: str) -> None:
        self.topics = topics
        self.event = asyncio.Event()
        self.loop = asyncio.get_running_loop()
        self.client: Any = None
        self.pubsub: Any = None
        self.reader: asyncio.Task[None] | None = None

    def wake_threadsafe(self) -> None:
        with contextlib.suppress(RuntimeError):  # its loop closed: the wait is over
            self.loop.call_soon_threadsafe(self.event.set)

    async def __aenter__(self) -> Listener:
        with _waiters_lock:
            for topic in self.topics:
                _waiters.setdefault(topic, set()).add(self)
        url = redis_url()
        if url is not None and self.topics:
            try:
                self.client = aioredis.Redis.from_url(url, socket_connect_timeout=2)
                self.pubsub = self.client.pubsub()
                await self.pubsub.subscribe(*(CHANNEL_PREFIX + topic for topic in self.topics))
                # Subscribed once Redis confirms every channel: only then may the first read
                # happen.
                for _ in self.topics:
                    confirmed = await self.pubsub.get_message(timeout=2)
                    if confirmed is None or confirmed.get("type") != "subscribe":
                        raise redis.RedisError("no subscription confirmed within 2 s")
                self.reader = asyncio.create_task(self._read())
            except (redis.RedisError, OSError) as exc:
                log.warning("long poll on %s without Redis wake-ups (%s); re-checking every "
                            "%s ms", self._named(), exc, settings.GOVERNOR_WAIT_RECHECK_MS)
                await self._close_redis()
        return self

    def _named(self) -> str:
        return ", ".join(self.topics)

    async def _read(self) -> None:
        try:
            while True:
                message = await self.pubsub.get_message(ignore_subscribe_messages=True,
                                                        timeout=None)
                if message is not None:
                    self.event.set()
        except (redis.RedisError, OSError) as exc:
            log.warning("Redis wake-ups for %s stopped (%s); re-checking every %s ms",
                        self._named(), exc, settings.GOVERNOR_WAIT_RECHECK_MS)

    async def wait(self, seconds: float) -> bool:
        """Until the topic is announced or `seconds` pass; whether it was announced."""
        try:
            await asyncio.wait_for(self.event.wait(), timeout=max(0.0, seconds))
        except TimeoutError:
            return False
        self.event.clear()
        return True

    async def _close_redis(self) -> None:
        if self.reader is not None:
            self.reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, redis.RedisError, OSError):
                await self.reader
            self.reader = None
        with contextlib.suppress(redis.RedisError, OSError):
            if self.pubsub is not None:
                await self.pubsub.aclose()
            if self.client is not None:
                await self.client.aclose()
        self.pubsub = self.client = None

    async def __aexit__(self, kind: type[BaseException] | None, value: BaseException | None,
                        traceback: TracebackType | None) -> None:
        with _waiters_lock:
            for topic in self.topics:
                listeners = _waiters.get(topic, set())
                listeners.discard(self)
                if not listeners:
                    _waiters.pop(topic, None)
        await self._close_redis()

"""How the web processes hold client connections (issue 25, finding 6): gunicorn runs
`GovernorWorker`, a uvicorn worker whose HTTP protocol closes a connection that keeps the server
waiting for bytes it is owed, and whose process never holds more connections than its
open-files limit leaves room for.

uvicorn (0.54, httptools and h11 alike) arms its keep-alive timer only once a response is
complete: a connection that sends nothing, or half a request header, or a header promising a
body it never sends, is kept for ever, each holding a descriptor. Measured before this: 400 of
400 such connections still open after 20 s, and ~2,400 of them (a common open-files limit of
1,024) made `/healthz` fail 5 of 5 times. `GuardedHttpToolsProtocol` arms a timer whenever the
server waits for the client:

- from the connection, the first request's header must arrive in full within
  GOVERNOR_HEADER_TIMEOUT_SECONDS (so a connection that never sends is closed then, not held);
- each later request's header, within the same time of its first byte (bytes trickled in do not
  extend it), and bytes between requests that begin none (a stray CRLF every minute) do not keep
  the connection either;
- a request's body may pause at most GOVERNOR_BODY_TIMEOUT_SECONDS between two reads;
- between requests, uvicorn's own keep-alive timer (GOVERNOR_KEEP_ALIVE_SECONDS) stands.

While the server itself stopped reading (a pipelined request waiting its turn, a body the
application has not consumed yet) no timer closes anything: the client is not the one late. A
request being answered (a long poll holds one up to 60 s) arms nothing.

`limit_concurrency` answers 503 once the process holds GOVERNOR_MAX_CONNECTIONS connections or
requests; beyond that a new connection is closed as soon as it is accepted, so its descriptor is
returned at once and the process never runs out of them (the accept loop would stall on EMFILE,
and every client with it). The limit is lowered to what the process's open-files limit leaves
after RESERVED_FILES for its own files, and `governor_serve` raises that limit to the hard one
before it starts anything (`raise_open_files_limit`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
import time
from contextlib import suppress
from typing import Any, Literal

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from gunicorn.glogging import Logger
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn_worker import UvicornWorker

from governor.logs import configure

# gunicorn imports the worker class in its master, before any application: the settings are
# read there (GovernorWorker) from the same module manage.py names.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governor.settings")
log = logging.getLogger("governor.serving")

RESERVED_FILES = 128
"""Descriptors a web process keeps for its own use beside client connections: the listening
socket, its event loop, database connections (a pool of at most GOVERNOR_DB_POOL_MAX_SIZE, or
SQLite's database, -wal and -shm per thread), Redis, logs, the files a request reads."""
MIN_CONNECTIONS = 16
REFUSAL_LOG_SECONDS = 60.0  # a process says it refuses connections at most once a minute

Waiting = Literal["header", "body"]


def raise_open_files_limit() -> tuple[int, int]:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit (the processes it starts
    inherit it); the (soft, hard) limit it has afterwards. A limit that cannot be raised (an
    unlimited hard limit the kernel does not take as a soft one) is left as it was."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def connection_limit() -> int:
    """The most client connections one web process holds: GOVERNOR_MAX_CONNECTIONS, lowered to
    what this process's open-files limit leaves after RESERVED_FILES."""
    configured = int(settings.GOVERNOR_MAX_CONNECTIONS)
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return configured
    room = soft - RESERVED_FILES
    if room < MIN_CONNECTIONS:
        raise ImproperlyConfigured(
            f"the open-files limit (RLIMIT_NOFILE) is {soft}: a web process keeps "
            f"{RESERVED_FILES} descriptors for its own files and needs room for at least "
            f"{MIN_CONNECTIONS} connections; raise the limit (ulimit -n, LimitNOFILE=)")
    return min(configured, room)


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol plus the timers and the connection cap described above.
    One timer at a time (`_timer`), for what the server waits for (`_waiting`)."""

    _refusals_logged_at = 0.0  # per process: when a refused connection was last logged

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout: float = settings.GOVERNOR_HEADER_TIMEOUT_SECONDS
        self.body_timeout: float = settings.GOVERNOR_BODY_TIMEOUT_SECONDS
        self._timer: asyncio.TimerHandle | None = None
        self._waiting: Waiting | None = None  # what of a request is being read, if any

    # --- timers --------------------------------------------------------------------------

    def _arm(self, waiting: Waiting) -> None:
        self._disarm()
        delay = self.header_timeout if waiting == "header" else self.body_timeout
        self._timer = self.loop.call_later(delay, self._timed_out, waiting)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _answering(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def _timed_out(self, waiting: Waiting) -> None:
        self._timer = None
        if self.transport.is_closing():
            return
        if self.flow.read_paused:  # the server stopped reading: the client is not late
            self._arm(waiting)
            return
        if waiting == "header" and self._waiting == "header" and not self._answering():
            # Half a header: say why before closing. A connection that sent nothing, or
            # nothing that began a request, is closed without an answer, as a keep-alive
            # connection is (an answer could cross a request the client is sending just now).
            reason = (f"the request header did not arrive in full within "
                      f"{self.header_timeout:g} s (GOVERNOR_HEADER_TIMEOUT_SECONDS)")
            self.transport.write(b"".join([
                STATUS_LINE[408], b"content-type: text/plain; charset=utf-8\r\n",
                b"content-length: %d\r\n" % len(reason), b"connection: close\r\n\r\n",
                reason.encode("ascii")]))
        self.transport.close()

    # --- the protocol ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        limit = self.limit_concurrency
        if limit is not None and len(self.connections) > limit:
            now = time.monotonic()
            cls = GuardedHttpToolsProtocol
            if now - cls._refusals_logged_at >= REFUSAL_LOG_SECONDS:
                cls._refusals_logged_at = now
                log.warning("holding %d connections (GOVERNOR_MAX_CONNECTIONS, lowered to fit "
                            "the open-files limit): closing new ones at once", limit)
            transport.close()
            return
        self._arm("header")

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.transport.is_closing():
            return
        if self._waiting == "body":
            self._arm("body")  # more of the body arrived: the pause starts again
        elif (self._waiting is None and self._timer is None and not self._answering()
              and self.timeout_keep_alive_task is None):
            # Bytes that began no request, while nothing is being answered: uvicorn dropped its
            # keep-alive timer on them; the next header is due from now.
            self._arm("header")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._waiting = "header"
        if self._timer is None:  # the first request's header is due from the connection
            self._arm("header")

    def on_headers_complete(self) -> None:
        self._disarm()
        self._waiting = "body"  # until on_message_complete, which follows at once without one
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._waiting = None
        self._disarm()
        super().on_message_complete()


class GovernorLogger(Logger):  # type: ignore[misc]  # gunicorn is untyped
    """gunicorn's own lines (its master's and workers': booting, exits, uvicorn's errors) in
    the format of every other line (governor.logs): its handlers give way to the root's."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        configure(settings.LOGGING)
        for gunicorn_log in (self.error_log, self.access_log):
            for handler in list(gunicorn_log.handlers):
                gunicorn_log.removeHandler(handler)
        self.error_log.propagate = True


class GovernorWorker(UvicornWorker):  # type: ignore[misc]  # uvicorn_worker is untyped
    """gunicorn's worker class for `governor_serve`: uvicorn (uvloop when installed) with
    `GuardedHttpToolsProtocol`, the keep-alive and connection limits from the settings. Built
    in gunicorn's master before each fork, so every setting is read (and refused) there."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # UvicornWorker builds uvicorn's Config from CONFIG_KWARGS last, over gunicorn's own
        # options (its --keep-alive included): these win.
        self.CONFIG_KWARGS = {
            **UvicornWorker.CONFIG_KWARGS, "http": GuardedHttpToolsProtocol,
            "timeout_keep_alive": settings.GOVERNOR_KEEP_ALIVE_SECONDS,
            "limit_concurrency": connection_limit(),
            # Each request's line is the application's (governor.middleware), with its id.
            "access_log": False,
        }
        super().__init__(*args, **kwargs)
        errors = logging.getLogger("uvicorn.error")  # given gunicorn's (no) handlers above
        errors.handlers, errors.propagate = [], True

"""The middleware of every request (`RequestObserved`) and the API's over ASGI
(settings.API_MIDDLEWARE, governor.asgi)."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, cast

import structlog
from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponseBase
from django.middleware.common import CommonMiddleware
from django.middleware.security import SecurityMiddleware

from governor.lib import metrics

log = structlog.get_logger("governor.request")
REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
UNMATCHED = "unmatched"  # the route label of a request no URL pattern matched


class RequestObserved:
    """First of every chain: the request's id (a client's `X-Request-ID` when it is a plain
    token of up to 128 characters, else a new one), echoed in the response and bound to every
    log line of the request; then one log line and the metrics of the answered request, by its
    route pattern (never its path: ids would make every session a metric of its own)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._answer_async(request)
        started = self._begin(request)
        return self._end(request, self.get_response(request), started)

    async def _answer_async(self, request: HttpRequest) -> HttpResponseBase:
        started = self._begin(request)
        return self._end(request, await self.get_response(request), started)

    @staticmethod
    def _begin(request: HttpRequest) -> float:
        given = request.headers.get("X-Request-ID", "")
        request_id = given if REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
        structlog.contextvars.clear_contextvars()
        structlog.contextvars.bind_contextvars(request_id=request_id)
        request.META["GOVERNOR_REQUEST_ID"] = request_id
        return time.perf_counter()

    @staticmethod
    def _end(request: HttpRequest, response: HttpResponseBase, started: float
             ) -> HttpResponseBase:
        seconds = time.perf_counter() - started
        match = getattr(request, "resolver_match", None)
        route = f"/{match.route}" if match is not None and match.route else UNMATCHED
        method = request.method or ""
        metrics.REQUESTS.labels(route=route, method=method, status=str(response.status_code)
                                ).inc()
        metrics.REQUEST_SECONDS.labels(route=route, method=method).observe(seconds)
        response["X-Request-ID"] = request.META["GOVERNOR_REQUEST_ID"]
        session = match.kwargs.get("session_id") if match is not None else None
        if session is not None:
            structlog.contextvars.bind_contextvars(session_id=str(session))
        log.info("request", method=method, route=route, status=response.status_code,
                 duration_ms=round(seconds * 1000, 1))
        structlog.contextvars.clear_contextvars()
        return response


class APIMiddleware:
    """Django's SecurityMiddleware and CommonMiddleware, their hooks called in the event loop:
    they only read the request and settings and set headers, while as a `MiddlewareMixin` each
    hook of each would be a hop to a thread and back (~0.3 ms apiece here, benchmark B9)."""

    sync_capable = False
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Awaitable[HttpResponseBase]]
                 ) -> None:
        self.get_response = get_response
        # Django converts an exception of a hook (DisallowedHost: 400) into its response only
        # for a middleware it sees as a coroutine function; an instance must say it is one.
        markcoroutinefunction(self)
        self.hooks: list[SecurityMiddleware | CommonMiddleware] = [
            SecurityMiddleware(get_response), CommonMiddleware(get_response)]

    async def __call__(self, request: HttpRequest) -> HttpResponseBase:
        # As the two in a chain: a hook's response skips the inner ones, on the way back too.
        response: Any = None  # (django-stubs types Security's response narrower than Common's)
        ran = 0
        while response is None and ran < len(self.hooks):
            response = self.hooks[ran].process_request(request)
            ran += 1
        if response is None:
            response = await self.get_response(request)
        for hook in reversed(self.hooks[:ran]):
            response = hook.process_response(request, response)
        return cast(HttpResponseBase, response)

"""The API's middleware over ASGI (settings.API_MIDDLEWARE, governor.asgi)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

from asgiref.sync import markcoroutinefunction
from django.http import HttpRequest, HttpResponseBase
from django.middleware.common import CommonMiddleware
from django.middleware.security import SecurityMiddleware


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

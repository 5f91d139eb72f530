"""The ASGI application `governor_serve` runs (gunicorn with uvicorn workers): long polls wait
on a notification there and hold no thread (governor.lib.waits). The API and /healthz are
served by a handler of their own with only settings.API_MIDDLEWARE; the pages, admin and static
files by one with settings.MIDDLEWARE."""

import gc
import os
from typing import Any

from django.conf import settings
from django.core.asgi import get_asgi_application
from django.core.exceptions import ImproperlyConfigured
from django.core.handlers.asgi import ASGIHandler
from django.test.utils import override_settings
from django.urls import get_resolver

from governor.startup import prepare

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governor.settings")
prepare()
pages = get_asgi_application()


class APIHandler(ASGIHandler):
    """Django's ASGI handler with settings.API_MIDDLEWARE in place of settings.MIDDLEWARE."""

    def load_middleware(self, is_async: bool = False) -> None:
        with override_settings(MIDDLEWARE=settings.API_MIDDLEWARE):
            super().load_middleware(is_async)


api = APIHandler()


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    path = scope.get("path", "").removeprefix(scope.get("root_path", ""))
    handler = api if scope["type"] == "http" and path.startswith(settings.API_PATHS) else pages
    await handler(scope, receive, send)


# The URLconf, and with it every API route's schema, is imported now rather than by the first
# requests, which would wait on it (B9: the first sessions' second-long tail).
get_resolver().url_patterns  # noqa: B018 - read for its side effect

# Like governor.wsgi: refuses to serve while a secret is open to others (governor.system_checks).
from governor.system_checks import secrets_are_owner_only  # noqa: E402 - needs Django set up

if problems := secrets_are_owner_only():
    raise ImproperlyConfigured("; ".join(f"{problem.msg} (fix: {problem.hint})"
                                         for problem in problems))


# A full garbage collection stops the process's event loop, and every request and waiting poll
# of that process with it, while it scans every object the process holds: in B9 (40 s, 5 agents,
# 1,000 polls) the two web processes made 6-7 such passes of 64-346 ms, over 160,000-290,000
# objects. The ~160,000 of start-up (Django, the routes and their schemas) live as long as the
# process: frozen, no collection scans them again. And a full collection waits for 100
# collections of the middle generation instead of Python's 10; the cyclic garbage that grows
# that old is small (9-1,113 objects a pass). Measured: no full pass in those 40 s.
gc.freeze()
gc.set_threshold(*gc.get_threshold()[:2], 100)

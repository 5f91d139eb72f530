"""The ASGI application `governor_serve` runs (gunicorn with uvicorn workers): long polls wait
on a notification there and hold no thread (governor.services.waits)."""

import os

from django.core.asgi import get_asgi_application
from django.core.exceptions import ImproperlyConfigured
from django.urls import get_resolver

from governor.startup import prepare

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governor.settings")
prepare()
application = get_asgi_application()
# The URLconf, and with it every API route's schema, is imported now rather than by the first
# requests, which would wait on it (B9: the first sessions' second-long tail).
get_resolver().url_patterns  # noqa: B018 - read for its side effect

# Like governor.wsgi: refuses to serve while a secret is open to others (governor.system_checks).
from governor.system_checks import secrets_are_owner_only  # noqa: E402 - needs Django set up

if problems := secrets_are_owner_only():
    raise ImproperlyConfigured("; ".join(f"{problem.msg} (fix: {problem.hint})"
                                         for problem in problems))

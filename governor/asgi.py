"""The ASGI application `governor_serve` runs (gunicorn with uvicorn workers): long polls wait
on a notification there and hold no thread (governor.services.waits)."""

import os

from django.core.asgi import get_asgi_application
from django.core.exceptions import ImproperlyConfigured

from governor.startup import prepare

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governor.settings")
prepare()
application = get_asgi_application()

# Like governor.wsgi: refuses to serve while a secret is open to others (governor.system_checks).
from governor.system_checks import secrets_are_owner_only  # noqa: E402 - needs Django set up

if problems := secrets_are_owner_only():
    raise ImproperlyConfigured("; ".join(f"{problem.msg} (fix: {problem.hint})"
                                         for problem in problems))

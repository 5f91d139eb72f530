import os

from django.core.exceptions import ImproperlyConfigured
from django.core.wsgi import get_wsgi_application

from governor.startup import prepare

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governor.settings")
prepare()
application = get_wsgi_application()

# A bare `gunicorn governor.wsgi:application` refuses to serve while a secret is open to others,
# as governor_serve and the manage.py commands do (governor.system_checks).
from governor.system_checks import secrets_are_owner_only  # noqa: E402 - needs Django set up

if problems := secrets_are_owner_only():
    raise ImproperlyConfigured("; ".join(f"{problem.msg} (fix: {problem.hint})"
                                         for problem in problems))

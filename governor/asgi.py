import os

from django.core.asgi import get_asgi_application

from governor.startup import prepare

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "governor.settings")
prepare()
application = get_asgi_application()

"""All settings, read from the environment once, failing loudly on bad values.

Embedded defaults need nothing running: SQLite under var/ and, when Redis does not answer,
Celery's filesystem transport under var/.
"""

from __future__ import annotations

import os
import secrets
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse, urlsplit

import django_stubs_ext
from django.core.exceptions import ImproperlyConfigured

from governor.startup import var_dir

# Django's generic classes (ModelAdmin[Project], TextField[Any, Any]) as django-stubs types them.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent
# Created owner-only at start-up (governor/startup.py), with the database and the secret key
# inside it (governor.system_checks refuses wider modes).
VAR_DIR = var_dir(os.environ)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r}: expected one of 1/0, true/false, yes/no, on/off")


def env_int(name: str, default: int, *, minimum: int, maximum: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r}: expected an integer") from None
    if not minimum <= value <= maximum:
        raise ImproperlyConfigured(f"{name}={value}: expected {minimum}..{maximum}")
    return value


def database_from_url(url: str) -> dict[str, object]:
    """sqlite:///relative/or//absolute/path, postgres://user:pass@host:port/name?opt=value."""
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        path = unquote(parsed.path[1:] if parsed.path.startswith("/") else parsed.path)
        if not path:
            raise ImproperlyConfigured(f"DATABASE_URL={url!r}: sqlite URL has no file path")
        return sqlite_database(Path(path) if path.startswith("/") else BASE_DIR / path)
    if parsed.scheme in {"postgres", "postgresql", "pgsql"}:
        name = unquote(parsed.path.lstrip("/"))
        if not name:
            raise ImproperlyConfigured(f"DATABASE_URL={url!r}: PostgreSQL URL has no database name")
        options = {key: values[-1] for key, values in parse_qs(parsed.query).items()}
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": name,
            "USER": unquote(parsed.username or ""),
            "PASSWORD": unquote(parsed.password or ""),
            "HOST": parsed.hostname or "",
            "PORT": str(parsed.port or ""),
            # Served over ASGI, each synchronous request runs on a thread of its own: its
            # connection goes back to the process's pool when the request ends (Django requires
            # CONN_MAX_AGE=0 with a pool; without one a new connection per request).
            "CONN_MAX_AGE": 0,
            "CONN_HEALTH_CHECKS": True,
            "OPTIONS": {**options, **postgres_pool()},
        }
    raise ImproperlyConfigured(
        f"DATABASE_URL={url!r}: unsupported scheme {parsed.scheme!r} (use sqlite:// or postgres://)"
    )


def postgres_pool() -> dict[str, object]:
    """Django's psycopg pool, one per process: at most GOVERNOR_DB_POOL_MAX_SIZE connections
    however many requests run at once (the others wait up to GOVERNOR_DB_POOL_TIMEOUT seconds
    for one, then fail); GOVERNOR_DB_POOL_MAX_SIZE=0 opens a connection per request instead."""
    max_size = env_int("GOVERNOR_DB_POOL_MAX_SIZE", 10, minimum=0, maximum=1000)
    if max_size == 0:
        return {}
    min_size = env_int("GOVERNOR_DB_POOL_MIN_SIZE", 2, minimum=0, maximum=max_size)
    timeout = env_int("GOVERNOR_DB_POOL_TIMEOUT", 30, minimum=1, maximum=600)
    return {"pool": {"min_size": min_size, "max_size": max_size, "timeout": timeout}}


def sqlite_database(path: Path) -> dict[str, object]:
    # The embedded database file is created owner-only at start-up (governor/startup.py).
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(path),
        "OPTIONS": {
            # Writers take the lock at BEGIN, so concurrent appends queue instead of failing.
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
            "init_command": (
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"
            ),
        },
    }


def secret_key() -> str:
    if os.environ.get("SECRET_KEY"):
        return os.environ["SECRET_KEY"]
    key_file = os.environ.get("SECRET_KEY_FILE")
    if key_file:
        try:
            value = Path(key_file).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"SECRET_KEY_FILE={key_file!r}: {exc.strerror}") from None
        if not value:
            raise ImproperlyConfigured(f"SECRET_KEY_FILE={key_file!r} is empty")
        return value
    generated = VAR_DIR / "secret_key"  # written once at start-up (governor/startup.py)
    try:
        return generated.read_text().strip()
    except FileNotFoundError:
        # Not started through an entry point (a bare import): a key for this process only.
        return secrets.token_urlsafe(64)


def broker_choice() -> tuple[str, str]:
    """docs/architecture.md: the configured broker, else the one start-up chose (local Redis if it
    answered, else files), else files."""
    configured = os.environ.get("GOVERNOR_BROKER_URL", "").strip()
    if not configured:
        return "filesystem://", f"no broker configured; embedded filesystem broker under {VAR_DIR}"
    if not configured.startswith(("redis://", "rediss://", "filesystem://", "memory://")):
        raise ImproperlyConfigured(
            f"GOVERNOR_BROKER_URL={configured!r}: expected redis://, rediss:// or filesystem://"
        )
    return configured, os.environ.get("GOVERNOR_BROKER_CHOICE", "configured by GOVERNOR_BROKER_URL")


DEBUG = env_bool("DEBUG", False)
SECRET_KEY = secret_key()
# The file SECRET_KEY was read from, if any (governor.system_checks refuses a mode wider than 0600).
SECRET_KEY_PATH = (None if os.environ.get("SECRET_KEY")
                   else Path(os.environ.get("SECRET_KEY_FILE") or VAR_DIR / "secret_key"))
ALLOWED_HOSTS = [
    host.strip()
    for host in os.environ.get("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]").split(",")
    if host.strip()
]
if not ALLOWED_HOSTS:
    raise ImproperlyConfigured("ALLOWED_HOSTS is empty")
CSRF_TRUSTED_ORIGINS = [
    origin.strip()
    for origin in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",")
    if origin.strip()
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "axes",
    "ninja",  # /api/v1/docs serves django-ninja's own Swagger UI files, so it works offline
    "governor.apps.GovernorConfig",
    "reviews.apps.ReviewsConfig",
    "verification.apps.VerificationConfig",
]

MIDDLEWARE = [
    "governor.middleware.RequestObserved",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",
]
# Served over ASGI (governor.asgi), /api/ and the operators' probes run only this: the request's
# id, log line and metrics, then the security and common middleware without a thread hop per
# hook. They take bearer tokens and set no cookies, so the pages' sessions, CSRF, login,
# messages, framing, htmx and lockout have nothing to do there.
API_MIDDLEWARE = ["governor.middleware.RequestObserved", "governor.middleware.APIMiddleware"]
API_PATHS = ("/api/", "/healthz", "/readyz", "/metrics")

ROOT_URLCONF = "governor.urls"
WSGI_APPLICATION = "governor.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]

DATABASES = {
    "default": database_from_url(os.environ["DATABASE_URL"])
    if os.environ.get("DATABASE_URL")
    else sqlite_database(VAR_DIR / "governor.sqlite3")
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/reviews/"

# Login throttling (django-axes) on both login pages: after 5 wrong passwords for one username
# from one address, that pair is refused (even with the right password) for 15 minutes, or until
# an admin deletes its row under Axes > Access attempts. Other users and addresses are unaffected.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = 5
AXES_COOLOFF_TIME = timedelta(minutes=15)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False  # no banner on every command; lockouts are still logged as warnings
# django-axes masks the user name and address in its own log lines unless told otherwise: they
# are the audit trail of failed logins (governor.logs logs each failure), masked only on request.
AXES_SENSITIVE_PARAMETERS = ["username", "ip_address"] if env_bool(
    "GOVERNOR_LOG_MASK_LOGINS", False) else []

LANGUAGE_CODE = "en"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "static"

# Request bodies: the events route takes up to 1,000 events, an import a whole log.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int(
    "GOVERNOR_MAX_BODY_BYTES", 8 * 1024 * 1024, minimum=1024, maximum=256 * 1024 * 1024
)
GOVERNOR_MAX_IMPORT_BYTES = env_int(
    "GOVERNOR_MAX_IMPORT_BYTES", 64 * 1024 * 1024, minimum=1024, maximum=1024 * 1024 * 1024
)
# An import's events (after packed chunk rows are expanded) at most: a longer log is refused
# (413) before any of it is stored. Each event costs the web process some 50 µs to check, hash
# and write (200,000 took 10.5 s here), so the default bounds one import to about 5 s of CPU.
GOVERNOR_MAX_IMPORT_EVENTS = env_int("GOVERNOR_MAX_IMPORT_EVENTS", 100_000, minimum=100,
                                     maximum=10_000_000)
# Imports one agent token may start in any minute, refused ones too (429 with Retry-After past
# them): each is a whole log to parse and check, up to the event cap's seconds of CPU.
GOVERNOR_MAX_IMPORTS_PER_MINUTE = env_int("GOVERNOR_MAX_IMPORTS_PER_MINUTE", 10, minimum=1,
                                          maximum=10_000)
GOVERNOR_MAX_BATCH = 1000
GOVERNOR_WORKSPACE_ROOTS = [
    root for root in os.environ.get("GOVERNOR_WORKSPACE_ROOTS", "").split(":") if root
]


def demo_workspace_root() -> Path:
    """Where `governor_bootstrap` lets the demo project's agents work: `workspaces/` beside
    var/, never inside it (issue 25): var/ is the server's own (0700, the signing keys and the
    database), so an agent able to write under it would run as the server's user."""
    raw = os.environ.get("GOVERNOR_DEMO_WORKSPACE_ROOT", "")
    if not raw:
        return BASE_DIR / "workspaces"
    if not raw.startswith("/"):
        raise ImproperlyConfigured(f"GOVERNOR_DEMO_WORKSPACE_ROOT={raw!r}: expected an absolute "
                                   "directory path")
    return Path(raw)


GOVERNOR_DEMO_WORKSPACE_ROOT = demo_workspace_root()
# Serving (governor/serving.py, issue 25): the first request's header must arrive in full within
# GOVERNOR_HEADER_TIMEOUT_SECONDS of the connection (each later one within it of its first byte),
# a body may pause at most GOVERNOR_BODY_TIMEOUT_SECONDS between reads, an idle connection between
# requests is kept GOVERNOR_KEEP_ALIVE_SECONDS, and a web process holds at most
# GOVERNOR_MAX_CONNECTIONS connections (fewer when its open-files limit leaves less room).
GOVERNOR_HEADER_TIMEOUT_SECONDS = env_int("GOVERNOR_HEADER_TIMEOUT_SECONDS", 10, minimum=1,
                                          maximum=600)
GOVERNOR_BODY_TIMEOUT_SECONDS = env_int("GOVERNOR_BODY_TIMEOUT_SECONDS", 30, minimum=1,
                                        maximum=600)
# Longer than clients keep an idle connection (httpx: 5 s) and than load balancers do (most:
# 60 s), so the client closes it first: a server that closes it (gunicorn's default: after 2 s)
# as the client sends its next request on it fails that request (B9's ReadErrors).
GOVERNOR_KEEP_ALIVE_SECONDS = env_int("GOVERNOR_KEEP_ALIVE_SECONDS", 75, minimum=1,
                                      maximum=3600)
GOVERNOR_MAX_CONNECTIONS = env_int("GOVERNOR_MAX_CONNECTIONS", 4096, minimum=16,
                                   maximum=1_000_000)
# One token holds at most this many long polls (`?wait=`) at once.
GOVERNOR_MAX_WAITS_PER_TOKEN = env_int("GOVERNOR_MAX_WAITS_PER_TOKEN", 4, minimum=1,
                                       maximum=1000)
# A signed-in person holds at most this many live page parts waiting at once (each open inbox or
# timeline holds one). Below 6: a browser opens at most 6 connections to one server over
# HTTP/1.1, and waits holding them all would stall the person's next click. Beyond it a page
# re-reads every LIVE_FALLBACK_SECONDS instead (governor/lib/live.py).
GOVERNOR_MAX_WAITS_PER_USER = env_int("GOVERNOR_MAX_WAITS_PER_USER", 4, minimum=1, maximum=100)

BROKER_URL, BROKER_REASON = broker_choice()
# A long poll re-reads at least this often, woken or not (governor.lib.notify): what a lost
# wake-up can cost. Without Redis only waiters in the committing process are woken. With it a
# wake-up is lost only when a publish fails while the subscribers stay connected (a subscriber
# that reconnects wakes all its waiters), and each re-read costs a web process ~3 ms: 1,000 idle
# polls re-reading every 10 s took 15 % of this 2-CPU machine (B9), hence 30 s.
GOVERNOR_WAIT_RECHECK_MS = env_int(
    "GOVERNOR_WAIT_RECHECK_MS", 30_000 if BROKER_URL.startswith("redis") else 250,
    minimum=10, maximum=60_000)
CELERY_BROKER_URL = BROKER_URL
if BROKER_URL.startswith("filesystem://"):
    BROKER_DIR = VAR_DIR / "broker"  # its folders are created at start-up
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
else:
    # Above the longest profile timeout (15 min), so a slow run is not redelivered mid-run.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}

EMAIL_BACKEND = os.environ.get(
    "EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend"
)
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "governor@localhost")
# With EMAIL_BACKEND=django.core.mail.backends.smtp.EmailBackend (docs/operations.md).
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "25"))
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = int(os.environ.get("EMAIL_TIMEOUT", "10"))

# Production behind TLS: GOVERNOR_HTTPS=1 turns on every transport-security setting.
HTTPS = env_bool("GOVERNOR_HTTPS", False)
SESSION_COOKIE_SECURE = HTTPS
CSRF_COOKIE_SECURE = HTTPS
SECURE_SSL_REDIRECT = HTTPS
SECURE_REDIRECT_EXEMPT = [r"^(healthz|readyz)$"]  # a load balancer's probe on the plain port
SECURE_HSTS_SECONDS = 31536000 if HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = HTTPS
SECURE_HSTS_PRELOAD = HTTPS
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if HTTPS else None
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True

def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = os.environ.get(name, "").strip()
    value = raw.lower() if name != "LOG_LEVEL" else raw.upper()
    if not raw:
        return default
    if value not in choices:
        raise ImproperlyConfigured(f"{name}={raw!r}: expected one of {', '.join(choices)}")
    return value


# Logs (docs/operations.md, "Logs"): one line per record on standard error, JSON objects with
# GOVERNOR_LOG_FORMAT=json, `key=value` text otherwise; LOG_LEVEL for every logger. Failed logins
# are logged with the user name and address given unless GOVERNOR_LOG_MASK_LOGINS=1.
LOG_LEVEL = env_choice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"))
GOVERNOR_LOG_FORMAT = env_choice("GOVERNOR_LOG_FORMAT", "text", ("json", "text"))
GOVERNOR_LOG_MASK_LOGINS = env_bool("GOVERNOR_LOG_MASK_LOGINS", False)
LOGGING_CONFIG = "governor.logs.configure"
LOGGING = {"level": LOG_LEVEL, "format": GOVERNOR_LOG_FORMAT}

# `/metrics` answers only `Authorization: Bearer <this>`; unset, it does not exist (404).
GOVERNOR_METRICS_TOKEN = os.environ.get("GOVERNOR_METRICS_TOKEN", "").strip()
if GOVERNOR_METRICS_TOKEN and len(GOVERNOR_METRICS_TOKEN) < 16:
    raise ImproperlyConfigured("GOVERNOR_METRICS_TOKEN: at least 16 characters")

# A worker renews a running verification's lease every third of this while the sandbox runs;
# a run whose lease lapsed (its worker died) ends as an infrastructure failure, as does a run
# still queued after the queue timeout (its task message was lost, or no worker runs).
GOVERNOR_RUN_LEASE_SECONDS = env_int("GOVERNOR_RUN_LEASE_SECONDS", 15, minimum=3, maximum=600)
GOVERNOR_RUN_QUEUE_TIMEOUT_SECONDS = env_int(
    "GOVERNOR_RUN_QUEUE_TIMEOUT_SECONDS", 600, minimum=1, maximum=86_400
)
# What one workspace-write run may write in total (whole files it changes count), on a private
# overlay applied to the workspace only when the run passes (verification/overlay.py).
GOVERNOR_RUN_WRITE_BYTES = env_int("GOVERNOR_RUN_WRITE_BYTES", 1024**3, minimum=1024**2,
                                   maximum=64 * 1024**3)

# Absolute links in notifications (emails, webhooks) point here.
PUBLIC_URL = os.environ.get("GOVERNOR_PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")
# Passkeys (WebAuthn) are bound to a relying-party id, a domain name (an IP address cannot be
# one): GOVERNOR_WEBAUTHN_RP_ID, by default the host of GOVERNOR_PUBLIC_URL. Assertions must come
# from the origin of GOVERNOR_PUBLIC_URL.
WEBAUTHN_ORIGIN = f"{urlsplit(PUBLIC_URL).scheme}://{urlsplit(PUBLIC_URL).netloc}"
WEBAUTHN_RP_ID = os.environ.get("GOVERNOR_WEBAUTHN_RP_ID") or urlsplit(PUBLIC_URL).hostname or ""
CELERY_BEAT_SCHEDULE = {
    "expire-due-reviews": {"task": "reviews.tasks.expire_due_reviews", "schedule": 30.0},
    "expire-lost-runs": {"task": "verification.tasks.expire_lost_runs",
                         "schedule": GOVERNOR_RUN_LEASE_SECONDS / 3},
}

# rules §11: the content-addressed blob store (a Django storage backend, alias
# "governor_blobs"): the filesystem under var/blobs by default, an S3-compatible store when
# GOVERNOR_BLOB_STORE=s3 (bucket, endpoint and region from GOVERNOR_S3_*; credentials from the
# usual AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY environment or instance role).
GOVERNOR_BLOB_DIR = Path(os.environ.get("GOVERNOR_BLOB_DIR") or VAR_DIR / "blobs").resolve()


def blob_storage(kind: str) -> dict[str, object]:
    if kind == "filesystem":
        return {"BACKEND": "django.core.files.storage.FileSystemStorage",
                "OPTIONS": {"location": str(GOVERNOR_BLOB_DIR), "allow_overwrite": True,
                            "file_permissions_mode": 0o600,
                            "directory_permissions_mode": 0o700}}
    if kind == "s3":
        bucket = os.environ.get("GOVERNOR_S3_BUCKET", "").strip()
        if not bucket:
            raise ImproperlyConfigured("GOVERNOR_BLOB_STORE=s3 needs GOVERNOR_S3_BUCKET")
        return {"BACKEND": "governor.s3_storage.BlobS3Storage",
                "OPTIONS": {"bucket_name": bucket,
                            "endpoint_url": os.environ.get("GOVERNOR_S3_ENDPOINT_URL") or None,
                            "region_name": os.environ.get("GOVERNOR_S3_REGION") or None,
                            "location": os.environ.get("GOVERNOR_S3_PREFIX", "").strip("/"),
                            "file_overwrite": True, "default_acl": None}}
    raise ImproperlyConfigured(f"GOVERNOR_BLOB_STORE={kind!r}: expected filesystem or s3")


STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "governor_blobs": blob_storage(os.environ.get("GOVERNOR_BLOB_STORE", "filesystem").strip()),
}
# One blob's bytes at most (an upload over it answers 413), and how long a blob no kept tree
# references survives before garbage collection (uploads of a snapshot in progress live on it).
GOVERNOR_MAX_BLOB_BYTES = env_int("GOVERNOR_MAX_BLOB_BYTES", 64 * 1024**2, minimum=1024,
                                  maximum=5 * 1024**3)
# `POST /blobs` (many blobs in one body): its body's bytes and blobs at most (413 above).
GOVERNOR_MAX_BLOB_BATCH_BYTES = env_int("GOVERNOR_MAX_BLOB_BATCH_BYTES", 32 * 1024**2,
                                        minimum=1024, maximum=1024**3)
GOVERNOR_MAX_BLOB_BATCH_BLOBS = env_int("GOVERNOR_MAX_BLOB_BATCH_BLOBS", 5000, minimum=1,
                                        maximum=100_000)
# A worker's blob cache (var/blob-cache/): above this many bytes, the least recently used blobs
# no materialised tree links are evicted after each materialisation.
GOVERNOR_BLOB_CACHE_BYTES = env_int("GOVERNOR_BLOB_CACHE_BYTES", 2 * 1024**3, minimum=0,
                                    maximum=1024**4)
GOVERNOR_BLOB_GRACE_SECONDS = env_int("GOVERNOR_BLOB_GRACE_SECONDS", 24 * 3600, minimum=60,
                                      maximum=90 * 24 * 3600)
CELERY_BEAT_SCHEDULE["collect-blobs"] = {"task": "governor.tasks.collect_blobs",
                                         "schedule": 3600.0}
# Outcome contracts: the periodic task finds due observations this often (each contract is
# observed every `observe_every_ms` of its profile); an operator's directory of metric exports
# that every probe sees read-only at /outcome-data (unset: none).
GOVERNOR_OUTCOME_TICK_SECONDS = env_int("GOVERNOR_OUTCOME_TICK_SECONDS", 30, minimum=1,
                                        maximum=3600)
GOVERNOR_OUTCOME_DATA_DIR = os.environ.get("GOVERNOR_OUTCOME_DATA_DIR", "").strip() or None
if GOVERNOR_OUTCOME_DATA_DIR is not None and not os.path.isabs(GOVERNOR_OUTCOME_DATA_DIR):
    raise ImproperlyConfigured("GOVERNOR_OUTCOME_DATA_DIR must be an absolute path")
CELERY_BEAT_SCHEDULE["observe-due-outcomes"] = {
    "task": "verification.tasks.observe_due_outcomes",
    "schedule": float(GOVERNOR_OUTCOME_TICK_SECONDS)}
CELERY_BEAT_SCHEDULE["purge-abandoned-imports"] = {
    "task": "governor.tasks.purge_abandoned_imports", "schedule": 600.0}

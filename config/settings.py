"""One settings module, read from the environment (12-factor, django-environ).

Defaults serve a local run (`make run`); with DEBUG off, unsafe defaults are refused with
ImproperlyConfigured. Bad values fail loudly at start-up, never halfway through a request.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import environ
from django.conf import global_settings
from django.core.exceptions import ImproperlyConfigured

from moderation import sizing

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()

_DEV_SECRET_KEY = "dev-only-insecure-secret-key-do-not-use-in-production"


def _positive(name: str, value: float) -> float:
    if value <= 0:
        raise ImproperlyConfigured(f"{name} must be a positive number, got {value!r}")
    return value


def _env_number(name: str, default: float, cast=float):
    try:
        return _positive(name, env(name, cast=cast, default=default))
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a number, got {env.str(name)!r}") from exc


DEBUG = env.bool("DEBUG", default=True)

SECRET_KEY = env.str("SECRET_KEY", default=_DEV_SECRET_KEY)
if not DEBUG and (SECRET_KEY == _DEV_SECRET_KEY or len(SECRET_KEY) < 50):
    raise ImproperlyConfigured(
        "SECRET_KEY must be set to a random value of 50+ characters when DEBUG is off"
    )

ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"] if DEBUG else [])
if not DEBUG and not ALLOWED_HOSTS:
    raise ImproperlyConfigured("ALLOWED_HOSTS must be set when DEBUG is off")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_fsm",
    # Before django_q: its `qcluster` command is moderation's (a cluster that survives a dead process).
    "moderation",
    "django_q",
    "simple_history",
    "axes",
    "audit",
    "callbacks",
    "lab",  # tools: the race lab and the provider simulator (their commands)
]

MIDDLEWARE = [
    "audit.middleware.RequestIdMiddleware",
    "moderation.api.middleware.ApiErrorMiddleware",  # first: even SecurityMiddleware's errors become JSON
    "django.middleware.security.SecurityMiddleware",
    # The admin's CSS and JS, served by the application server itself (gunicorn, no DEBUG).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Django's messages and simple-history's request, for the admin: /api/ requests skip them.
    "moderation.api.middleware.SiteMessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "moderation.admin.csp.AdminCspMiddleware",  # every admin page's Content-Security-Policy
    "moderation.api.middleware.site_history_middleware",
    "axes.middleware.AxesMiddleware",  # a locked-out sign-in's page (audit/login_throttle.py)
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

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
    },
]

# --- Database: PostgreSQL only (row locks and SKIP LOCKED are part of the design) -------------
if "DATABASE_URL" not in env.ENVIRON:
    from config.embedded_db import database_url

    env.ENVIRON["DATABASE_URL"] = database_url()
DATABASES = {"default": env.db_url("DATABASE_URL")}
if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    raise ImproperlyConfigured("DATABASE_URL must point at PostgreSQL (postgres://...)")
# Persistent connections in production: opening one per request nearly halved callback
# throughput (bench/ingest.py). Development (DEBUG) keeps Django's default, a connection per
# request; set CONN_MAX_AGE to choose either way.
DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=0 if DEBUG else 60))
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# A database that stops answering must not hang a request (or a probe) for minutes.
DATABASES["default"].setdefault("OPTIONS", {}).setdefault("connect_timeout", env.int("DB_CONNECT_TIMEOUT_S", default=5))
# Behind PgBouncer in transaction pooling (docs/operations.md, "PgBouncer"), consecutive
# transactions of one connection may run on different server connections. What must hold:
# no server-side cursors (a WITH HOLD cursor outlives its transaction), no prepared statements
# (DB_PREPARE_THRESHOLD below: off there, and refused if set), and no
# session state (the code sets timeouts with SET LOCAL and takes advisory locks per
# transaction only).
DB_POOL_MODE = env.str("DB_POOL_MODE", default="")
# Prepared statements (psycopg 3): a statement run DB_PREPARE_THRESHOLD times on a connection is
# prepared there, then only bound and executed: no parse and plan per run (measured: about a
# fifth less PostgreSQL CPU per review). Needs server-side parameter binding (Django's
# `server_side_binding`). Default 5 with direct connections; "off" turns it off; behind PgBouncer
# in transaction pooling it stays off (a prepared statement lives on one server connection).
# Not 0: that prepares every statement once seen, and migrations' multi-statement SQL cannot be.
_prepare = env.str("DB_PREPARE_THRESHOLD", default="off" if DB_POOL_MODE == "transaction" else "5")
if _prepare != "off":
    if not _prepare.isdigit() or int(_prepare) < 1:
        raise ImproperlyConfigured(f"DB_PREPARE_THRESHOLD must be a whole number from 1, or off; got {_prepare!r}")
    DATABASES["default"]["OPTIONS"].update(server_side_binding=True, prepare_threshold=int(_prepare))
if DB_POOL_MODE not in ("", "transaction"):
    raise ImproperlyConfigured(f"DB_POOL_MODE must be empty (direct) or 'transaction' (PgBouncer), got {DB_POOL_MODE!r}")
if DB_POOL_MODE == "transaction":
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
    if DATABASES["default"]["OPTIONS"].get("prepare_threshold") is not None:
        raise ImproperlyConfigured(
            "prepare_threshold (DB_PREPARE_THRESHOLD) must stay unset behind PgBouncer in transaction pooling"
        )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Sign-in throttling (django-axes; audit/login_throttle.py, docs/operations.md): by account and
# by address, each on its own, counted in PostgreSQL (shared by every web worker). Its backend
# comes first: a locked account or address is refused before any password is checked.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
LOGIN_FAILURE_LIMIT = int(_env_number("LOGIN_FAILURE_LIMIT", 10, int))
LOGIN_COOLOFF_MIN = _env_number("LOGIN_COOLOFF_MIN", 15.0)
AXES_HANDLER = "audit.login_throttle.LoginThrottle"
AXES_FAILURE_LIMIT = LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=LOGIN_COOLOFF_MIN)
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True  # (that account's failures from that address only: LoginThrottle)
AXES_ENABLE_ACCESS_FAILURE_LOG = True  # a row for every failure, for the admin
AXES_CLIENT_IP_CALLABLE = "audit.login_throttle.client_address"
AXES_LOCKOUT_CALLABLE = "audit.login_throttle.locked_response"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"  # `collectstatic` (run_platform runs it) fills it
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Compressed copies beside the originals; no manifest, so a missing collectstatic never
    # turns a page into a 500, it only leaves the styles out.
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = DEBUG  # development: served straight from the apps, no collectstatic

# --- REST API --------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["moderation.api.authentication.BearerTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": ["moderation.api.parsers.SafeJSONParser"],
    # JSON only, whatever Accept says (moderation/api/negotiation.py): no browsable HTML API.
    "DEFAULT_RENDERER_CLASSES": ["moderation.api.renderers.FastJSONRenderer"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "moderation.api.negotiation.JsonWhateverAccept",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.CursorPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "moderation.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_THROTTLE_CLASSES": ["moderation.web.throttles.ClientRateThrottle"],
    # Proxies in front that append to X-Forwarded-For: without this, a caller could pick its own
    # address for the per-address limits. 0: use the socket's address.
    "NUM_PROXIES": env.int("NUM_PROXIES", default=0),
    "UNAUTHENTICATED_USER": None,
}

# How long an Idempotency-Key's first response is kept for replay.
IDEMPOTENCY_TTL_H = _env_number("IDEMPOTENCY_TTL_H", 24.0)

# Rate limits ("N/s", "N/min", "N/hour", "N/day"): per API client, and per provider and address
# on the callback endpoint. Counted in PostgreSQL, so shared by every web worker on every machine
# (moderation/web/throttles.py).
THROTTLE_CLIENT_RATE = env.str("THROTTLE_CLIENT_RATE", default="1200/min")
THROTTLE_CALLBACK_RATE = env.str("THROTTLE_CALLBACK_RATE", default="12000/min")
THROTTLE_ADDRESS_RATE = env.str("THROTTLE_ADDRESS_RATE", default="120/min")  # schema and docs
# A client already refused, sending again before its wait is over, gets its 429 when it could have
# retried, held at most this long (0: at once): a flood that sends again the moment it is answered
# then sends one request a connection per hold (config/asgi.py, RefusedFromMemory).
THROTTLE_REFUSAL_HOLD_S = env.float("THROTTLE_REFUSAL_HOLD_S", default=1.0)
if not 0 <= THROTTLE_REFUSAL_HOLD_S <= 60:
    raise ImproperlyConfigured(f"THROTTLE_REFUSAL_HOLD_S must be 0 to 60, got {THROTTLE_REFUSAL_HOLD_S}")
# A caller's count untouched this long is pruned: at least two of the longest period (a day),
# after which it counts nothing anyway.
RATE_COUNT_RETENTION_H = _env_number("RATE_COUNT_RETENTION_H", 48.0)
if RATE_COUNT_RETENTION_H < 48:
    raise ImproperlyConfigured("RATE_COUNT_RETENTION_H must be at least 48 (two days: a daily rate's two windows)")

# /metrics is for staff sessions, or for a scraper sending `Authorization: Bearer <METRICS_TOKEN>`.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
METRICS_CACHE_S = _env_number("METRICS_CACHE_S", 15.0)  # scrapes within this share one computation
METRICS_STATEMENT_TIMEOUT_MS = int(_env_number("METRICS_STATEMENT_TIMEOUT_MS", 10_000, int))

# The largest API request body accepted (413 above, without reading it).
API_MAX_BODY_BYTES = int(_env_number("API_MAX_BODY_BYTES", 1024 * 1024, int))
# Images (docs/design.md, "Images and hash banks"): the largest image taken, as image_base64 or
# fetched from media_url; the most pixels decoded (a decompression bomb is refused unread); how
# long a fetch may take, and how many redirects it follows (each re-checked by the outbound
# guard, moderation/netguard.py).
MEDIA_MAX_BYTES = int(_env_number("MEDIA_MAX_BYTES", 10 * 1024 * 1024, int))
MEDIA_MAX_PIXELS = int(_env_number("MEDIA_MAX_PIXELS", 40_000_000, int))
# What decoding an image may cost (docs/images.md, "What decoding costs"): the memory one decode
# may take; pixels a byte of the file, for images over MEDIA_RATIO_FROM_PIXELS (a bomb declares
# hundreds); decodes at once in a process (the others wait).
MEDIA_DECODE_MAX_BYTES = int(_env_number("MEDIA_DECODE_MAX_BYTES", 256 * 1024 * 1024, int))
MEDIA_MAX_PIXELS_PER_BYTE = int(_env_number("MEDIA_MAX_PIXELS_PER_BYTE", 64, int))
MEDIA_RATIO_FROM_PIXELS = int(_env_number("MEDIA_RATIO_FROM_PIXELS", 10_000_000, int))
MEDIA_DECODE_CONCURRENCY = int(_env_number("MEDIA_DECODE_CONCURRENCY", 1, int))
# How much lower the decodes' CPU priority is than their process's (nice, on Linux; 0: the same):
# on a machine the web workers share, a flood of images must not slow other clients' requests.
MEDIA_DECODE_NICE = env.int("MEDIA_DECODE_NICE", default=10)
if not 0 <= MEDIA_DECODE_NICE <= 19:
    raise ImproperlyConfigured(f"MEDIA_DECODE_NICE must be 0 to 19, got {MEDIA_DECODE_NICE}")
MEDIA_FETCH_TIMEOUT_S = _env_number("MEDIA_FETCH_TIMEOUT_S", 10.0)
MEDIA_FETCH_MAX_REDIRECTS = int(_env_number("MEDIA_FETCH_MAX_REDIRECTS", 3, int))
# A submission may carry an image as base64 (4 bytes for every 3) beside its other fields.
SUBMISSION_MAX_BODY_BYTES = max(API_MAX_BODY_BYTES, (MEDIA_MAX_BYTES + 2) // 3 * 4 + 64 * 1024)
# Django reads no body over this (RequestDataTooBig, a 500 in a view): at least a submission's
# limit, which the API's middleware enforces per path before any body is read.
DATA_UPLOAD_MAX_MEMORY_SIZE = max(global_settings.DATA_UPLOAD_MAX_MEMORY_SIZE, SUBMISSION_MAX_BODY_BYTES)

SPECTACULAR_SETTINGS = {
    "TITLE": "Moderation API",
    "DESCRIPTION": (
        "Submit content for moderation and read decisions. Every endpoint except the provider "
        "callback takes `Authorization: Bearer <token>` (from `manage.py create_api_client`). "
        'Errors are JSON: `{"error": "<code>", "detail": "...", "fields": {...}}`.'
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # One named enum per choice set, shared by every field and parameter that uses it.
    "ENUM_NAME_OVERRIDES": {
        "ReviewStatusEnum": "moderation.models.ReviewStatus",
        "AppealStatusEnum": "moderation.models.AppealStatus",
        "DecisionSourceEnum": "moderation.models.DecisionSource",
        "AccountActionEnum": "moderation.models.ActionKind",
        "RestrictionActionEnum": "moderation.models.RESTRICTIVE_ACTIONS",
        "AccountAppealStatusEnum": "moderation.models.AccountAppealStatus",
        "ReportKindEnum": "moderation.models.ReportKind",
        "KindEnum": "moderation.observability.timeline.KINDS",  # the timeline entry kind, named before reports had one
    },
    # Served from the installed package: no CDN needed.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "moderation.api.schema.tighten_submission_components",
        "moderation.api.schema.complete_operations",
    ],
}

# --- Moderation pipeline: every retrying layer is configured here, in one place -------------
PROVIDER_CHOICES = ("local", "openai", "webhook", "llm")
MODERATION_PROVIDER = env.str("MODERATION_PROVIDER", default="local")
if MODERATION_PROVIDER not in PROVIDER_CHOICES:
    raise ImproperlyConfigured(
        f"MODERATION_PROVIDER must be one of {', '.join(PROVIDER_CHOICES)}, got {MODERATION_PROVIDER!r}"
    )
PROVIDER_URL = env.str("PROVIDER_URL", default="")
PROVIDER_API_KEY = env.str("PROVIDER_API_KEY", default="")
PROVIDER_WEBHOOK_SECRET = env.str("PROVIDER_WEBHOOK_SECRET", default="")
PROVIDER_TIMEOUT_S = _env_number("PROVIDER_TIMEOUT_S", 10.0)
PROVIDER_CONNECT_TIMEOUT_S = _env_number("PROVIDER_CONNECT_TIMEOUT_S", 3.0)
# Re-tries of a failed *connection* only (the request never left): safe without any key.
PROVIDER_HTTP_RETRIES = int(env.int("PROVIDER_HTTP_RETRIES", default=1))
# The model an OpenAI-compatible endpoint is asked for: the moderation endpoint's by default; the
# `llm` provider's chat model has no default (a local server serves whatever was pulled).
PROVIDER_MODEL = env.str("PROVIDER_MODEL", default="" if MODERATION_PROVIDER == "llm" else "omni-moderation-latest")
# The content kinds the webhook provider judges (moderation/providers/webhook.py). A generic
# provider may judge no images: then no image is sent to it, and the banks and the policy's
# image_fallback decide them. Audio is never sent: the protocol would carry its URL, and no
# provider fetches a client's URL.
PROVIDER_KINDS_CARRIED = ("text", "metadata", "image")
PROVIDER_KINDS = tuple(kind.strip() for kind in env.list("PROVIDER_KINDS", default=["text", "metadata", "image"])
                       if kind.strip())
if not PROVIDER_KINDS or set(PROVIDER_KINDS) - set(PROVIDER_KINDS_CARRIED):
    raise ImproperlyConfigured(
        f"PROVIDER_KINDS may list only {', '.join(PROVIDER_KINDS_CARRIED)} (at least one), got {', '.join(PROVIDER_KINDS)!r}"
    )
# Languages the detector tells apart (ISO 639-1; moderation.text.language): the model's and those the
# rules name; a policy may name only these. About 25 MiB each in the worker (3 MiB in
# low-accuracy mode, which misreads short texts: see moderation/text/language.py).
MODERATION_LANGUAGES = env.list("MODERATION_LANGUAGES", default=["en", "id", "ms"])
MODERATION_LANGUAGE_LOW_ACCURACY = env.bool("MODERATION_LANGUAGE_LOW_ACCURACY", default=False)
# Where providers send callbacks. By default the address `make run` serves (its PORT).
PORT = int(_env_number("PORT", 8000, int))
PUBLIC_BASE_URL = env.str("PUBLIC_BASE_URL", default=f"http://127.0.0.1:{PORT}").rstrip("/")
if urlsplit(PUBLIC_BASE_URL).scheme not in ("http", "https") or not urlsplit(PUBLIC_BASE_URL).netloc:
    raise ImproperlyConfigured(f"PUBLIC_BASE_URL must be an http(s) URL, got {PUBLIC_BASE_URL!r}")
if MODERATION_PROVIDER in ("openai", "webhook", "llm") and not PROVIDER_URL:
    raise ImproperlyConfigured(f"PROVIDER_URL is required with MODERATION_PROVIDER={MODERATION_PROVIDER}")
if MODERATION_PROVIDER == "llm" and not PROVIDER_MODEL:
    raise ImproperlyConfigured("PROVIDER_MODEL is required with MODERATION_PROVIDER=llm: the chat model's name "
                               "as the server knows it (e.g. gpt-oss-safeguard:20b on Ollama)")

# Callbacks: the secrets that may sign them (several, separated by spaces or commas, while a
# secret is being rotated), the largest body accepted, and how old a signature may be.
CALLBACK_SECRETS = {"webhook": [s for s in PROVIDER_WEBHOOK_SECRET.replace(",", " ").split() if s]}
for _secret in CALLBACK_SECRETS["webhook"]:
    if not _secret.startswith("whsec_"):
        raise ImproperlyConfigured("PROVIDER_WEBHOOK_SECRET must be whsec_<base64> secrets (Standard Webhooks)")
if MODERATION_PROVIDER == "webhook" and not CALLBACK_SECRETS["webhook"]:
    # Without a secret every callback would be refused (401) and every review would wait for
    # reconcile: refuse to start instead.
    raise ImproperlyConfigured(
        "MODERATION_PROVIDER=webhook needs PROVIDER_WEBHOOK_SECRET, the secret the provider signs "
        "callbacks with. Make one with\n  python -c \"import base64, secrets; "
        "print('whsec_' + base64.b64encode(secrets.token_bytes(32)).decode())\"\n"
        "and give the same value to the provider (the simulator: run_provider_simulator --secret)."
    )
CALLBACK_MAX_BYTES = int(_env_number("CALLBACK_MAX_BYTES", 256 * 1024, int))
# The web server (config/asgi.py; docs/operations.md, "Slow clients"): a request's head and then
# its whole body must each arrive within these, or the connection is closed (408 for a body);
# no body is read past the largest that any endpoint accepts (413).
REQUEST_HEADER_TIMEOUT_S = _env_number("REQUEST_HEADER_TIMEOUT_S", 10.0)
if REQUEST_HEADER_TIMEOUT_S > 60:  # granian's bound (--http1-header-read-timeout)
    raise ImproperlyConfigured(f"REQUEST_HEADER_TIMEOUT_S must be at most 60 seconds, got {REQUEST_HEADER_TIMEOUT_S:g}")
REQUEST_BODY_TIMEOUT_S = _env_number("REQUEST_BODY_TIMEOUT_S", 10.0)
# A web worker whose request has run longer than this is ended and replaced, as gunicorn's
# --timeout did: one hung request must not hold a worker for good.
WEB_WORKER_TIMEOUT_S = _env_number("WEB_WORKER_TIMEOUT_S", 60.0)
# granian's access log, one line per request (off: it cost the web tier about a tenth of its
# throughput, docs/benchmarks.md "The platform as shipped"; the request id and the outcome of
# what matters are logged by the platform's own records).
WEB_ACCESS_LOG = env.bool("WEB_ACCESS_LOG", default=False)
# The largest body of a signed-in admin page's form (config/asgi.py): Django's 2.5 MB of form
# fields and a term list's file (2 MiB, moderation/admin/term_lists.py) beside them.
ADMIN_MAX_BODY_BYTES = int(_env_number("ADMIN_MAX_BODY_BYTES", 5 * 1024 * 1024, int))
# The largest body any view reads: the web server reads no more of one (413), and reads up to this
# much of a refused one to drop it, so that a client sending its whole body first sees the 413.
REQUEST_MAX_BODY_BYTES = max(SUBMISSION_MAX_BODY_BYTES, CALLBACK_MAX_BYTES, ADMIN_MAX_BODY_BYTES)
# standardwebhooks refuses timestamps more than 5 minutes off; this can only be stricter.
CALLBACK_TOLERANCE_S = min(_env_number("CALLBACK_TOLERANCE_S", 300.0), 300.0)
# Retention (`manage.py prune`, and the daily scheduled prune; docs/operations.md, "Retention").
# Processed inbox rows are kept past the provider's re-delivery horizon, or a late duplicate
# would be taken for a new event: never less than a week. Callbacks never processed, and those a
# decision cites, are never pruned; neither are transitions nor decisions.
CALLBACK_RETENTION_DAYS = int(_env_number("CALLBACK_RETENTION_DAYS", 30, int))
if CALLBACK_RETENTION_DAYS < 7:
    raise ImproperlyConfigured("CALLBACK_RETENTION_DAYS must be at least 7: providers re-deliver callbacks for days")
Q_RESULT_RETENTION_DAYS = _env_number("Q_RESULT_RETENTION_DAYS", 7.0)  # django-q2's task results
NOTIFICATION_ATTEMPT_RETENTION_DAYS = _env_number("NOTIFICATION_ATTEMPT_RETENTION_DAYS", 30.0)  # of delivered ones
PIPELINE_EVENT_RETENTION_DAYS = _env_number("PIPELINE_EVENT_RETENTION_DAYS", 90.0)
# Anomaly alarms (docs/quality.md, "Anomaly alarms"): a signal of the last hour (the rejection
# rate, the share sent to humans, a rule's match rate) out of its band around its 7-day baseline.
ANOMALY_BAND = _env_number("ANOMALY_BAND", 0.5)  # relative: 0.5 = 50% above or below the baseline
ANOMALY_MIN_DELTA = _env_number("ANOMALY_MIN_DELTA", 0.02)  # and at least this much, absolute
ANOMALY_MIN_DECISIONS = int(_env_number("ANOMALY_MIN_DECISIONS", 100, int))  # in the hour and in the baseline
# The quality minute reads a decision once it is this old (docs/quality.md): ids are taken at
# insert, and a decision whose transaction commits later than a higher id's must not be passed.
QUALITY_SETTLE_S = _env_number("QUALITY_SETTLE_S", 60.0)
# Provider answers kept for backtests and shadow runs (docs/quality.md): asked again after this.
PROVIDER_ANSWER_RETENTION_DAYS = _env_number("PROVIDER_ANSWER_RETENTION_DAYS", 30.0)
# Image and audio bytes, counted from the review's final decision; their hashes stay.
MEDIA_RETENTION_DAYS = _env_number("MEDIA_RETENTION_DAYS", 30.0)
# (Expired idempotency records: IDEMPOTENCY_TTL_H, above.)
PRUNE_BATCH = int(_env_number("PRUNE_BATCH", 5000, int))  # rows per delete (each its own short transaction)

# Traces (audit/tracing.py): off unless an OTLP endpoint is given (or OTEL_TRACING=1 with the
# SDK's own OTEL_* variables). OTEL_SERVICE_NAME names this process in the traces.
OTEL_TRACING = env.bool("OTEL_TRACING", default=bool(env.str("OTEL_EXPORTER_OTLP_ENDPOINT", default="")))
OTEL_SERVICE_NAME = env.str("OTEL_SERVICE_NAME", default="moderation")

# Provider attempts of one logical operation (one idempotency key), with exponential backoff.
MODERATION_MAX_ATTEMPTS = int(_env_number("MODERATION_MAX_ATTEMPTS", 3, int))
MODERATION_RETRY_BACKOFF_S = _env_number("MODERATION_RETRY_BACKOFF_S", 5.0)
MODERATION_RETRY_BACKOFF_MAX_S = _env_number("MODERATION_RETRY_BACKOFF_MAX_S", 300.0)
# Pending reviews one moderate_review job claims at once (docs/design.md, "Batches"): its own and
# up to N-1 others, claimed in one transaction, judged by one model call when the provider can
# judge many inputs at once (the local model), each finalized under its own lock. 1: one review
# per job, as before batching. Bounded: a batch holds its rows' locks for one claim transaction.
MODERATION_BATCH_SIZE_MAX = 256
try:
    MODERATION_BATCH_SIZE = env.int("MODERATION_BATCH_SIZE", default=16)
except ValueError as exc:
    raise ImproperlyConfigured(
        f"MODERATION_BATCH_SIZE must be a whole number from 1 to {MODERATION_BATCH_SIZE_MAX}, "
        f"got {env.str('MODERATION_BATCH_SIZE')!r}"
    ) from exc
if not 1 <= MODERATION_BATCH_SIZE <= MODERATION_BATCH_SIZE_MAX:
    raise ImproperlyConfigured(
        f"MODERATION_BATCH_SIZE must be a whole number from 1 to {MODERATION_BATCH_SIZE_MAX}, got {MODERATION_BATCH_SIZE}"
    )
# Superseding operations (new key) that reconcile may start before escalating to a human.
MODERATION_MAX_SUPERSEDES = int(env.int("MODERATION_MAX_SUPERSEDES", default=2))
# How long the provider usually takes to answer (a callback after a 202). The silence deadline
# is derived from it: an operation with no progress for MODERATION_STUCK_AFTER_S is stuck, and
# reconcile asks the provider about it (docs/design.md, "Provider status") before superseding.
# Asking is cheap, so the deadline can be short; it never undercuts one attempt's own timeouts.
PROVIDER_EXPECTED_LATENCY_S = _env_number("PROVIDER_EXPECTED_LATENCY_S", 5.0)
MODERATION_STUCK_AFTER_S = _env_number(
    "MODERATION_STUCK_AFTER_S",
    # (the second term: one attempt's worst case, every connection try then writing and
    # reading, as moderation.checks counts it, plus 5 s)
    max(4 * PROVIDER_EXPECTED_LATENCY_S,
        PROVIDER_CONNECT_TIMEOUT_S * (1 + PROVIDER_HTTP_RETRIES) + 2 * PROVIDER_TIMEOUT_S + 5),
)
# A pending review whose job has not started for this long is presumed lost and enqueued again
# (a job queue backlog is not a loss, so this stays generous).
MODERATION_LOST_JOB_AFTER_S = _env_number("MODERATION_LOST_JOB_AFTER_S", 300.0)
# How often the sweeper (due retries, stuck reviews) runs, in minutes (django-q2's granularity).
# Two schedules half a period apart make it run twice per period (django-q2's scheduler looks
# every 30 s), so a silent operation is noticed within seconds of its deadline, not minutes.
MODERATION_SWEEP_EVERY_MIN = int(_env_number("MODERATION_SWEEP_EVERY_MIN", 1, int))

# Circuit breaker, per provider: over the last BREAKER_WINDOW_S, at least BREAKER_MIN_CALLS
# attempts of which BREAKER_FAILURE_RATIO failed (timeouts, 5xx, malformed) open it; after
# BREAKER_COOLDOWN_S one trial call decides. BREAKER_MAX_WAIT_S > 0 hands reviews that waited
# that long in pending to a human (0: they wait for the provider).
BREAKER_WINDOW_S = _env_number("BREAKER_WINDOW_S", 60.0)
BREAKER_MIN_CALLS = int(_env_number("BREAKER_MIN_CALLS", 10, int))
BREAKER_FAILURE_RATIO = _env_number("BREAKER_FAILURE_RATIO", 0.5)
BREAKER_COOLDOWN_S = _env_number("BREAKER_COOLDOWN_S", 30.0)
BREAKER_MAX_WAIT_S = env.float("BREAKER_MAX_WAIT_S", default=0.0)
if not 0 < BREAKER_FAILURE_RATIO <= 1:
    raise ImproperlyConfigured("BREAKER_FAILURE_RATIO must lie in (0, 1]")

# Decision notifications to clients (the outbox): attempts, backoff, timeout of one POST.
# The defaults retry for about 3.4 hours (docs/configuration.md); `resend_notifications` sends failed ones again.
NOTIFY_MAX_ATTEMPTS = int(_env_number("NOTIFY_MAX_ATTEMPTS", 12, int))
NOTIFY_BACKOFF_S = _env_number("NOTIFY_BACKOFF_S", 10.0)
NOTIFY_BACKOFF_MAX_S = _env_number("NOTIFY_BACKOFF_MAX_S", 3600.0)
NOTIFY_TIMEOUT_S = _env_number("NOTIFY_TIMEOUT_S", 5.0)  # each connect, write or read
# One attempt as a whole, however the receiver dribbles its answer (docs/operations.md).
NOTIFY_DEADLINE_S = _env_number("NOTIFY_DEADLINE_S", 15.0)
# Per client: attempts in flight at once (held across processes), and its own circuit breaker:
# NOTIFY_BREAKER_FAILURES failed attempts in a row pause that client alone for
# NOTIFY_BREAKER_COOLDOWN_S, then one trial attempt decides.
NOTIFY_CLIENT_CONCURRENCY = int(_env_number("NOTIFY_CLIENT_CONCURRENCY", 2, int))
NOTIFY_BREAKER_FAILURES = int(_env_number("NOTIFY_BREAKER_FAILURES", 5, int))
NOTIFY_BREAKER_COOLDOWN_S = _env_number("NOTIFY_BREAKER_COOLDOWN_S", 60.0)
# A client whose last attempt took longer than NOTIFY_SLOW_AFTER_S (or has one in flight that
# long), or that has made none yet, is slow: the slow clients together hold at most
# NOTIFY_SLOW_SHARE of NOTIFY_WORKERS (at least one), so a client proven fast always finds a free
# worker (docs/operations.md, "One client cannot stall the others"). 1: no reservation.
NOTIFY_SLOW_AFTER_S = _env_number("NOTIFY_SLOW_AFTER_S", 5.0)
NOTIFY_SLOW_SHARE = _env_number("NOTIFY_SLOW_SHARE", 0.5)
if NOTIFY_SLOW_SHARE > 1:
    raise ImproperlyConfigured("NOTIFY_SLOW_SHARE is a share of NOTIFY_WORKERS: at most 1")
if NOTIFY_SLOW_AFTER_S >= NOTIFY_DEADLINE_S:
    raise ImproperlyConfigured("NOTIFY_SLOW_AFTER_S must be below NOTIFY_DEADLINE_S, or no client is ever slow")
# Worker counts: derived from this machine's cores and memory (moderation/sizing.py, docs/operations.md
# "Sizing"), each overridden by its variable. Notifications run on their own django-q2 cluster
# (NOTIFY_WORKERS workers), never on the moderation workers: a client's slow receiver cannot delay
# any review's decision.
_SIZED = sizing.workers_for(
    sizing.machine(), slow_share=NOTIFY_SLOW_SHARE, client_concurrency=NOTIFY_CLIENT_CONCURRENCY
)
WEB_CONCURRENCY = int(_env_number("WEB_CONCURRENCY", _SIZED.web, int))  # the web server's workers
Q_WORKERS = int(_env_number("Q_WORKERS", _SIZED.moderation, int))
NOTIFY_WORKERS = int(_env_number("NOTIFY_WORKERS", _SIZED.notify, int))
# Webhook URLs may not reach loopback, private, link-local, multicast or reserved addresses,
# and need https without DEBUG (moderation/netguard.py). 1: allow them (development, tests, the
# race lab on loopback). Never in production.
WEBHOOK_ALLOW_PRIVATE = env.bool("WEBHOOK_ALLOW_PRIVATE", default=False)
# The public page of the platform's rules, linked from notices to affected users (empty: not linked).
POLICY_URL = env.str("POLICY_URL", default="")
# Who the platform is in the reports it exports to hotlines and authorities (docs/legal-holds.md).
PLATFORM_CONTACT_NAME = env.str("PLATFORM_CONTACT_NAME", default="")
PLATFORM_CONTACT_EMAIL = env.str("PLATFORM_CONTACT_EMAIL", default="")
# Statements of reasons to the EU DSA Transparency Database (docs/transparency.md): its base URL
# and API token. Unset URL: statements are built and kept, not sent. The URL goes through the
# webhooks' outbound guard (https unless DEBUG; loopback only with WEBHOOK_ALLOW_PRIVATE).
DSA_TDB_URL = env.str("DSA_TDB_URL", default="").rstrip("/")
DSA_TDB_TOKEN = env.str("DSA_TDB_TOKEN", default="")
if DSA_TDB_URL and not DSA_TDB_TOKEN:
    raise ImproperlyConfigured("DSA_TDB_URL is set without DSA_TDB_TOKEN: the database refuses every request")
DSA_TDB_TIMEOUT_S = _env_number("DSA_TDB_TIMEOUT_S", 30.0)  # one batch's POST as a whole
DSA_TDB_BACKOFF_S = _env_number("DSA_TDB_BACKOFF_S", 30.0)  # after a failed send, doubling per attempt
DSA_TDB_BACKOFF_MAX_S = _env_number("DSA_TDB_BACKOFF_MAX_S", 1800.0)

# How long a moderator's lease lasts: a review taken with "Review next" returns to its review
# queue after this long unless decided.
MODERATOR_LEASE_S = _env_number("MODERATOR_LEASE_S", 900.0)

# --- Jobs: django-q2 as an at-least-once trigger (see moderation/checks.py) --------------------
Q_TASK_TIMEOUT_S = int(_env_number("Q_TASK_TIMEOUT_S", 60, int))
REDIS_URL = env.str("REDIS_URL", default="")
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
    if REDIS_URL
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}
# Q_NAME names the job queues (several deployments may share a database or a Redis): moderation
# jobs go to Q_NAME, notifications to NOTIFY_CLUSTER, each consumed by its own cluster. Start
# the notification cluster with `Q_CLUSTER_NAME=<NOTIFY_CLUSTER> manage.py qcluster` (django-q2
# then applies ALT_CLUSTERS below); run_platform and the race lab start both.
Q_NAME = env.str("Q_NAME", default="moderation")
NOTIFY_CLUSTER = f"{Q_NAME}-notify"
if env.str("Q_CLUSTER_NAME", default="") not in ("", Q_NAME, NOTIFY_CLUSTER):
    raise ImproperlyConfigured(
        f"Q_CLUSTER_NAME selects a cluster: {Q_NAME!r} or {NOTIFY_CLUSTER!r}. Name the job queues with Q_NAME."
    )
# An attempt never outlives its deadline by much; nor a batch of statements (moderation.tasks.statements_submit).
_NOTIFY_TIMEOUT = int(max(NOTIFY_DEADLINE_S, DSA_TDB_TIMEOUT_S)) + 30
Q_CLUSTER = {
    "name": Q_NAME,
    "workers": Q_WORKERS,
    "timeout": Q_TASK_TIMEOUT_S,
    # retry is a lease counted from dequeue: keep it well past the timeout so a task that is
    # still running is never handed to a second worker.
    "retry": Q_TASK_TIMEOUT_S * 2 + 30,
    "max_attempts": 1,  # our attempt records own the retry policy, not broker redelivery
    "ack_failures": True,
    "bulk": 1,  # prefetched tasks burn their lease while they wait
    "queue_limit": Q_WORKERS,
    "catch_up": False,
    # No successful results are stored (-1; failures always are, and show in the admin). With a
    # positive limit every finished task locks and loads up to that many stored results of its
    # function (django_q.monitor.save_task): 94% of the monitor's time at 3,000 reviews. Our own
    # records say what each job did; /readyz reads the sweeper's heartbeat (moderation.Heartbeat).
    "save_limit": -1,
    "label": "Jobs",
    "poll": 0.2,
    "ALT_CLUSTERS": {
        NOTIFY_CLUSTER: {
            "workers": NOTIFY_WORKERS, "queue_limit": NOTIFY_WORKERS,
            "timeout": _NOTIFY_TIMEOUT, "retry": _NOTIFY_TIMEOUT * 2 + 30,
        },
    },
}
if REDIS_URL:
    Q_CLUSTER["redis"] = REDIS_URL
else:
    Q_CLUSTER["orm"] = "default"
    # The clusters dequeue and acknowledge in fewer round trips, with the same lease
    # (moderation/management/cluster.py, ClusterORM); enqueueing goes through moderation.jobs.
    Q_CLUSTER["broker_class"] = "moderation.management.cluster.ClusterORM"

# --- History and logging -------------------------------------------------------------------------
# History is for reading: its admin "revert" would write an old status straight into the row,
# bypassing the state machine and the transition log.
SIMPLE_HISTORY_REVERT_DISABLED = True

LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
LOG_FORMAT = env.str("LOG_FORMAT", default="text" if DEBUG else "json")
if LOG_FORMAT not in ("text", "json"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be text or json, got {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"correlation": {"()": "audit.context.CorrelationFilter"}},
    "formatters": {
        "text": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s%(correlation)s"},
        "json": {"()": "audit.logging.JsonFormatter"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT, "filters": ["correlation"]},
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        "django.db.backends": {"level": "INFO"},
        "pgserver": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},  # one INFO line per request: the attempt records say more
    },
}

if not DEBUG:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
    # Probes and scrapers speak plain HTTP to the pod.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
    # Cookies go over https only; `make run` serves plain http on 127.0.0.1 with DEBUG off and
    # turns these off (Makefile, RUN_ENV): a browser keeps no Secure cookie from plain http.
    SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=True)
    CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=True)
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True

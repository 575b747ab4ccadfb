"""Sluice settings: every knob from the environment, embedded defaults for `make run`.

Values that `make run` chooses at start-up (the bundled Redis URL, a generated secret key)
are recorded under var/ so that a second terminal's `manage.py` reaches the same services
with no extra exports.
"""

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from foundation.channel_layer import channel_layers_for
from foundation.env import env_bool, env_float, env_int, env_list, env_str, read_recorded
from gateway.drain import DEFAULT_TIMEOUT_S as DEFAULT_DRAIN_TIMEOUT_S

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("SLUICE_VAR_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", False)

_INSECURE_DEV_KEY = "insecure-dev-key-only-for-local-debugging"
SECRET_KEY = env_str("SECRET_KEY") or read_recorded(VAR_DIR / "secret_key")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Set SECRET_KEY (50+ random characters) in production, "
            "or start the platform with `make run`, which generates one under var/."
        )
    SECRET_KEY = _INSECURE_DEV_KEY
if not DEBUG and (SECRET_KEY == _INSECURE_DEV_KEY or len(SECRET_KEY) < 32):
    raise ImproperlyConfigured(
        "SECRET_KEY is the development default or shorter than 32 characters; refusing to "
        "start with DEBUG off. Generate one with: python -c 'import secrets; "
        "print(secrets.token_urlsafe(50))'"
    )

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "channels",
    "gateway.accounts",
    "gateway.usage",
    "gateway.batches",
    "caching",
    "gateway.chat",
    "bench",
    "gateway.dashboard",
    "inference",
    "scaling",
]

# The gateway serves its own static files unless a proxy or CDN in front does (SERVE_STATIC=0,
# deploy/edge/): WhiteNoise, on the full Django stack only (gateway/static_files.py).
SERVE_STATIC = env_bool("SERVE_STATIC", True)

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    *(["gateway.static_files.StaticFilesMiddleware"] if SERVE_STATIC else []),
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "gateway.urls"
ASGI_APPLICATION = "gateway.asgi.application"

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

DATABASE_URL = env_str("DATABASE_URL")
if not DATABASE_URL:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASE_URL = f"sqlite:///{VAR_DIR / 'sluice.sqlite3'}"
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file, not memory: tests start other processes that must see the same test database.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
    # `make run` runs several processes on this one file (web, scraper, autoscaler, Celery).
    # WAL lets them read while one writes; IMMEDIATE takes the write lock when a transaction
    # begins, where a deferred one that read first fails at once with "database is locked"
    # if another process wrote meanwhile (seen: the autoscaler registering the embedded
    # worker at start-up, on a busy machine); a writer waits up to 20 s for the lock, not 5.
    sqlite_options = DATABASES["default"].setdefault("OPTIONS", {})  # DATABASE_URL's win
    sqlite_options.setdefault("transaction_mode", "IMMEDIATE")
    sqlite_options.setdefault("timeout", 20)
    sqlite_options.setdefault("init_command", "PRAGMA journal_mode=WAL;")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Redis: quotas, key records, Channels layer, Celery broker. `make run` starts the bundled
# Redis 8 and records its URL; the machine's own Redis may be 7 (no vector sets), so there
# is deliberately no fallback to localhost:6379.
REDIS_URL = env_str("REDIS_URL") or read_recorded(VAR_DIR / "redis.url")
# The response caches: `make run` starts a Redis of their own with maxmemory and an eviction
# policy that can only drop cache entries (foundation/embedded_redis.py). A REDIS_URL from
# the environment is a deployment's own Redis: the caches share it unless CACHE_REDIS_URL
# is set too (never a URL recorded by some earlier `make run`).
CACHE_REDIS_URL = env_str("CACHE_REDIS_URL") or (
    REDIS_URL if env_str("REDIS_URL") else read_recorded(VAR_DIR / "cache-redis.url") or REDIS_URL
)
# The exact response cache (caching/exact.py): deterministic requests only.
CACHE_EXACT_ENABLED = env_bool("CACHE_EXACT_ENABLED", True)
CACHE_EXACT_TTL_S = env_int("CACHE_EXACT_TTL_S", 3600, minimum=1)
CACHE_EXACT_MAX_TTL_S = env_int("CACHE_EXACT_MAX_TTL_S", 7 * 24 * 3600, minimum=1)
CACHE_EXACT_MAX_ENTRY_BYTES = env_int("CACHE_EXACT_MAX_ENTRY_BYTES", 256 * 1024, minimum=1)
# The semantic cache (caching/semantic.py). These and the above are the defaults a
# CachePolicy row (admin: per team, or global) overrides.
CACHE_SEMANTIC_ENABLED = env_bool("CACHE_SEMANTIC_ENABLED", True)
CACHE_SEMANTIC_TTL_S = env_int("CACHE_SEMANTIC_TTL_S", 3600, minimum=1)
CACHE_SEMANTIC_THRESHOLD = env_float("CACHE_SEMANTIC_THRESHOLD", 0.92)
# Per cache kind and team; past it, GreedyDual-Size-Frequency eviction (cache/eviction.py).
CACHE_MEMORY_BUDGET_BYTES = env_int("CACHE_MEMORY_BUDGET_BYTES", 64 * 1024 * 1024, minimum=1024)
# Identical deterministic requests arriving while one generates share its stream.
CACHE_COALESCE_ENABLED = env_bool("CACHE_COALESCE_ENABLED", True)
# Model folders (tokenizer.json and the chat template) by served model name: prompts for
# those models are counted in their own tokens at admission (inference/prompt_tokens.py).
TOKENIZER_DIR = Path(
    env_str("TOKENIZER_DIR")
    or env_str("SLUICE_MODELS_DIR")  # where the launcher finds the embedded model
    or str(BASE_DIR / "var" / "models")
)
# Other models' prompts are counted by one of their workers (vLLM's /tokenize) at
# admission, within this timeout, else estimated (inference/worker_prompt_counts.py).
WORKER_COUNT_PROMPTS = env_bool("WORKER_COUNT_PROMPTS", True)
WORKER_COUNT_TIMEOUT_S = env_float("WORKER_COUNT_TIMEOUT_S", 0.5)
# all-MiniLM-L6-v2 exported to ONNX by `make worker` (inference/prepare_embedder.py).
EMBEDDING_MODEL_DIR = Path(
    env_str("EMBEDDING_MODEL_DIR", str(BASE_DIR / "var" / "models" / "all-minilm-l6-v2-onnx"))
)
# Short timeouts: admission must fail closed with a 503, never hang on a dead Redis.
REDIS_CONNECT_TIMEOUT_S = env_float("REDIS_CONNECT_TIMEOUT_S", 1.0)
REDIS_SOCKET_TIMEOUT_S = env_float("REDIS_SOCKET_TIMEOUT_S", 1.0)
REDIS_MAX_CONNECTIONS = env_int("REDIS_MAX_CONNECTIONS", 64, minimum=1)
# The gateway's garbage collector (foundation/gc_tuning.py): objects allocated between two
# collections of the youngest generation (CPython's default is 700); 0 leaves it untuned.
GC_GEN0_THRESHOLD = env_int("GC_GEN0_THRESHOLD", 50_000, minimum=0)

# Its socket timeout outlasts channels-redis's blocking pop (foundation/channel_layer.py says why).
CHANNEL_LAYERS = channel_layers_for(REDIS_URL, REDIS_CONNECT_TIMEOUT_S)

CELERY_BROKER_URL = REDIS_URL
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE = {
    "ingest-usage-events": {
        "task": "gateway.usage.tasks.ingest_usage_events",
        "schedule": 2.0,
    },
    "flush-api-key-last-used": {
        "task": "gateway.accounts.tasks.flush_api_key_last_used",
        "schedule": 30.0,
    },
    "refresh-dashboard": {
        "task": "gateway.dashboard.tasks.refresh_dashboard",
        "schedule": 30.0,
    },
    "sweep-batches": {
        "task": "gateway.batches.tasks.sweep_batches",
        "schedule": 10.0,
    },
    "purge-expired-cache-entries": {
        "task": "caching.tasks.purge_expired_cache_entries",
        "schedule": 60.0,
    },
}
# Batches run for minutes to hours: on a worker of their own (make run starts one), so the
# ledger and dashboard tasks never wait behind a batch.
CELERY_TASK_ROUTES = {"gateway.batches.tasks.run_batch": {"queue": "batches"}}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# Usage events a ledger consumer read but did not acknowledge for this long are taken over
# by the next run (their consumer is presumed dead; a wrong guess costs a duplicate read,
# never a duplicate record).
USAGE_RECLAIM_IDLE_S = env_float("USAGE_RECLAIM_IDLE_S", 30.0)

# The autoscaler (scaling/, docs/autoscaling.md) acts only on deployments with an enabled
# AutoscalePolicy; run it with `manage.py autoscale` (or the scaling.tasks.autoscale_tick
# Celery task); `make run` runs it. The actuator starts and stops replicas: local processes
# on this host (each deployment's own kind: vLLM, or simulators for one marked simulated),
# or a Kubernetes Deployment's scale.
AUTOSCALE_TICK_S = env_float("AUTOSCALE_TICK_S", 15.0)
AUTOSCALE_ACTUATOR = env_str("AUTOSCALE_ACTUATOR", "local")
AUTOSCALE_SIM_PROFILE = env_str("AUTOSCALE_SIM_PROFILE", "h100-llama3-8b")
AUTOSCALE_K8S_NAMESPACE = env_str("AUTOSCALE_K8S_NAMESPACE", "sluice")
AUTOSCALE_K8S_NAME = env_str("AUTOSCALE_K8S_NAME", "vllm-{name}")
AUTOSCALE_K8S_PORT = env_int("AUTOSCALE_K8S_PORT", 8000, minimum=1)

# Authentication: how long one process trusts a key or policy record before asking Redis
# again. Revocation and policy changes reach every process within this bound plus one
# Redis round trip; the issue requires 2 seconds.
AUTH_PROCESS_CACHE_TTL_S = env_float("AUTH_PROCESS_CACHE_TTL_S", 1.0)
API_KEY_LAST_USED_INTERVAL_S = env_int("API_KEY_LAST_USED_INTERVAL_S", 60, minimum=1)

# The platform default quota: the limits of every team without a policy of its own
# (DefaultQuotaPolicy, docs/accounts.md). These seed it once, on first use; from then on it
# is edited in the admin ("Default quota policy"; leave a field empty for no limit), and an
# edit reaches every gateway process within AUTH_PROCESS_CACHE_TTL_S.
# Live (not revoked, not expired) API keys a team may hold: a leaked manage key cannot
# mint them without bound, and a team's key list stays one answer long.
MAX_KEYS_PER_TEAM = env_int("MAX_KEYS_PER_TEAM", 1000, minimum=1)
DEFAULT_REQUESTS_PER_MINUTE = env_int("DEFAULT_REQUESTS_PER_MINUTE", 60, minimum=1)
DEFAULT_TOKENS_PER_MINUTE = env_int("DEFAULT_TOKENS_PER_MINUTE", 100_000, minimum=1)
DEFAULT_TOKENS_PER_MONTH = env_int("DEFAULT_TOKENS_PER_MONTH", 10_000_000, minimum=1)
DEFAULT_MAX_TOKENS_CAP = env_int("DEFAULT_MAX_TOKENS_CAP", 4096, minimum=1)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "gateway.accounts.api.authentication.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "UNAUTHENTICATED_USER": None,
}

DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("MAX_REQUEST_BODY_BYTES", 1_048_576, minimum=1024)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "chat"
LOGOUT_REDIRECT_URL = "login"

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
# collectstatic writes content-hashed copies, served as immutable; until it has run since
# the last change under static/, pages link the plain names (gateway/static_files.py).
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "gateway.static_files.HashedStaticFilesStorage"},
}
# Plain names come from the source files (the finders), so they are never stale copies,
# and are cached for a minute; hashed ones from STATIC_ROOT, for good.
WHITENOISE_USE_FINDERS = True
WHITENOISE_MAX_AGE = 0 if DEBUG else 60
STATICFILES_DIRS = [BASE_DIR / "static"] if (BASE_DIR / "static").is_dir() else []
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    # dashboard/vendor/plotly.min.js, straight from the installed plotly package (no CDN).
    "gateway.dashboard.plotly_static_finder.PlotlyFinder",
]

# Dashboard rollups (gateway/dashboard/rollup.py): each 30 s run recomputes this many
# minutes back (ledger rows later than that need `manage.py rollup_usage`); minute
# buckets are kept this long, hour buckets for good.
ROLLUP_LOOKBACK_MIN = env_int("ROLLUP_LOOKBACK_MIN", 10, minimum=1)
ROLLUP_MINUTE_RETENTION_H = env_int("ROLLUP_MINUTE_RETENTION_H", 48, minimum=2)

# Browser-facing security (docs/deployment.md, "Security settings"). The defaults keep
# `make run` on plain http://127.0.0.1:8000 working; behind TLS set SECURE_COOKIES=1 and
# SECURE_HSTS_SECONDS. The /v1/ API bypasses these middlewares (gateway/api_handler.py):
# API clients are not browsers.
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
# Lax: a cross-site POST (a forged form) carries no session; following a link in still does.
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
# No script reads the CSRF cookie: every form takes its token from the page.
CSRF_COOKIE_HTTPONLY = True
# Flash messages in the session, not in a cookie: the admin shows a new API key's plaintext
# once as a message, and a cookie is signed but not encrypted.
MESSAGE_STORAGE = "django.contrib.messages.storage.session.SessionStorage"
# HSTS: 0 (off) until the site is served over HTTPS only; a browser then refuses plain HTTP
# for this long. Start small (300) and raise it to a year (31536000) once it works.
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
# Probes and scrapers may speak plain HTTP inside the cluster.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
# Behind a TLS-terminating proxy that is not on this host (uvicorn already believes
# X-Forwarded-Proto from 127.0.0.1): trust its X-Forwarded-Proto. Only when every request
# comes through that proxy, which must overwrite the header a client sends.
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https") if env_bool("TRUST_X_FORWARDED_PROTO", False) else None
)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"  # no page of ours is meant to be framed (clickjacking)

# Client addresses for per-address limits (gateway/client_address.py): how many proxies
# in front append to X-Forwarded-For. 0: the header is ignored (a client could rotate it).
TRUSTED_PROXY_COUNT = env_int("TRUSTED_PROXY_COUNT", 0, minimum=0)
# Chat socket limits (docs/websocket.md). Per socket: a person sends a few messages a
# minute; a script sending more than 2 a second belongs on the HTTP API. Per client address,
# across every socket and gateway process (Redis): room for a NATed office of people. A
# socket that keeps sending after this many refusals in a row is closed (4429).
WS_MESSAGES_PER_MINUTE = env_int("WS_MESSAGES_PER_MINUTE", 120, minimum=1)
WS_ADDRESS_MESSAGES_PER_MINUTE = env_int("WS_ADDRESS_MESSAGES_PER_MINUTE", 600, minimum=1)
WS_REFUSALS_BEFORE_CLOSE = env_int("WS_REFUSALS_BEFORE_CLOSE", 10, minimum=1)
# What one user may keep in the web chat (gateway/chat/actions.py): conversations, and
# messages in one conversation. Without them a user's rows grow without bound, and a
# conversation is sent whole each time it is opened.
CHAT_MAX_CONVERSATIONS = env_int("CHAT_MAX_CONVERSATIONS", 1000, minimum=1)
CHAT_MAX_MESSAGES = env_int("CHAT_MAX_MESSAGES", 1000, minimum=4)
# Failed key authentications on the socket per client address, across new sockets: past
# this, the address may not try again until its window (from its first failure) ends.
WS_AUTH_FAILURES_PER_ADDRESS = env_int("WS_AUTH_FAILURES_PER_ADDRESS", 20, minimum=1)
WS_AUTH_FAILURE_WINDOW_S = env_int("WS_AUTH_FAILURE_WINDOW_S", 600, minimum=1)
# Failed web sign-ins (/accounts/login/, /admin/login/; gateway/accounts/login_throttle.py),
# per username (a distributed guess at one account) and per address (one address trying
# many accounts). A locked username can be a nuisance to its owner for one window: that
# is the price of stopping guesses at it.
LOGIN_FAILURES_PER_USERNAME = env_int("LOGIN_FAILURES_PER_USERNAME", 10, minimum=1)
LOGIN_FAILURES_PER_ADDRESS = env_int("LOGIN_FAILURES_PER_ADDRESS", 20, minimum=1)
LOGIN_FAILURE_WINDOW_S = env_int("LOGIN_FAILURE_WINDOW_S", 900, minimum=1)

LOG_LEVEL = env_str("LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

# Fleet: workers come from SLUICE_WORKERS ("model@http://host:port,..."), the admin, or
# an actuator; the scraper publishes their health and load for every gateway process.
SLUICE_WORKERS = env_str("SLUICE_WORKERS", "")
FLEET_SCRAPE_INTERVAL_S = env_float("FLEET_SCRAPE_INTERVAL_S", 1.0)
FLEET_REFRESH_S = env_float("FLEET_REFRESH_S", 1.0)
FLEET_STALE_AFTER_S = env_float("FLEET_STALE_AFTER_S", 5.0)
GATEWAY_PROCESSES = env_int("GATEWAY_PROCESSES", 1, minimum=1)
# SIGTERM (or `make run`'s Ctrl-C) drains a gateway process (gateway/drain.py): no new
# requests, and what is in flight (HTTP, SSE, chat replies) gets this long to finish.
GATEWAY_DRAIN_TIMEOUT_S = env_float("GATEWAY_DRAIN_TIMEOUT_S", DEFAULT_DRAIN_TIMEOUT_S)
if GATEWAY_DRAIN_TIMEOUT_S < 0:
    raise ImproperlyConfigured(f"GATEWAY_DRAIN_TIMEOUT_S={GATEWAY_DRAIN_TIMEOUT_S} is negative.")
UPSTREAM_CONNECT_TIMEOUT_S = env_float("UPSTREAM_CONNECT_TIMEOUT_S", 2.0)
UPSTREAM_FIRST_TOKEN_TIMEOUT_S = env_float("UPSTREAM_FIRST_TOKEN_TIMEOUT_S", 60.0)
UPSTREAM_IDLE_TIMEOUT_S = env_float("UPSTREAM_IDLE_TIMEOUT_S", 30.0)
# A non-streamed request is asked of its worker non-streamed (inference/client.py): its
# whole reply comes at once, so the worker gets this long for all of it (the OpenAI
# client's own default), where a stream's first token and gaps have the two above.
UPSTREAM_REPLY_TIMEOUT_S = env_float("UPSTREAM_REPLY_TIMEOUT_S", 600.0)
# The same for a batch line (asked whole too): at batch priority, behind interactive work,
# a long line may take more than ten minutes, and no client is waiting on it.
BATCH_LINE_REPLY_TIMEOUT_S = env_float("BATCH_LINE_REPLY_TIMEOUT_S", 3600.0)
for _name in ("UPSTREAM_REPLY_TIMEOUT_S", "BATCH_LINE_REPLY_TIMEOUT_S"):
    if globals()[_name] <= 0:
        raise ImproperlyConfigured(f"{_name}={globals()[_name]} must be more than 0 seconds.")
UPSTREAM_MAX_ATTEMPTS = env_int("UPSTREAM_MAX_ATTEMPTS", 3, minimum=1)
QUEUE_TIMEOUT_S = env_float("QUEUE_TIMEOUT_S", 30.0)
# How long a request for a deployment scaled to zero (autoscale policy min_replicas 0) waits
# for a replica to be woken or started before a 503 with Retry-After.
SCALE_FROM_ZERO_TIMEOUT_S = env_float("SCALE_FROM_ZERO_TIMEOUT_S", 120.0)
# While a stream is held for such a replica, an SSE comment this often keeps its connection
# (and any proxy's idle timeout, nginx's 60 s by default) alive.
SSE_KEEPALIVE_S = env_float("SSE_KEEPALIVE_S", 10.0)
# Queued requests are served fairly across teams (weights and caps from quota policies);
# off: first come first served, as the fairness benchmark's baseline.
FAIR_QUEUEING = env_bool("FAIR_QUEUEING", True)

METRICS_BEARER_TOKEN = env_str("METRICS_BEARER_TOKEN", "")

DEMO_TEAM_NAME = env_str("DEMO_TEAM_NAME", "demo")
PORT = env_int("PORT", 8000, minimum=1)

# The Batch API (gateway/batches, docs/batches.md). Files live under BATCH_FILE_DIR by
# default; BATCH_FILE_STORAGE names another FileStorage class:
# gateway.batches.object_storage.S3FileStorage keeps them in an S3-compatible bucket
# (AWS S3, MinIO, Cloudflare R2, Ceph RGW...), which every host of a multi-machine install
# shares, with the BATCH_S3_* settings below.
BATCH_FILE_STORAGE = env_str("BATCH_FILE_STORAGE", "gateway.batches.storage.LocalFileStorage")
BATCH_FILE_DIR = Path(env_str("BATCH_FILE_DIR", str(VAR_DIR / "files")))
# host[:port] (https unless BATCH_S3_SECURE=0) or a URL whose scheme says which.
BATCH_S3_ENDPOINT = env_str("BATCH_S3_ENDPOINT", "")
# The bucket must exist: Sluice never creates one (docs/batches.md, "Storage backends").
BATCH_S3_BUCKET = env_str("BATCH_S3_BUCKET", "")
BATCH_S3_ACCESS_KEY = env_str("BATCH_S3_ACCESS_KEY", "")
BATCH_S3_SECRET_KEY = env_str("BATCH_S3_SECRET_KEY", "")  # never logged or shown
# The bucket's region; empty asks the server once per process (on AWS set it: that asking
# costs a request and the s3:GetBucketLocation permission).
BATCH_S3_REGION = env_str("BATCH_S3_REGION", "")
BATCH_S3_SECURE = env_bool("BATCH_S3_SECURE", True)
# Object keys are this prefix plus the file id, so one bucket can hold other things too.
BATCH_S3_PREFIX = env_str("BATCH_S3_PREFIX", "sluice/batch-files/")
BATCH_FILE_MAX_BYTES = env_int("BATCH_FILE_MAX_BYTES", 100 * 1024 * 1024, minimum=1024)
# All of a team's files together (inputs and the outputs its batches wrote).
BATCH_TEAM_STORAGE_BYTES = env_int("BATCH_TEAM_STORAGE_BYTES", 10 * 1024**3, minimum=1024)
BATCH_MAX_LINES = env_int("BATCH_MAX_LINES", 50_000, minimum=1)
BATCH_LINE_MAX_BYTES = env_int("BATCH_LINE_MAX_BYTES", 1_048_576, minimum=1024)
# Files are deleted this long after they were made (input and output alike).
BATCH_FILE_TTL_S = env_int("BATCH_FILE_TTL_S", 30 * 24 * 3600, minimum=60)
# A runner that has not renewed its hold on a batch for this long is presumed dead; the
# sweep (every 10 s) hands the batch to another.
BATCH_RUNNER_STALE_S = env_float("BATCH_RUNNER_STALE_S", 30.0)
# Lines one runner keeps in flight at most, whatever the fleet's spare capacity.
BATCH_MAX_CONCURRENCY = env_int("BATCH_MAX_CONCURRENCY", 256, minimum=1)
# Share of each worker's max_in_flight the batch runner leaves free for interactive
# bursts: lines start only while a worker is below (1 - this) of its target.
BATCH_HEADROOM = env_float("BATCH_HEADROOM", 0.1)

"""Settings shared by every environment; everything that varies is read from the environment."""

import ipaddress
import json
import os
from datetime import timedelta
from pathlib import Path

import dj_database_url

from clusters.validation.limits import MAX_REQUEST_BODY_BYTES
from config.settings.env import env_bool, env_float, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent.parent
PLATFORM_DIR = BASE_DIR / "platform"
CRD_DIR = PLATFORM_DIR / "crds"
SAMPLES_DIR = PLATFORM_DIR / "samples"
DEMO_DIR = PLATFORM_DIR / "demo"

SECRET_KEY = env_str("SECRET_KEY", "insecure-development-key-change-me")
# Older SECRET_KEYs still accepted (sessions, signatures, and decrypting credentials at rest) while
# rotating: see docs/security.md, "Secrets at rest".
SECRET_KEY_FALLBACKS = env_list("SECRET_KEY_FALLBACKS", [])
# Credentials in the database (cluster bearer tokens, Prometheus auth headers) are Fernet-encrypted
# by django-fernet-encrypted-fields with a key derived from SECRET_KEY and each of these (its
# SALT_KEY setting): the first encrypts, all decrypt. Comma-separated, newest first; production
# settings refuse the development default.
SALT_KEY = env_list("FIELD_ENCRYPTION_KEYS", ["insecure-development-field-encryption-key"])
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])

INSTALLED_APPS = [
    "config.admin_site.PortalAdminConfig",  # django.contrib.admin, its sidebar memoized
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_prometheus",
    "rest_framework",
    "knox",
    "axes",
    "mozilla_django_oidc",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "clusters",
    "models_app",
    "runs_app",
    "scheduler",
    "scheduler.rightsizing",
    "accounts",
    "inference_gateway",
    "devstack",
    "governance",
    "gitops",
]

MIDDLEWARE = [
    # first: /healthz and /readyz are answered before host checks, https redirects and sessions
    "config.probes.ProbeMiddleware",
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "config.middleware.RequestLimitsMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "config.not_found.NotFoundPageMiddleware",  # the portal's 404 page for hidden objects, DEBUG or not
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # last: turns a login refused by django-axes into its lockout response
    "axes.middleware.AxesMiddleware",
    "accounts.devices.KnownDeviceMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

# django-axes counts failed logins (the login form, the admin's, POST /api/token/) and refuses for
# AXES_COOLOFF_TIME once LOGIN_FAILURE_LIMIT is reached; who counts against what is one rule,
# accounts/lockout.py (docs/identity.md, "Failed logins"): per person, per device from a person's
# known devices; per address only where it is a client's (TRUSTED_PROXIES). Its backend goes
# first so a refused attempt never reaches the password check. A success never resets the counts.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "accounts.oidc.LocalAccountBackend",
    "accounts.oidc.PortalOIDCBackend",
]
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 10)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_LOCKOUT_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = "accounts.lockout.lockout_parameters"
AXES_RESET_ON_SUCCESS = False
AXES_CLIENT_IP_CALLABLE = "accounts.client_address.client_ip"
AXES_WHITELIST_CALLABLE = "accounts.lockout.passes_lockout"
# Proxies (addresses or networks, comma-separated, e.g. the ingress controller's pod range) whose
# X-Forwarded-For entry is believed; empty: the connecting address may be anyone's (an ingress), so
# nothing is counted per address. The deploy sets it (platform/deploy, platform/helm).
TRUSTED_PROXIES = [str(ipaddress.ip_network(entry, strict=False)) for entry in env_list("TRUSTED_PROXIES", [])]
# Set by config/web_server.py for its workers: every request reaches them from the nginx in front of
# them, on loopback, which names the address that connected to it in X-Real-IP.
WEB_LOCAL_PROXY = env_bool("WEB_LOCAL_PROXY", False)
KNOWN_DEVICE_DAYS = env_int("KNOWN_DEVICE_DAYS", 180)
KNOWN_DEVICE_LIMIT = 20  # per person; the least recently used beyond it are forgotten

# Single sign-on (OpenID Connect, accounts/oidc.py; docs/identity.md): on when OIDC_CLIENT_ID is set.
# The authorization-code flow with PKCE; the ID token is checked against the provider's JWKS; the
# groups claim decides teams and roles through the staff-edited group mappings.
OIDC_RP_CLIENT_ID = env_str("OIDC_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = env_str("OIDC_CLIENT_SECRET", "")
OIDC_ISSUER = env_str("OIDC_ISSUER", "")
OIDC_OP_AUTHORIZATION_ENDPOINT = env_str("OIDC_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = env_str("OIDC_TOKEN_ENDPOINT", "")
OIDC_OP_USER_ENDPOINT = env_str("OIDC_USERINFO_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = env_str("OIDC_JWKS_ENDPOINT", "")
OIDC_RP_SIGN_ALGO = env_str("OIDC_SIGN_ALGORITHM", "RS256")
OIDC_RP_SCOPES = env_str("OIDC_SCOPES", "openid email profile groups")
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
OIDC_USE_PKCE = True
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "single sign-on")
LOGIN_REDIRECT_URL_FAILURE = "/login/?sso=failed"
# A sign-in that does not complete answers the login page with why (400/403), never a 500.
OIDC_CALLBACK_CLASS = "accounts.views.PortalOIDCCallbackView"
# Local accounts (user name and password) stay for break-glass; off: single sign-on only.
LOCAL_ACCOUNTS = env_bool("LOCAL_ACCOUNTS", True)

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

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
                "governance.context_processors.budget_warnings",
            ],
            "libraries": {"admin_nav": "config.admin_site"},
        },
    },
]

# SQLite is the embedded default so the portal runs with nothing but Python; set
# DATABASE_URL=postgres://... for PostgreSQL (psycopg 3). The django_prometheus backends
# export query counts and latencies per database.
DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60),
    )
}
_PROMETHEUS_ENGINES = {
    "django.db.backends.postgresql": "django_prometheus.db.backends.postgresql",
    "django.db.backends.sqlite3": "django_prometheus.db.backends.sqlite3",
}
DATABASES["default"]["ENGINE"] = _PROMETHEUS_ENGINES.get(DATABASES["default"]["ENGINE"], DATABASES["default"]["ENGINE"])
if DATABASES["default"]["ENGINE"].endswith("postgresql"):
    # Server-side parameters, so a statement's text is the same whatever its values, and psycopg
    # prepares a statement a connection has run 5 times: PostgreSQL plans it once. Planning was
    # half the database's CPU on the list pages (the catalog's filter choices: 4.4 ms to plan,
    # 0.7 ms to run); per request, the catalog's database CPU went from 10.7 to 5.4 ms and the
    # dashboard's from 11 to 7-9. A pooler in transaction mode (PgBouncer before 1.21) cannot keep
    # prepared statements: set DATABASE_PREPARED_STATEMENTS=false there.
    if env_bool("DATABASE_PREPARED_STATEMENTS", True):
        DATABASES["default"].setdefault("OPTIONS", {}).update(server_side_binding=True, prepare_threshold=5)
elif DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # The embedded default serves requests, runs tasks and watches in several threads: WAL lets
    # readers and one writer overlap, IMMEDIATE transactions wait (timeout) instead of failing.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# Forms and the admin read bodies through Django, which refuses more than this; the API's parsers
# are bounded by config.middleware.RequestLimitsMiddleware. Both at kube-apiserver's 3 MiB.
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_REQUEST_BODY_BYTES

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# Vendored front-end files (htmx, from the npm registry) live here: no CDN at run time.
STATICFILES_DIRS = [BASE_DIR / "static"]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

REST_FRAMEWORK = {
    # Tokens first: DRF answers an unauthenticated request with the first class's challenge, so a
    # missing, expired or revoked token is 401 + `WWW-Authenticate: Token` (the session class has
    # none: 403). The order decides nothing else: knox reads only `Authorization: Token`, and a
    # session still must pass CSRF on writes.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "knox.auth.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["clusters.web.api.permissions.ReadLoggedInWriteWithModelPermission"],
    "DEFAULT_FILTER_BACKENDS": [
        "clusters.web.api.filtering.GivenFiltersBackend",
        "clusters.web.api.pagination.StableOrderingFilter",
    ],
    "DEFAULT_PARSER_CLASSES": [
        "clusters.web.api.parsers.JSONParser",
        "clusters.web.api.parsers.MergePatchJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "clusters.web.api.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "clusters.web.api.schema.PortalAutoSchema",  # documents every operation's errors
    "EXCEPTION_HANDLER": "clusters.web.api.exceptions.exception_handler",
    # POST /api/token/ checks passwords: a few tries a minute per person (per device from their known
    # devices) and per client address where it is a client's (accounts/lockout.py).
    "DEFAULT_THROTTLE_RATES": {"token": env_str("TOKEN_THROTTLE_RATE", "10/min")},
}

# API tokens (django-rest-knox): hashed at rest (SHA-512), several per person, named, expiring.
KNOX_TOKEN_MODEL = "accounts.ApiToken"
# knox's own migrations create its AuthToken table even when the model is swapped for ours; without
# them Django creates no table for a swapped model, so no unused token table exists.
MIGRATION_MODULES = {"knox": None}
API_TOKEN_DAYS = env_int("API_TOKEN_DAYS", 30)
API_TOKEN_MAX_DAYS = env_int("API_TOKEN_MAX_DAYS", 365)
API_TOKEN_LIMIT = env_int("API_TOKEN_LIMIT", 20)
REST_KNOX = {"TOKEN_TTL": timedelta(days=API_TOKEN_DAYS), "AUTH_HEADER_PREFIX": "Token"}

SPECTACULAR_SETTINGS = {
    "TITLE": "Inference Portal API",
    "DESCRIPTION": (
        "Mirrors inference custom resources (eh-ops InferenceModel, KubeAI Model, Krateo "
        "InferenceConfig/InferenceRun, OtterScale ModelService) of one or more clusters. Objects "
        "go in and out in their Kubernetes manifest shape."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI and ReDoc from the project's own static files (drf-spectacular-sidecar), no CDN:
    # the docs work where the internet is not reachable.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Every metric of the portal under one prefix (docs/observability.md): django-prometheus' series
# become inference_portal_django_*, beside the portal's, the sync's and the gateway's own.
PROMETHEUS_METRIC_NAMESPACE = "inference_portal"
# /metrics answers only requests with "Authorization: Bearer <METRICS_TOKEN>"; empty: no one.
METRICS_TOKEN = env_str("METRICS_TOKEN", "")

# Celery: with no broker the embedded default runs tasks eagerly in-process.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "")

# A cache every process shares (web workers, Celery workers, the watcher): per-object reconcile
# locks and request throttles must hold across processes. Redis when CACHE_URL (or a Redis broker)
# is given; the embedded default is per process, which is all one process needs.
CACHE_URL = env_str("CACHE_URL", CELERY_BROKER_URL if CELERY_BROKER_URL.startswith("redis") else "")
CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}
        if CACHE_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}
# Sessions in the database, read by one statement on each request (accounts/sessions.py says why).
SESSION_ENGINE = "accounts.sessions"
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND", "")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "default"
# Sync work has its own queue so a long resync never holds up other tasks; workers consume both
# (`celery -A config worker -Q default,sync`).
CELERY_TASK_ROUTES = {"clusters.sync.tasks.*": {"queue": "sync"}}
CELERY_TIMEZONE = TIME_ZONE
# Workers keep LOGGING's handlers (and so its URL-redacting filter) instead of installing their own.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    # Credentials inside URLs (user-info, ?token=) never reach the log, whoever logs them.
    "filters": {"redact_urls": {"()": "config.log_redaction.RedactUrlsFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["redact_urls"]}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}

# The node label whose value names a node pool; a model's pool is its nodeSelector's value
# for this key (see scheduler/pools.py for the rule when it is absent).
NODE_POOL_LABEL = env_str("NODE_POOL_LABEL", "inference-pool")
DEFAULT_NODE_POOL = env_str("DEFAULT_NODE_POOL", "default")
# The global per-model memory cap of the public InferenceModel controller; empty disables it.
MAX_MODEL_MEMORY = os.environ.get("MAX_MODEL_MEMORY", "96Gi")
# KubeAI's own system config table (the helm chart's ``resourceProfiles``): what one unit of a
# Model's ``resourceProfile: <name>:<count>`` requests. Copy your cluster's table here (JSON in
# the KUBEAI_RESOURCE_PROFILES environment variable) so KubeAI Models hold the right budget; the
# nodeSelector's pool label places them. Defaults: KubeAI's chart values, pools named like ours.
KUBEAI_RESOURCE_PROFILES = json.loads(os.environ.get("KUBEAI_RESOURCE_PROFILES") or "null") or {
    "cpu": {"requests": {"cpu": "1", "memory": "2Gi"}},
    "nvidia-gpu-l4": {
        "limits": {"nvidia.com/gpu": "1"},
        "requests": {"nvidia.com/gpu": "1", "cpu": "6", "memory": "24Gi"},
        "nodeSelector": {"inference-pool": "gpu-l4"},
    },
    "nvidia-gpu-a100-80gb": {
        "limits": {"nvidia.com/gpu": "1"},
        "requests": {"nvidia.com/gpu": "1", "cpu": "6", "memory": "80Gi"},
        "nodeSelector": {"inference-pool": "gpu-a100"},
    },
    "nvidia-gpu-h100": {
        "limits": {"nvidia.com/gpu": "1"},
        "requests": {"nvidia.com/gpu": "1", "cpu": "10", "memory": "120Gi"},
        "nodeSelector": {"inference-pool": "gpu-h100"},
    },
    "amd-gpu-mi300x": {
        "limits": {"amd.com/gpu": "1"},
        "requests": {"amd.com/gpu": "1", "cpu": "8", "memory": "192Gi"},
        "nodeSelector": {"inference-pool": "gpu-mi300x"},
    },
}
# The image each KubeAI engine runs in where the portal is the Model's controller and the Model
# names no spec.image (KubeAI's chart pairs them per profile; pinned, one per engine here). JSON in
# KUBEAI_ENGINE_IMAGES replaces the table.
KUBEAI_ENGINE_IMAGES = json.loads(os.environ.get("KUBEAI_ENGINE_IMAGES") or "null") or {
    "VLLM": "vllm/vllm-openai:v0.6.3.post1",
    "OLlama": "ollama/ollama:0.3.12",
    "FasterWhisper": "fedirz/faster-whisper-server:0.4.1-cpu",
    "Infinity": "michaelf34/infinity:0.0.70",
}
# KubeAI's autoscaler settings (its system config's ``modelAutoscaling``): active requests are read
# every INTERVAL seconds and averaged over the last WINDOW seconds (KubeAI: 10s and 10m).
KUBEAI_AUTOSCALING_INTERVAL = env_float("KUBEAI_AUTOSCALING_INTERVAL", 10.0, above=0)
KUBEAI_AUTOSCALING_WINDOW = env_float("KUBEAI_AUTOSCALING_WINDOW", 600.0, above=0)

# The Prometheus server KEDA's operator queries for the portal's desired-replicas gauge (the one that
# scrapes the portal's /metrics), as KEDA reaches it from inside the cluster: written into the
# ScaledObjects the portal renders (models_app/keda.py, docs/autoscaling.md). Default: the service
# the Prometheus Operator makes for a Prometheus named "prometheus" in namespace "monitoring".
KEDA_PROMETHEUS_SERVER_ADDRESS = env_str("KEDA_PROMETHEUS_SERVER_ADDRESS", "http://prometheus-operated.monitoring.svc:9090")

# The portal as controller (see clusters/sync/controllers.py): the reference controller's settings.
# POLLING_INTERVAL is a duration such as "1m" or "300s" between reconcile passes;
# MAX_RECONCILE_RATE is how many reconciles run at once.
POLLING_INTERVAL = env_str("POLLING_INTERVAL", "1m")
MAX_RECONCILE_RATE = env_int("MAX_RECONCILE_RATE", 4)
# Objects per page of the sync's lists (limit/continue): a relist holds about two pages in memory
# (the one being stored and the next one being fetched), so memory grows with it, round trips shrink.
SYNC_LIST_PAGE_SIZE = env_int("SYNC_LIST_PAGE_SIZE", 500)
# A failing condition seen again unchanged counts its Warning Event again after this long at the
# earliest (client-go's spam filter: one repeat per object per five minutes); refused writes count
# on every pass (clusters.kube.failures).
EVENT_REPEAT_SECONDS = env_int("EVENT_REPEAT_SECONDS", 300)
# Fleet pages (fleet/live.py): every cluster is read at once and a page waits this long at most for
# each (a cluster that has not answered is named on the page); a read is shared by this process's
# pages for FLEET_KEPT_SECONDS.
FLEET_READ_SECONDS = env_float("FLEET_READ_SECONDS", 0.8, above=0)
FLEET_KEPT_SECONDS = env_float("FLEET_KEPT_SECONDS", 5.0, at_least=0)
# Who this installation is, in the clusters it shares with other portals: the watcher's Lease is
# named after it (clusters/leader.py). Empty: derived from the database (its host, port and name),
# so replicas of one portal share a Lease and two portals with their own databases never wait on
# each other's.
INSTALLATION_ID = env_str("INSTALLATION_ID", "")
# The watcher's Lease name in full, where a deploy grants its Lease by name (platform/deploy,
# the Helm chart's watchLease.name): overrides the name derived from INSTALLATION_ID.
WATCH_LEASE_NAME = env_str("WATCH_LEASE_NAME", "")

# Inference gateway (`manage.py gateway`, inference_gateway/): how long a request for a model at
# zero waits for its wake before a 503 with Retry-After; how stale its in-memory views may be (the
# model catalog, a token's user and grants, a Service's ready replicas); how often it stamps a
# model's last-request-time; how long a replica that failed is skipped.
GATEWAY_WAKE_TIMEOUT_SECONDS = env_int("GATEWAY_WAKE_TIMEOUT_SECONDS", 300)
GATEWAY_RETRY_AFTER_SECONDS = env_int("GATEWAY_RETRY_AFTER_SECONDS", 30)
GATEWAY_CATALOG_TTL_SECONDS = env_int("GATEWAY_CATALOG_TTL_SECONDS", 2)
GATEWAY_CALLER_TTL_SECONDS = env_int("GATEWAY_CALLER_TTL_SECONDS", 10)
GATEWAY_LAST_REQUEST_INTERVAL_SECONDS = env_int("GATEWAY_LAST_REQUEST_INTERVAL_SECONDS", 5)
GATEWAY_ENDPOINTS_TTL_SECONDS = env_int("GATEWAY_ENDPOINTS_TTL_SECONDS", 5)
GATEWAY_EJECT_SECONDS = env_int("GATEWAY_EJECT_SECONDS", 10)
# Endpoint picking (inference_gateway/picking/): how often each replica's engine metrics are read, and
# the age past which a replica counts as saturated (llm-d's endpoint picker: 50 ms and 200 ms).
GATEWAY_ENGINE_METRICS_SECONDS = env_float("GATEWAY_ENGINE_METRICS_SECONDS", 0.05, above=0)
GATEWAY_ENGINE_METRICS_STALE_SECONDS = env_float("GATEWAY_ENGINE_METRICS_STALE_SECONDS", 0.2, above=0)
# The guided deploy's default backend URL for a new InferenceModel (models_app/deploy.py); the live demo
# sets it to its simulated engine. Empty: http://<name>:8000, a Service someone must add.
DEPLOY_BACKEND_URL = env_str("DEPLOY_BACKEND_URL", "")
# The most one call to a backend may take, from sending the request to the answer's last byte
# (streams included: a backend sending a byte now and then cannot extend it), and the most it may
# send nothing, before its headers or between two bytes (0: the same as the total). A non-stream
# answer's generation is silence before its headers, so the idle limit bounds it too.
GATEWAY_UPSTREAM_TIMEOUT_SECONDS = env_int("GATEWAY_UPSTREAM_TIMEOUT_SECONDS", 600)
GATEWAY_UPSTREAM_IDLE_SECONDS = env_int("GATEWAY_UPSTREAM_IDLE_SECONDS", 0)
GATEWAY_WAKE_POLL_SECONDS = 0.5
GATEWAY_MAX_BODY_BYTES = env_int("GATEWAY_MAX_BODY_BYTES", 32 * 1024 * 1024)
# Where a model may answer (inference_gateway/placement.py): loopback backends only in development
# and tests (never in production); the portal's and gateway's own host names, never a backend.
# What a hostile or broken peer may cost: the largest answer that is not a stream (a larger one is a
# 502 upstream_response_too_large; streams pass through with a fixed buffer), seconds to connect
# to a backend, and seconds a client may take to send its headers or body, or to read the answer
# before the gateway gives up on it (GATEWAY_UPSTREAM_*_SECONDS are the backend's).
GATEWAY_MAX_RESPONSE_BYTES = env_int("GATEWAY_MAX_RESPONSE_BYTES", 32 * 1024 * 1024)
GATEWAY_CONNECT_TIMEOUT_SECONDS = env_int("GATEWAY_CONNECT_TIMEOUT_SECONDS", 10)
GATEWAY_CLIENT_TIMEOUT_SECONDS = env_int("GATEWAY_CLIENT_TIMEOUT_SECONDS", 30)
# The bytes one gateway process holds whole at once, request bodies and non-stream answers of all
# its requests together (inference_gateway/memory.py); beyond it, 503 gateway_overloaded. Per
# process: a host's total is the workers times this. 7/8 of it must hold the largest body and
# answer together.
GATEWAY_MAX_BYTES_IN_FLIGHT = env_int("GATEWAY_MAX_BYTES_IN_FLIGHT", 256 * 1024 * 1024)
# Backend response headers passed on besides Content-Type, Content-Encoding, Retry-After and
# X-Request-Id (inference_gateway/headers.py: cookies, CORS, auth challenges are refused).
GATEWAY_PASSED_HEADERS = env_list("GATEWAY_PASSED_HEADERS", [])
# Gateway processes per pod or host (`manage.py gateway --workers`); 0: one per core (inference_gateway/workers.py).
GATEWAY_WORKERS = env_int("GATEWAY_WORKERS", 0)
# The port `manage.py gateway` listens on without --port (`make run`'s GATEWAY_PORT too).
GATEWAY_PORT = env_int("GATEWAY_PORT", 8001)
# Where clients reach the gateway: the address the model pages' snippets name. Without it, the
# gateway on this host at GATEWAY_PORT (a deployment behind a Service or ingress sets it).
GATEWAY_PUBLIC_URL = env_str("GATEWAY_PUBLIC_URL", f"http://127.0.0.1:{GATEWAY_PORT}")
GATEWAY_ALLOW_LOOPBACK = env_bool("GATEWAY_ALLOW_LOOPBACK", False)
GATEWAY_OWN_HOSTS = env_list("GATEWAY_OWN_HOSTS", [])

# The only directory a cluster's kubeconfig_path may name (clusters/web/connection_rules.py); empty:
# clusters cannot use kubeconfig files through the admin or the API (`manage.py add_cluster` can).
CLUSTER_KUBECONFIG_DIR = env_str("CLUSTER_KUBECONFIG_DIR", "")

# Clusters with impersonate_users on (clusters/kube/impersonation.py) see a person as this prefix + their
# user name (the second for people of single sign-on, whose names the provider chose), in one group
# per team: this prefix + the team's name. system: names are never impersonated.
IMPERSONATE_USER_PREFIX = env_str("IMPERSONATE_USER_PREFIX", "")
IMPERSONATE_OIDC_USER_PREFIX = env_str("IMPERSONATE_OIDC_USER_PREFIX", "oidc:")
IMPERSONATE_GROUP_PREFIX = env_str("IMPERSONATE_GROUP_PREFIX", "portal:team:")

# OIDC access tokens (JWTs) accepted by the inference gateway (accounts/access_tokens.py): the
# audience they must carry (default OIDC_CLIENT_ID) and how long the provider's keys are cached.
OIDC_AUDIENCE = env_str("OIDC_AUDIENCE", "")
OIDC_JWKS_CACHE_SECONDS = env_int("OIDC_JWKS_CACHE_SECONDS", 300)
OIDC_JWKS_REFRESH_COOLDOWN_SECONDS = env_int("OIDC_JWKS_REFRESH_COOLDOWN_SECONDS", 30)

# Team limits, usage ledger and showback (governance/, docs/usage.md). Limits are counted in this
# Redis so every gateway replica enforces the same numbers (empty: each gateway counts on its own,
# across its workers). USAGE_LIMITS=false turns limits and the ledger off in the gateway.
GOVERNANCE_REDIS_URL = env_str("GOVERNANCE_REDIS_URL", CACHE_URL)
# Without that Redis, the file in which the workers of one gateway count together (SQLite); empty:
# the gateway's supervisor makes one in a temporary folder for its workers (inference_gateway/workers.py).
USAGE_LIMITS_SHARED_FILE = env_str("USAGE_LIMITS_SHARED_FILE", "")
# How long the gateway and the portal wait for that Redis (connecting, or an answer), and how long
# they then leave it alone (the circuit: requests go through unchecked at once, counted) before
# trying again: a hung Redis costs one timeout per this many seconds, not one per request.
GOVERNANCE_REDIS_TIMEOUT_SECONDS = env_float("GOVERNANCE_REDIS_TIMEOUT_SECONDS", 0.25, above=0)
GOVERNANCE_REDIS_RETRY_SECONDS = env_float("GOVERNANCE_REDIS_RETRY_SECONDS", 1.0, at_least=0)
USAGE_LIMITS = env_bool("USAGE_LIMITS", True)
# The gateway re-reads limits and teams on change notices (PostgreSQL); this is the safety net (and
# all there is on SQLite): how stale its copy may be when a notice is lost.
USAGE_LIMITS_TTL_SECONDS = env_int("USAGE_LIMITS_TTL_SECONDS", 30)
# Quota leases (governance.leases): a replica leases a busy counter's next units, the use it saw in
# this many seconds, and admits from memory; 0: every request asks Redis.
USAGE_LIMITS_LEASE_SECONDS = env_float("USAGE_LIMITS_LEASE_SECONDS", 0.25, at_least=0)
# Tokens a request reserves in its tokens limits at admission (governance.limits): its max_tokens,
# or this when it sets none, plus its prompt estimated at this many bytes of body a token.
USAGE_RESERVE_COMPLETION_TOKENS = env_int("USAGE_RESERVE_COMPLETION_TOKENS", 1024)
USAGE_RESERVE_BYTES_PER_TOKEN = env_float("USAGE_RESERVE_BYTES_PER_TOKEN", 4.0, above=0)
# Where the gateway copies ledger rows: a postgres:// URL, empty for the portal's own database.
USAGE_LEDGER_DATABASE_URL = env_str("USAGE_LEDGER_DATABASE_URL", "")
USAGE_LEDGER_QUEUE_ROWS = env_int("USAGE_LEDGER_QUEUE_ROWS", 100_000)  # rows waiting while the database is away
USAGE_LEDGER_BATCH_ROWS = env_int("USAGE_LEDGER_BATCH_ROWS", 5_000)
USAGE_LEDGER_FLUSH_SECONDS = float(env_str("USAGE_LEDGER_FLUSH_SECONDS", "1"))
USAGE_LEDGER_RETENTION_MONTHS = env_int("USAGE_LEDGER_RETENTION_MONTHS", 13)
USAGE_LEDGER_SPOOL_DIR = env_str("USAGE_LEDGER_SPOOL_DIR", "")  # governance/spool.py; empty: the temporary directory
USAGE_SAMPLE_SECONDS = env_int("USAGE_SAMPLE_SECONDS", 300)  # GPU holdings sampled this often

# GitOps mode (docs/gitops.md): how often the portal asks the forge about the pull requests it
# opened (merged, closed, applied) and compares the objects in git mode with their files (drift).
GITOPS_FOLLOW_SECONDS = env_float("GITOPS_FOLLOW_SECONDS", 5.0)
GITOPS_DRIFT_SECONDS = env_float("GITOPS_DRIFT_SECONDS", 60.0)

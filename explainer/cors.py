"""CORS for what other sites' pages load from Hit Enter (docs/embedding.md): the static files, the recordings and
the JSON catalog of the site's words (a diagram's `lang=`).

An ASGI wrapper, not Django middleware, so that it sees every response, the static files included (WhiteNoise
answers them before the middleware after it runs). Only reads (GET, HEAD and their OPTIONS preflights) are shared:
POST /api/runs stays same-origin and CSRF-protected.
"""
import re

from django.conf import settings

READ_METHODS = ("GET", "HEAD", "OPTIONS")
# A recording, a recording's slice for one section, a shipped example's slice (docs/embedding.md).
RECORDING_PATH = re.compile(r"^/api/(runs/[^/]+|runs/[^/]+/[-\w]+|examples/[-\w]+/[-\w]+)$")
CORS_HEADERS = [
    (b"access-control-allow-origin", b"*"),
    # Pages with Cross-Origin-Embedder-Policy load the stylesheets only if we say they may.
    (b"cross-origin-resource-policy", b"cross-origin"),
]
PREFLIGHT_HEADERS = CORS_HEADERS + [
    (b"access-control-allow-methods", b"GET, HEAD, OPTIONS"),
    (b"access-control-allow-headers", b"Accept, Content-Type"),
    (b"access-control-max-age", b"86400"),
]


def is_shared(path: str) -> bool:
    """Whether another origin may read this path."""
    return path.startswith(settings.STATIC_URL) or path == "/jsi18n.json" or bool(RECORDING_PATH.match(path))


class CorsMiddleware:
    """Adds `Access-Control-Allow-Origin: *` to reads of shared paths and answers their preflights."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] not in READ_METHODS or not is_shared(scope["path"]):
            return await self.app(scope, receive, send)
        if scope["method"] == "OPTIONS":
            await send({"type": "http.response.start", "status": 204, "headers": PREFLIGHT_HEADERS})
            await send({"type": "http.response.body", "body": b""})
            return None

        async def send_with_cors(message):
            if message["type"] == "http.response.start":
                names = {name for name, _ in CORS_HEADERS}
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message = {**message, "headers": headers + CORS_HEADERS}
            await send(message)

        return await self.app(scope, receive, send_with_cors)

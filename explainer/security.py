"""Security headers: a strict Content-Security-Policy on every response, relaxed for framing on embeds only.

Django's SecurityMiddleware already sends `X-Content-Type-Options`, `Referrer-Policy` and
`Cross-Origin-Opener-Policy` (settings.SECURE_*), and XFrameOptionsMiddleware `X-Frame-Options: DENY`.
This middleware adds the CSP and exempts `/embed/` pages from both framing refusals: embeds exist to be
framed by other sites (settings.EXPLAINER_EMBED_ORIGINS names which; "*" = any). A view that sets its
own complete policy keeps it; a partial one is completed (see with_view_policy).

The policy allows no inline script and no inline style: pages load `<script type="module" src>` and
stylesheets from this origin, and diagrams set styles through the CSSOM (`node.style.cssText`), which a
CSP does not govern, never through a `style` attribute.
"""
from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.utils.deprecation import MiddlewareMixin

EMBED_PREFIX = "/embed/"
HEADER = "Content-Security-Policy"


def websocket_source(request) -> str:
    """This host's own socket scheme (wss behind TLS): 'self' alone is not honoured for ws: by every browser."""
    try:
        host = request.get_host()
    except DisallowedHost:  # the response refusing that host needs no socket
        return ""
    return f"{'wss' if request.is_secure() else 'ws'}://{host}"


def frame_ancestors(path: str) -> str:
    """Nobody frames the site, except the embed pages, which the configured origins may frame."""
    if not path.startswith(EMBED_PREFIX):
        return "'none'"
    origins = settings.EXPLAINER_EMBED_ORIGINS
    if "*" in origins:
        return "*"
    return " ".join(origins) or "'none'"  # no origins: embeds are off, as their socket is


def directives_of(policy: str) -> dict[str, str]:
    return {part.split()[0].lower(): part.strip() for part in policy.split(";") if part.strip()}


def with_view_policy(own: str, site: str) -> str:
    """A view's own policy wins. One without default-src (e.g. only `frame-ancestors *`) gets the site's
    other directives added: each restricts something the view left open, so this only tightens it."""
    own_directives = directives_of(own)
    if "default-src" in own_directives:
        return own
    extra = [text for name, text in directives_of(site).items() if name not in own_directives]
    return "; ".join([*own_directives.values(), *extra])


def content_security_policy(request) -> str:
    """The policy for one response: same-origin scripts, styles, fetches and sockets only."""
    directives = {
        "default-src": "'self'",
        "script-src": "'self'",
        "style-src": "'self'",
        "img-src": "'self' data:",
        "font-src": "'self'",
        "connect-src": f"'self' {websocket_source(request)}".strip(),
        "object-src": "'none'",
        "base-uri": "'none'",
        "form-action": "'self'",
        "frame-ancestors": frame_ancestors(request.path),
    }
    return "; ".join(f"{name} {value}" for name, value in directives.items())


# Static files are scripts, styles and images used by pages; opened on their own they may do nothing.
STATIC_FILE_POLICY = "default-src 'none'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; " \
    "base-uri 'none'; form-action 'none'"


def static_file_headers(headers, path: str, url: str) -> None:
    """WhiteNoise's hook (settings.WHITENOISE_ADD_HEADERS_FUNCTION): static files get the CSP and nosniff too."""
    headers[HEADER] = STATIC_FILE_POLICY
    headers["X-Content-Type-Options"] = "nosniff"


class SecurityHeadersMiddleware(MiddlewareMixin):
    """Adds the CSP (completing a view's partial one); on /embed/ also lifts X-Frame-Options.

    Listed after XFrameOptionsMiddleware so its process_response runs first and can mark embeds exempt.
    """

    def process_response(self, request, response):
        if request.path.startswith(EMBED_PREFIX):
            response.xframe_options_exempt = True
        site = content_security_policy(request)
        response[HEADER] = with_view_policy(response[HEADER], site) if HEADER in response else site
        return response

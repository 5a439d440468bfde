"""ASGI entry point: HTTP goes to Django, WebSockets to Channels, worker channels to inference workers."""
import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "explainer.settings")
# Set up Django before importing anything that touches models or settings (routing, consumers).
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.sessions import SessionMiddlewareStack  # noqa: E402
from django.conf import settings  # noqa: E402

from explainer.cors import CorsMiddleware  # noqa: E402
from explainer.origins import SameOriginValidator  # noqa: E402
from explainer.daphne_patch import patch_daphne_shutdown  # noqa: E402
from explainer.services.device.executors import serial_torch_here  # noqa: E402
from explainer.routing import embed_patterns, site_patterns  # noqa: E402
from explainer.worker import worker_router  # noqa: E402

patch_daphne_shutdown()
serial_torch_here()  # this thread runs the event loop: model work runs on the devices' threads (executors.py)


class WebSocketRouter:
    """The article's and host's sockets accept only this site's own origin (scheme, host and port) and
    CSRF_TRUSTED_ORIGINS; embeds also EXPLAINER_EMBED_ORIGINS (explainer/origins.py)."""

    def __init__(self):
        self.site = SameOriginValidator(SessionMiddlewareStack(URLRouter(site_patterns)),
                                        lambda: settings.CSRF_TRUSTED_ORIGINS)
        # The site's own origin too (always admitted): a live iframe embed's socket comes from the Hit Enter page itself.
        self.embed = SameOriginValidator(URLRouter(embed_patterns), lambda: settings.EXPLAINER_EMBED_ORIGINS)

    async def __call__(self, scope, receive, send):
        app = self.embed if scope["path"].startswith("/ws/embed/") else self.site
        return await app(scope, receive, send)


application = ProtocolTypeRouter(
    {
        # Daphne is the only server in front of the site, so Django serves its static files (WhiteNoise, settings.py).
        "http": CorsMiddleware(django_asgi_app),
        "websocket": WebSocketRouter(),
        # `manage.py runworker inference-0 …` (REDIS_URL mode): model steps for sockets on any Daphne.
        "channel": worker_router,
    }
)

# Everything imported by now (Django, torch, transformers: a few hundred thousand objects) lives as long as the
# process: move it out of the garbage collector's way. Otherwise each full collection walks it again, and under
# a room's load that was a 200 ms pause in every visitor's step at once (bench/load.py, ITL p95).
# And collect the old generation less often: a 32-visitor tick makes ~30,000 short-lived containers (each step's
# nested lists), enough to start a full collection every second or two.
gc.collect()
gc.freeze()
gc.set_threshold(10_000, 10, 100)

"""ASGI entry point: HTTP goes to Django, WebSockets to Channels."""
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "explainer.settings")
# Set up Django before importing anything that touches models or settings (routing, consumers).
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from channels.sessions import SessionMiddlewareStack  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from explainer.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        # Daphne is the only server in front of the site, so Django serves its few static files itself.
        "http": ASGIStaticFilesHandler(django_asgi_app),
        "websocket": AllowedHostsOriginValidator(SessionMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)

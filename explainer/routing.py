"""WebSocket routes (the Origin checks wrap them in explainer/asgi.py)."""
from django.urls import path

from explainer.consumers import EmbedConsumer, VisitorConsumer
from explainer.host import HostConsumer

site_patterns = [path("ws/session/", VisitorConsumer.as_asgi()), path("ws/host/", HostConsumer.as_asgi())]
embed_patterns = [path("ws/embed/", EmbedConsumer.as_asgi())]
websocket_urlpatterns = site_patterns + embed_patterns

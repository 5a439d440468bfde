"""WebSocket routes (the Origin checks wrap them in explainer/asgi.py)."""
from django.urls import path

from explainer.consumers import EmbedConsumer, SessionConsumer
from explainer.host import HostConsumer

session_patterns = [path("ws/session/", SessionConsumer.as_asgi()), path("ws/host/", HostConsumer.as_asgi())]
embed_patterns = [path("ws/embed/", EmbedConsumer.as_asgi())]
websocket_urlpatterns = session_patterns + embed_patterns

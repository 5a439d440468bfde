"""WebSocket routes."""
from django.urls import path

from explainer.consumers import SessionConsumer

websocket_urlpatterns = [path("ws/session/", SessionConsumer.as_asgi())]

"""WebSocket routes; /ws/session/ is added with the step engine."""
websocket_urlpatterns = []

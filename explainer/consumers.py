"""The visitor's socket: validate each frame, hand it to the visitor's run, send what comes back."""
import logging

from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from explainer.protocol import ProtocolError, parse_frame
from explainer.services.sessions import VisitorRun, as_error

log = logging.getLogger(__name__)


class SessionConsumer(AsyncJsonWebsocketConsumer):
    """One generation session per socket (docs/protocol.md)."""

    async def connect(self):
        """Accept and say the server is ready."""
        self.run = VisitorRun(self.send_json)
        await self.accept()
        await self.send_json({"type": "status", "state": "ready", "message": ""})

    async def disconnect(self, code):
        """Cancel the run and free its cache and kept tensors."""
        await self.run.end()

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        """Parse, dispatch to the verb's handler; any refusal is an `error` and the socket stays open."""
        try:
            message = parse_frame(text_data, bytes_data, settings.EXPLAINER_MAX_FRAME_BYTES)
            await getattr(self.run, message["type"])(message)
        except Exception as exc:
            if not isinstance(exc, ProtocolError):
                log.info("refused frame: %s", exc)
            await self.send_json(as_error(exc))

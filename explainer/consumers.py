"""The sockets: validate each frame, hand it to a service, send what comes back.

`/ws/session/` is the article's socket; `/ws/embed/` is the same for embedded widgets on other sites
(its Origin check is settings.EXPLAINER_EMBED_ORIGINS instead of ALLOWED_HOSTS, and it never follows a
workshop host). The host's socket lives in explainer/host.py.
"""
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from explainer.messages import status_payload
from explainer.protocol import ReleasedOnExit, StrictJson, parse_frame
from explainer.services.admission import limits
from explainer.services.run import placement
from explainer.services.workshop import following
from explainer.services.run.visitor_run import refusal

try:  # the exception a send to a closed socket raises, where this channels version has one
    from channels.exceptions import Disconnected
except ImportError:  # pragma: no cover - channels 4.3 has none: Daphne drops sends to gone sockets itself
    Disconnected = ConnectionError
SOCKET_GONE = (Disconnected, ConnectionError)


class VisitorConsumer(ReleasedOnExit, StrictJson, AsyncJsonWebsocketConsumer):
    """A visitor's socket (/ws/session/): one run at a time (docs/protocol.md)."""

    follows_workshop = True

    async def connect(self):
        """Admit (connections per IP), open the visitor's run, join the workshop, say ready."""
        self.guard = limits.SocketGuard(self.scope)
        try:
            await self.accept()
            refusal = self.guard.admit()
            if refusal is not None:
                await self.send_json(refusal)
                await self.close(code=limits.REFUSED_CLOSE_CODE)
                return
            self.run = placement.open_run(self.send_frame, self.channel_name, self.guard.address)
            self.follower = following.Follower(self) if self.follows_workshop else following.NoFollower()
            await self.follower.join()
            await self.send_frame(status_payload("ready"))
        except BaseException:  # disconnect() never runs after a failed connect: the address's count comes back here
            await self.disconnect(None)
            raise

    async def send_frame(self, message: dict) -> int:
        """Every server → client message goes through here; strict JSON; returns its encoded size (the outbound
        window counts it). A socket that has gone is a close, not an error: nothing is sent to it again."""
        if getattr(self, "gone", False):
            return 0
        self.frames_sent = getattr(self, "frames_sent", 0) + 1  # what the page's acks count (workshop catch-up)
        text = await self.encode_json(message)
        try:
            await self.send(text_data=text)
        except SOCKET_GONE:
            self.gone = True
        return len(text.encode("utf-8", "surrogatepass"))

    async def disconnect(self, code):
        """Cancel the run and free its cache and kept tensors; leave the workshop group (once)."""
        self.gone = True
        if not self.first_disconnect():
            return
        try:
            if hasattr(self, "follower"):
                await self.follower.leave()
            if hasattr(self, "run"):
                await self.run.end()
        finally:
            self.guard.release()

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        """Parse, dispatch to the verb's handler; any refusal is an `error` and the socket stays open."""
        if not hasattr(self, "run"):
            return
        try:
            self.guard.check_rate()
            message = parse_frame(text_data, bytes_data, settings.EXPLAINER_MAX_FRAME_BYTES)
            kind = message["type"]
            if kind in following.VERBS:
                await self.follower.handle(message)

            else:
                if kind == "start":
                    await self.follower.go_own_way()
                elif kind == "ack":
                    self.follower.saw_ack(message)
                await getattr(self.run, kind)(message)
        except Exception as exc:  # answered in order: after the step in flight or asked for, if any
            await self.run.reply(refusal(exc))
            if self.guard.should_close:  # kept flooding past the rate limit
                await self.close(code=limits.REFUSED_CLOSE_CODE)

    async def worker_frame(self, event):
        """A message from this visitor's run on an inference worker (REDIS_URL mode)."""
        await self.run.on_worker_frame(event)

    async def workshop_frame(self, event):
        """A message of the host's broadcast run (sent to the workshop group)."""
        await self.follower.on_frame(event)

    async def workshop_event(self, event):
        """Workshop control news (pins, limits, sync requests) for this socket."""
        await self.follower.on_event(event)


class EmbedConsumer(VisitorConsumer):
    """An embedded widget's own session: same protocol, no workshop."""

    follows_workshop = False

"""Inference workers (REDIS_URL mode): `python manage.py runworker inference-0` holds the model and runs
visitors' sessions for sockets served by any Daphne process (docs/deploy.md).

Channels' worker gives each listened channel one application instance, so one `InferenceWorker` sees
every message sent to its channel. Messages from a socket's RemoteRun (explainer/services/run/remote.py):
  {"type": "visitor.frame", "reply": <socket channel>, "message": <client message>}
  {"type": "visitor.end", "reply": …}      the socket closed: free the session
  {"type": "worker.ping", "reply": …}      liveness and load; answered with a pong
Everything goes back to the socket as {"type": "worker.frame", "frame": <server message> | None, "pong": …}.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid

from channels.consumer import AsyncConsumer
from channels.exceptions import ChannelFull
from django.conf import settings

from explainer.protocol import ProtocolError
from explainer.services.workshop import room_stats
from explainer.services.admission.capacity import generating
from explainer.services.admission.start_queue import local_queue, run_lengths
from explainer.services.run.visitor_run import VisitorRun, refusal
from explainer.words import packed_message
from inference.wire.said import said

log = logging.getLogger(__name__)


class VisitorSlot:
    """One socket's session on this worker: its VisitorRun and an ordered inbox (verbs run in order)."""

    def __init__(self, worker: "InferenceWorker", reply: str):
        self.worker, self.reply = worker, reply
        self.run = VisitorRun(self.send)
        self.inbox: asyncio.Queue = asyncio.Queue(maxsize=256)
        self.seen = time.monotonic()
        self.task = asyncio.create_task(self._serve())

    async def send(self, frame: dict) -> None:
        frame = packed_message(frame)  # the socket's Daphne says its sentences in the visitor's language
        if frame.get("type") == "status":
            frame = {**frame, "worker": self.worker.name}  # which worker runs this session (docs/deploy.md)
        await self.worker.reply(self.reply, {"type": "worker.frame", "frame": frame, "worker": self.worker.name,
                                             "instance": self.worker.instance})

    async def _serve(self) -> None:
        while True:
            message = await self.inbox.get()
            try:
                await getattr(self.run, message["type"])(message)
            except Exception as exc:
                await self.send(refusal(exc))

    async def close(self) -> None:
        self.task.cancel()
        await self.run.end()


class InferenceWorker(AsyncConsumer):
    """All sessions sent to one worker channel; the model is the process's one shared copy."""

    async def websocket_connect(self, _message):  # pragma: no cover - never routed here
        raise ValueError("inference workers serve channels, not sockets")

    @property
    def name(self) -> str:
        return self.scope["channel"]

    @property
    def instance(self) -> str:
        """This life of the worker: a worker restarted on the same channel holds none of its sessions."""
        if not hasattr(self, "_instance"):
            self._instance = uuid.uuid4().hex[:12]
        return self._instance

    def _slots(self) -> dict[str, VisitorSlot]:
        if not hasattr(self, "slots"):
            self.slots = {}
            self.reaper = asyncio.create_task(self._reap())
        return self.slots

    async def reply(self, channel: str, message: dict) -> None:
        try:
            await self.channel_layer.send(channel, message)
        except ChannelFull:  # the socket's Daphne stopped reading: it has gone, so its session goes too
            log.warning("reply channel %s is full; ending its session", channel)
            slot = self._slots().pop(channel, None)
            if slot:
                asyncio.create_task(slot.close())

    async def visitor_frame(self, event):
        """Queue the client's message for its session (creating the session's slot on first use)."""
        slots = self._slots()
        slot = slots.get(event["reply"]) or slots.setdefault(event["reply"], VisitorSlot(self, event["reply"]))
        slot.seen = time.monotonic()
        slot.run.keep_while_connected = bool(event.get("keep_while_connected"))  # a host's broadcast (VisitorRun)
        try:
            slot.inbox.put_nowait(event["message"])
        except asyncio.QueueFull:
            await slot.send(ProtocolError("rate_limited", said("too many messages waiting for this session")).as_message())

    async def visitor_end(self, event):
        """Free the session in the background: this handler must not wait behind other sessions' steps."""
        slot = self._slots().pop(event["reply"], None)
        if slot:
            asyncio.create_task(slot.close())

    async def worker_ping(self, event):
        """Answer with this worker's load; a ping also keeps the pinging socket's session alive."""
        slot = self._slots().get(event["reply"])
        if slot:
            slot.seen = time.monotonic()
        pong = {"worker": self.name, "instance": self.instance, "active": generating.active, "limit": generating.limit,
                "sessions": len(self._slots()), "queued": len(local_queue), "mean_run_s": run_lengths.mean_s}
        if event.get("stats"):  # the workshop host's page: this worker's model, device, memory and queue
            pong["stats"] = room_stats.server_stats()
        await self.reply(event["reply"], {"type": "worker.frame", "frame": None, "pong": pong})

    async def _reap(self) -> None:
        """Sessions whose socket stopped pinging (its Daphne died) are ended, so their memory comes back."""
        while True:
            await asyncio.sleep(settings.EXPLAINER_WORKER_TIMEOUT_S)
            cutoff = time.monotonic() - 3 * settings.EXPLAINER_WORKER_TIMEOUT_S
            for reply, slot in list(self.slots.items()):
                if slot.seen < cutoff:
                    self.slots.pop(reply, None)
                    await slot.close()


async def worker_router(scope, receive, send):
    """Every channel a `runworker` listens on is an inference worker channel."""
    return await InferenceWorker.as_asgi()(scope, receive, send)

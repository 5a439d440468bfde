"""A socket's run on an inference worker (REDIS_URL mode): same verbs as VisitorRun, executed remotely.

A session stays on the worker chosen at `start` (its cache lives there). While one is assigned, the
socket pings it every second; a worker that stops answering for EXPLAINER_WORKER_TIMEOUT_S seconds has
died, and the visitor gets a `worker_lost` error while every other worker's visitors go on. So does a worker
that answers as a new instance (restarted on the same channel within the timeout): the session died with it.
"""
from __future__ import annotations

import asyncio
import logging
import time

from channels.layers import get_channel_layer
from django.conf import settings

from explainer.protocol import ProtocolError
from explainer.messages import error_payload, status_payload, tokenized_payload
from explainer.services.run.remote_line import RemoteLine, least_loaded, room
from inference.wire.said import said

log = logging.getLogger(__name__)
PING_EVERY_S = 1.0
# What a visitor reads while no worker answers (operator detail goes to the log and the host page).
STARTING = said("The class server is starting (model loading, about 30 s). Your run starts as soon as it is ready.")
RESTARTING = said("The class server is restarting part of itself. Your run starts as soon as it is back.")
WORKER_LOST = said("The class server restarted part of itself, the part running your run. Press Play again.")
NO_WORKER = said("No model is running on the server right now. Press Play again in a minute, or tell the host.")


class WorkersSeen:
    """Whether any worker has answered this process yet: none yet means they are still loading the model."""
    answered = False


class RemoteRun(RemoteLine):
    """Forwards each verb to this socket's worker and hands the worker's frames to `send`."""

    def __init__(self, send, channel_name: str):
        self.send, self.channel_name = send, channel_name
        self.layer = get_channel_layer()
        self.worker: str | None = None
        self.instance: str | None = None  # the life of the worker that holds the session (its pongs say)
        self.keep_while_connected = False  # a host's broadcast: told to the worker's VisitorRun with every message
        self.heard = 0.0
        self.watchdog: asyncio.Task | None = None
        self.pongs: dict[str, dict] = {}
        self.pong_arrived = asyncio.Event()
        self.surveyed: dict[str, tuple[float, dict]] = {}  # worker -> (when, pong with stats), for the host
        self.surveying_since: float | None = None  # the host page's first survey (silence is judged after 3 s)
        self.outbox: asyncio.Queue = asyncio.Queue(maxsize=64)
        self.sender: asyncio.Task | None = None

    # ---- verbs --------------------------------------------------------------------------------
    # Verbs only queue the message: the consumer must stay free to dispatch the worker's pongs and
    # frames, which arrive on the same socket channel while a start is still choosing its worker.
    async def start(self, message: dict) -> None:
        self._queue(message)

    async def reply(self, message: dict) -> None:
        """A refusal made by the socket itself (the worker orders its own replies)."""
        await self.send(message)

    def __getattr__(self, verb: str):
        """pause, resume, step, stop, fork, detail, retemper, measure, ack: forwarded as they are."""
        if verb.startswith("_"):
            raise AttributeError(verb)

        async def forward(message: dict) -> None:
            self._queue(message)

        return forward

    def _queue(self, message: dict) -> None:
        if message["type"] == "ack" and self.worker is None:
            return  # acks of frames no worker sent (a follower's page, a lost worker's): never `no_run`
        if message["type"] == "stop" and self._leave_line():
            return  # the start it stops is still waiting in line (remote_line.py), ahead of it in the outbox
        if self.outbox.full():
            raise ProtocolError("rate_limited", said("too many messages waiting for the inference worker"))
        self.outbox.put_nowait(message)
        if self.sender is None or self.sender.done():
            self.sender = asyncio.create_task(self._send_in_order())

    async def _send_in_order(self) -> None:
        while not self.outbox.empty():
            message = self.outbox.get_nowait()
            try:
                await self._deliver(message)
            except ProtocolError as exc:  # a count that could not be asked is the count line's news, not the banner's
                await self.send({**tokenized_payload(None), "error": exc.as_message()} if message["type"] == "tokenize"
                                else exc.as_message())

    async def _deliver(self, message: dict) -> None:
        """A start picks the least busy live worker; everything else goes to the session's worker."""
        if message["type"] == "tokenize" and self.worker is None:  # a count needs no session: any live worker, kept by none
            await self._send_to(await self._choose_worker(), {"type": "visitor.frame", "reply": self.channel_name,
                                                              "message": message})
            return
        if message["type"] == "start" or (self.worker is None and message["type"] == "measure"):
            await self._release_worker()
            worker = await self._choose_worker(settings.EXPLAINER_WORKER_START_WAIT_S)
            if message["type"] == "start" and (worker := await self._worker_with_room(worker)) is None:
                return  # left the line, or the line was full: the visitor has been told
            self.worker = worker
            self.instance = self.pongs[self.worker].get("instance")
            self.heard = time.monotonic()
            self.watchdog = asyncio.create_task(self._watch())
        elif self.worker is None:
            if message["type"] == "ack":  # a follower's or a lost session's reading: nothing to tell a worker
                return
            raise ProtocolError("no_run", said("start a run first"))
        await self._send_to(self.worker, {"type": "visitor.frame", "reply": self.channel_name, "message": message,
                                          "keep_while_connected": self.keep_while_connected})
        if message["type"] == "start":
            self._sent_start(self.worker)

    async def end(self) -> None:
        """The socket closed: the worker frees the session."""
        if self.sender:
            self.sender.cancel()
            self.sender = None
        await self._release_worker()

    async def _release_worker(self) -> None:
        self._answered()
        if self.watchdog:
            self.watchdog.cancel()
            self.watchdog = None
        if self.worker:
            worker, self.worker, self.instance = self.worker, None, None
            await self._send_to(worker, {"type": "visitor.end", "reply": self.channel_name})

    # ---- from the worker ---------------------------------------------------------------------
    async def on_worker_frame(self, event: dict) -> None:
        pong = event.get("pong")
        if pong is not None:
            self.pongs[pong["worker"]] = pong
            if "stats" in pong:
                self.surveyed[pong["worker"]] = (time.monotonic(), pong)
            self.pong_arrived.set()
            if pong["worker"] == self.worker:
                if self._another_life(pong):
                    await self._lose()
                else:
                    self.heard = time.monotonic()
            return
        if event["frame"].get("type") == "tokenized":  # a count, from whichever worker was asked (the run's or any)
            await self.send(event["frame"])
        elif self.worker is not None and event.get("worker", self.worker) == self.worker and not self._another_life(event):
            self.heard = time.monotonic()
            self._answered()
            await self.send(event["frame"])
        # else: a restarted worker answering messages queued for its previous life (this session lived on
        # that life, or lives on another worker now): its `no_run`s must not reach the page

    def _another_life(self, event: dict) -> bool:
        """Whether a pong or frame comes from a later instance of the session's worker than the one chosen."""
        return None not in (self.instance, event.get("instance")) and event["instance"] != self.instance

    async def survey_workers(self) -> tuple[list[dict], list[str]]:
        """The workers' latest answers with their stats (at most 3 s old), then ask again: the host page's
        view of the cluster, since in this mode the model, the generations and the queues live there.
        Also the configured workers that have not answered lately (dead, or not started): a warning."""
        now = time.monotonic()
        fresh = [pong for when, pong in self.surveyed.values() if now - when < 3 * PING_EVERY_S]
        if self.surveying_since is None:
            self.surveying_since = now
        answered = {pong["worker"] for pong in fresh}
        silent = [] if now - self.surveying_since < 3 * PING_EVERY_S else \
            [w for w in settings.EXPLAINER_WORKER_CHANNELS if w not in answered]
        for worker in settings.EXPLAINER_WORKER_CHANNELS:
            await self._send_to(worker, {"type": "worker.ping", "reply": self.channel_name, "stats": True})
        return sorted(fresh, key=lambda pong: pong["worker"]), silent

    # ---- helpers ------------------------------------------------------------------------------
    async def _send_to(self, worker: str, event: dict) -> None:
        try:
            await self.layer.send(worker, event)
        except Exception as exc:  # ChannelFull: a dead worker's queue filled up
            log.warning("could not reach worker %s: %s", worker, exc)

    async def _choose_worker(self, wait_s: float = 0.0) -> str:
        """The least loaded worker that answers a ping. None answering, a run waits up to `wait_s` (the workers
        are loading the model, or the Procfile is restarting one), telling the visitor so, not an error."""
        deadline = time.monotonic() + wait_s
        told = False
        while not await self._ping_workers():
            if time.monotonic() >= deadline:
                log.warning("no inference worker answered; start one with `python manage.py runworker inference-0` "
                            "(docs/deploy.md)")
                raise ProtocolError("no_worker", NO_WORKER)
            if not told:
                told = True
                await self.send(status_payload("loading", RESTARTING if WorkersSeen.answered else STARTING))
        WorkersSeen.answered = True
        return least_loaded([p for p in self.pongs.values() if room(p) > 0] or list(self.pongs.values()))

    async def _ping_workers(self) -> bool:
        """Ping every configured worker and gather the answers that come within EXPLAINER_WORKER_PICK_S."""
        self.pongs.clear()
        self.pong_arrived.clear()
        for worker in settings.EXPLAINER_WORKER_CHANNELS:
            await self._send_to(worker, {"type": "worker.ping", "reply": self.channel_name})
        deadline = time.monotonic() + settings.EXPLAINER_WORKER_PICK_S
        expected = len(settings.EXPLAINER_WORKER_CHANNELS)
        while len(self.pongs) < expected and time.monotonic() < deadline:
            self.pong_arrived.clear()
            try:
                await asyncio.wait_for(self.pong_arrived.wait(), deadline - time.monotonic())
            except asyncio.TimeoutError:
                break
        return bool(self.pongs)

    async def _watch(self) -> None:
        """Ping the session's worker; silence past the timeout means it died."""
        while self.worker is not None:
            await asyncio.sleep(PING_EVERY_S)
            await self._send_to(self.worker, {"type": "worker.ping", "reply": self.channel_name})
            if time.monotonic() - self.heard > settings.EXPLAINER_WORKER_TIMEOUT_S:
                await self._lose()
                return

    async def _lose(self) -> None:
        """The session's worker died (silent, or answering as a new instance): the visitor is told, once."""
        self._answered()
        lost, self.worker, self.instance = self.worker, None, None
        watchdog, self.watchdog = self.watchdog, None
        if watchdog is not None and watchdog is not asyncio.current_task():
            watchdog.cancel()
        log.warning("worker %s stopped or restarted", lost)
        await self.send(error_payload("worker_lost", WORKER_LOST))  # the operator's detail is the log line above
        await self.send(status_payload("finished", WORKER_LOST, reason="worker_lost"))  # why, named, as relay.py reads it

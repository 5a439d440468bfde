"""Workshop mode, the visitor's side: follow the host's broadcast run step by step, or go on alone.

Every article socket joins the channel-layer group "workshop". The host's socket (explainer/host.py)
sends each frame of its broadcast run to that group, numbered (`broadcast` id, `seq` from 0); a
following visitor forwards them to its page in `seq` order. A visitor who starts following mid-run
asks the group for the frames so far (a "sync" event); the host answers that channel alone.
"""
from __future__ import annotations

import asyncio
import json
import time

from django.conf import settings

from explainer.protocol import ProtocolError
from explainer.services.workshop import policy, presence, quiz
from explainer.services.admission.limits import RateLimited, TokenBucket
from explainer.messages import answered_payload, workshop_payload
from inference.wire.said import said

VERBS = ("follow", "answer")
GROUP = "workshop"
RESYNC_EVERY = 32  # frames waiting behind a gap: ask the host again (its answer may have been dropped)
SYNC_AGAIN_S = 2.0  # at most one catch-up request in flight per follower
FOLLOW_RATE_PER_S, FOLLOW_BURST = 0.5, 4  # follow toggles: a few clicks, never a replay flood
WORKSHOP_OFF = said("workshop mode is off on this server")

def refuse_own_runs_if_off(snapshot: dict) -> None:
    if not snapshot["limits"]["own_runs_allowed"]:
        raise ProtocolError("workshop_pinned", said("the workshop host has turned off visitors' own runs: "
                                                    "follow the host's run"))


class NoFollower:
    """For sockets that never follow a host (embeds)."""

    following = False

    def __init__(self, consumer=None):
        self.consumer = consumer

    async def join(self): pass

    async def leave(self): pass

    async def go_own_way(self):
        """An embed's own start obeys the host's "own runs off" as an article's does."""
        if policy.enabled():
            refuse_own_runs_if_off(await policy.snapshot())

    async def handle(self, message):
        raise ProtocolError("invalid_state", said("this socket cannot follow a workshop host"), "type")

    async def on_frame(self, event): pass

    async def on_event(self, event): pass

    def saw_ack(self, message): pass


class Follower(NoFollower):
    """One article socket's place in the workshop: following or not, and the host frames still to forward."""

    def __init__(self, consumer):
        super().__init__(consumer)
        self.joined = False
        self.snapshot = policy.as_snapshot(None)
        self.toggles = TokenBucket(FOLLOW_RATE_PER_S, FOLLOW_BURST)
        self.acked, self.acking = 0, False  # the page's acks: host frames go out within the window too
        self.room = asyncio.Event()
        self.flushing = asyncio.Lock()
        self.waiter: asyncio.Task | None = None
        self.projector = False
        self.sync_asked = 0.0
        self._reset(None)

    def _reset(self, broadcast_id: str | None) -> None:
        self.broadcast_id, self.next_seq, self.pending, self.pending_bytes = broadcast_id, 0, {}, 0
        self.host_step = self.page_step = 0  # the broadcast's latest step heard, and the latest sent to the page
        self.overflowed = False  # frames were dropped for the byte bound: ask again once drained

    @property
    def layer(self):
        return self.consumer.channel_layer

    async def join(self) -> None:
        """Join the group and tell the page what the host is doing (workshop mode only)."""
        if not policy.enabled() or self.layer is None:
            return
        await self.layer.group_add(GROUP, self.consumer.channel_name)
        self.joined = True
        self.projector = await policy.is_host_scope(self.consumer.scope)  # the host's own projector view: no student
        presence.arrive(self)
        presence.census_publisher.ensure_running()  # the host page counts this process's visitors with the room's
        self.snapshot = await policy.snapshot()
        await self._tell()

    async def leave(self) -> None:
        presence.leave(self)
        if self.waiter:
            self.waiter.cancel()
        if self.joined:
            self.joined = False
            await self.layer.group_discard(GROUP, self.consumer.channel_name)

    async def handle(self, message: dict) -> None:
        """`follow`, or an `answer` to the host's question."""
        if message["type"] == "answer":
            await self._answer(message)
        else:
            await self._follow(message)

    async def _answer(self, message: dict) -> None:
        """This socket's guess at the open question (a second one changes it); `answered` echoes how it counted."""
        if not self.joined:
            raise ProtocolError("invalid_state", WORKSHOP_OFF, "type")
        fields = quiz.answer_fields(message)
        await self.consumer.send_frame(answered_payload(await quiz.record_answer(fields, self.consumer.channel_name)))

    async def _follow(self, message: dict) -> None:
        """{"type": "follow", "on": true|false}."""
        on = message.get("on")
        if not isinstance(on, bool):
            raise ProtocolError("wrong_type", said("%(field)s must be true or false", field="on"), "on")
        if not self.joined:
            raise ProtocolError("invalid_state", WORKSHOP_OFF, "type")
        if wait := self.toggles.take():
            raise RateLimited(round(wait, 2))
        if on and not self.following:
            await self.consumer.run.end()  # one run on the page at a time: the host's replaces the visitor's
        if on != self.following:
            self.following = on
            self._reset(None)
        await self._tell()
        if on:
            await self._ask_sync(force=True)  # the frames of a host's run already on its way

    async def go_own_way(self) -> None:
        """Before the visitor's own start: refused while the host allows no own runs; else stop following."""
        if not self.joined:
            return
        self.snapshot = await policy.snapshot()
        refuse_own_runs_if_off(self.snapshot)
        if self.following:
            self.following = False
            self._reset(None)
            await self._tell()

    async def on_frame(self, event: dict) -> None:
        """One frame of the host's run, for the group: forwarded in order while following."""
        if self.following:
            await self._accept(event["broadcast"], [(event["seq"], event["frame"], event.get("bytes"))])

    async def on_event(self, event: dict) -> None:
        """News from a host: its state (pins, limits, broadcast), or the frames this socket asked for."""
        kind = event.get("kind")
        if kind == "state":
            self.snapshot = event["state"]
            await self._tell()
        elif kind == "frames" and self.following:
            await self._accept(event["broadcast"], event["frames"])
            # What the host did not keep will never come: go on from the first frame it still has.
            offered = [seq for seq, _ in event["frames"] if seq >= self.next_seq]
            skip_to = min(offered) if offered else event["next_seq"]
            if event["broadcast"] == self.broadcast_id and self.next_seq not in self.pending and self.next_seq < skip_to:
                self.next_seq = skip_to
                self.pending = {seq: f for seq, f in self.pending.items() if seq >= self.next_seq}
                self.pending_bytes = sum(size for _, size in self.pending.values())
                await self._flush()

    def saw_ack(self, message: dict) -> None:
        """The page has read `received` messages on this socket: held host frames may go on."""
        received = message.get("received")
        if isinstance(received, int) and not isinstance(received, bool):
            self.acked, self.acking = max(self.acked, received), True
            self.room.set()

    async def _accept(self, broadcast_id: str | None, frames) -> None:
        """Keep the frames still to forward, at most EXPLAINER_FOLLOW_PENDING_BYTES of them (the rest are
        asked for again once the page has read these), then forward what the window allows."""
        if broadcast_id is None:
            return
        if broadcast_id != self.broadcast_id:  # a new broadcast: its frames start again at 0
            self._reset(broadcast_id)
        for seq, frame, *size in frames:  # the host measured a live frame's size once for the whole room
            if frame.get("type") == "step":
                self.host_step = max(self.host_step, frame["step"])
            if seq < self.next_seq or seq in self.pending:
                continue
            size = size[0] if size and size[0] is not None else len(json.dumps(frame))
            if self.pending_bytes + size > settings.EXPLAINER_FOLLOW_PENDING_BYTES:
                self.overflowed = True
                continue
            self.pending[seq] = (frame, size)
            self.pending_bytes += size
        await self._flush()
        if self.pending and self.next_seq not in self.pending and len(self.pending) % RESYNC_EVERY == 1:
            await self._ask_sync()  # a gap: some frames were dropped on the way (a full channel)

    def steps_behind(self) -> int:
        """How many of the broadcast's steps this page has not been sent yet (it reads slowly, or caught up late)."""
        return self.host_step - self.page_step

    def _behind(self) -> bool:
        """The page's unread messages on this socket: the run's window, or the ceiling before any ack."""
        sent = getattr(self.consumer, "frames_sent", 0)
        if self.acking:
            return sent - self.acked > settings.EXPLAINER_OUTBOUND_WINDOW
        return sent > settings.EXPLAINER_UNACKED_MAX

    async def _flush(self) -> None:
        """Forward the frames in order while the page keeps up; else a waiter goes on when it has read."""
        if await self._forward() and (self.waiter is None or self.waiter.done()):
            self.waiter = asyncio.create_task(self._resume_when_read())

    async def _forward(self) -> bool:
        """Send what the window allows; True when frames wait for the page's acks (bounded in bytes)."""
        async with self.flushing:
            while self.next_seq in self.pending:
                if self._behind():
                    return True
                frame, size = self.pending.pop(self.next_seq)
                self.pending_bytes -= size
                self.next_seq += 1
                await self.consumer.send_frame(frame)
                if frame.get("type") == "step":
                    self.page_step = frame["step"]
        if self.overflowed and not self.pending and self.following:
            self.overflowed = False
            await self._ask_sync(force=True)  # the frames dropped for the byte bound
        return False

    async def _resume_when_read(self) -> None:
        while True:
            while self._behind():
                self.room.clear()
                await self.room.wait()
            if not await self._forward():
                return

    async def _ask_sync(self, force: bool = False) -> None:
        """Ask the host for the frames so far; one request in flight (its answer can be big)."""
        now = time.monotonic()
        if not force and now - self.sync_asked < SYNC_AGAIN_S:
            return
        self.sync_asked = now
        await self.layer.group_send(GROUP, {"type": "workshop.event", "kind": "sync", "reply_to": self.consumer.channel_name})

    async def _tell(self) -> None:
        """The page's view of the workshop: the toggle, the banner, the pinned parameters."""
        broadcast = {k: v for k, v in (self.snapshot.get("broadcast") or {}).items() if k != "host"}  # a channel name
        await self.consumer.send_frame(workshop_payload(self.following, policy.is_live(broadcast),
                                                        self.snapshot.get("pins", {}), self.snapshot.get("limits", {}), broadcast))

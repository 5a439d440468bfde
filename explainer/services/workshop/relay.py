"""The host's broadcast and where its frames go: always to the room, and to the host's page while one is connected.

A `BroadcastRelay` owns the broadcast run and listens on a channel of its own (the room's `sync` requests, other
hosts' news, an inference worker's frames), so it outlives the host's socket: when the host's page goes (a
reload, a dropped Wi-Fi, a closed laptop) a live broadcast is parked for EXPLAINER_HOST_GONE_S, still served to
the room (late joiners included), and the host's next socket takes it back. Past that it ends with a note
(`stop_reason: "host_left"`); 0 ends it the moment the host leaves.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time

from channels.exceptions import ChannelFull
from django.conf import settings
from django.core.cache import cache

from explainer.protocol import ProtocolError, encode_frame, integer, json_object
from explainer.services.run import placement
from explainer.services.run.visitor_run import MAX_ACK
from explainer.services.workshop import asking, policy, quiz
from explainer.services.workshop.following import GROUP
from explainer.words import packed_message
from inference.wire.said import said

log = logging.getLogger(__name__)
HOST_LEFT = "host_left"  # the broadcast's stop_reason when it ended because the host was gone too long
RUN_FAILURES = {"model_error", "out_of_memory", "worker_lost"}  # the run broke; every other error refuses a verb


class Broadcast:
    """The host's current broadcast run: its id, its frames so far (bounded, for late joiners), its summary."""

    def __init__(self):
        self.id: str | None = None
        self.summary: dict = {}
        self.kept: list[tuple[int, dict]] = []
        self.next_seq = 0

    def begin(self, fields: dict, host: str) -> None:
        self.id = secrets.token_hex(6)
        self.summary = {"id": self.id, "host": host, "started_at": time.time(), "messages": fields["messages"],
                        "text": fields["text"], "params": fields["params"], "state": "starting", "step": 0}
        self.kept, self.next_seq = [], 0

    def keep(self, frame: dict) -> int:
        """Number the frame; keep it unless it only repeats a status (pause/resume clicks bound the rest)."""
        seq, self.next_seq = self.next_seq, self.next_seq + 1
        if frame["type"] == "status" and self.kept and self.kept[-1][1]["type"] == "status":
            self.kept.pop()
        if len(self.kept) < 2 * settings.EXPLAINER_MAX_NEW_TOKENS + 32:
            self.kept.append((seq, frame))
        if frame["type"] == "step":
            self.summary["step"] = frame["step"]
        elif frame["type"] == "done":
            self.summary["stop_reason"] = frame["stop_reason"]  # "finished (eos)" on the host page
        elif frame["type"] == "status":
            self.summary["state"] = frame["state"]
            if frame.get("reason"):
                self.summary["stop_reason"] = frame["reason"]  # idle_timeout, worker_lost…
        return seq

    @property
    def live(self) -> bool:
        return policy.is_live(self.summary)


class BroadcastRelay:
    """One host's broadcast run, its frames' way to the room and to the host's page (`host`, when connected)."""

    def __init__(self, layer):
        self.layer, self.host, self.broadcast = layer, None, Broadcast()
        self.asking = asking.Asking()  # the host's question to the class, its step held back from the room
        self.frames = 0  # frames the run has sent: what the relay acks for a host that is away
        self.acks_from = 0  # frames sent before the connected host's socket opened: its acks count from there

    @classmethod
    async def opened(cls, layer) -> "BroadcastRelay":
        relay = cls(layer)
        relay.channel = await layer.new_channel()
        relay.run = placement.open_run(relay.send_frame, relay.channel)
        relay.run.keep_while_connected = True  # pausing to explain never ends the broadcast (VisitorRun._idle_limit)
        await layer.group_add(GROUP, relay.channel)
        await relay._beat_once()  # before its first broadcast is stored: policy.as_snapshot reads it live
        relay.reader = asyncio.create_task(relay._read())
        relay.beat = asyncio.create_task(relay._beat())
        return relay

    async def _beat_once(self) -> None:
        try:
            await cache.aset(policy.relay_key(self.channel), time.time(), policy.RELAY_GONE_S)
        except Exception:  # the cache unreachable: policy.relay_alive() then says alive too
            log.warning("broadcast relay: could not say it is alive", exc_info=True)

    async def _beat(self) -> None:
        """This process runs the broadcast: said every RELAY_BEAT_S, so a restart's stale one reads as ended."""
        while True:
            await asyncio.sleep(policy.RELAY_BEAT_S)
            await self._beat_once()

    def attach(self, host) -> None:
        """A host's socket drives the broadcast from now on (acks counted on its socket, from this frame on)."""
        self.host, self.acks_from = host, self.frames

    async def ack(self, message: dict) -> None:
        received = integer(message, "received", 0, MAX_ACK)  # refused by name, as a visitor's own ack is
        await self.run.ack({"type": "ack", "received": self.acks_from + received})

    async def close(self) -> None:
        """End the run and stop listening (the relay is done with)."""
        try:
            await self.run.end()
        finally:
            self.reader.cancel()
            self.beat.cancel()
            await self.layer.group_discard(GROUP, self.channel)
            with contextlib.suppress(Exception):  # best effort: unsaid, it lapses after RELAY_GONE_S anyway
                await cache.adelete(policy.relay_key(self.channel))

    # ---- the run's frames ----------------------------------------------------------------------
    async def send_frame(self, frame: dict) -> None:
        """The broadcast run's `send`: every frame to the room, numbered, and to the host's page."""
        self.frames += 1
        if frame["type"] == "busy":  # no slot for the host's run: the host's news, not the room's
            await self._to_host(frame)
            if self.broadcast.summary.get("state") == "starting":
                self.broadcast.summary["state"] = "busy"
                await self.publish(replaces=self.broadcast.id)
            return
        frame = json_object(encode_frame(packed_message(frame)))  # each page says its sentences in its language
        if frame["type"] == "error":  # a refusal of the host's verb, or the run's failure: the host's to read
            await self._to_host(frame)  # (the room reads the run's state from the status that follows a failure)
            if frame.get("code") in RUN_FAILURES and self.broadcast.summary.get("state") != "finished":
                self.broadcast.summary["state"] = "failed"
                await self.drop_question(pass_on=True)
                await self.publish(replaces=self.broadcast.id)
            return
        if self.asking.holding:  # the class is guessing this step: nobody sees it before the reveal
            step = self.asking.hold(frame)
            if step is not None:
                self.broadcast.summary["quiz"] = await asking.open_question(self.asking, step, self.broadcast)
                await self.publish(replaces=self.broadcast.id)
            return
        await self._pass_on(frame)

    async def _pass_on(self, frame: dict) -> None:
        """Number the frame, send it to the room and to the host's page."""
        seq = self.broadcast.keep(frame)
        await self.layer.group_send(GROUP, {"type": "workshop.frame", "broadcast": self.broadcast.id,
                                            "seq": seq, "frame": frame, "bytes": len(json.dumps(frame))})
        await self._to_host(frame)
        if frame["type"] == "status":
            await self.publish(replaces=self.broadcast.id)

    # ---- the class's question ------------------------------------------------------------------
    async def ask(self) -> None:
        """"Ask the class": the paused broadcast computes its next step, held back until the reveal."""
        if self.broadcast.id is None:
            raise ProtocolError("no_run", said("broadcast a run first"), "type")
        self.asking.refuse_run_verbs()
        if self.broadcast.summary.get("state") != "paused":
            raise ProtocolError("invalid_state", said("pause the broadcast first: the class guesses the next token of "
                                                      "a paused run"), "type")
        self.asking.state = asking.COMPUTING
        try:
            await self.run.step({"type": "step"})
        except BaseException:
            await self.drop_question(pass_on=True)
            raise

    async def reveal(self) -> None:
        """Show the room the model's odds beside its own answers, then the held step and what followed it."""
        if self.asking.state != asking.OPEN:
            raise ProtocolError("no_question", said("ask the class first: no question is open"), "type")
        question = self.asking.question
        outcome = await quiz.reveal(question["id"], quiz.outcome_of(question["step"], question["candidates"]))
        self.broadcast.summary["quiz"] = {**self.broadcast.summary["quiz"], "state": "revealed", "outcome": outcome}
        for frame in self.asking.release():
            await self._pass_on(frame)
        await self.publish(replaces=self.broadcast.id)

    async def drop_question(self, pass_on: bool = False) -> None:
        """The question goes unanswered (a new broadcast, a reset, the run failed); held frames go on if asked."""
        question = self.asking.question
        held = self.asking.release()
        self.broadcast.summary.pop("quiz", None)
        if question is not None:  # its step was never shown: the question, and any answers to it, go
            await quiz.forget(question["id"])
        for frame in held if pass_on else ():
            await self._pass_on(frame)

    async def _to_host(self, frame: dict) -> None:
        if self.host is not None:
            await self.host.send_json(frame)
        elif frame["type"] != "busy":  # nobody reads for an away host: the room's pace is the followers' own
            await self.run.ack({"type": "ack", "received": self.frames})

    async def publish(self, replaces: str | None = None) -> None:
        """Store the broadcast's summary and tell every socket (visitors update, other hosts stand down)."""
        state = await policy.save_broadcast(dict(self.broadcast.summary), replaces)
        if state is not None:
            await announce(self.layer, state)

    # ---- the relay's own channel ---------------------------------------------------------------
    async def _read(self) -> None:
        while True:
            event = await self.layer.receive(self.channel)
            try:
                await self._on_event(event)
            except Exception:  # one bad event must not end the room's broadcast
                log.exception("broadcast relay: %s", event.get("type"))

    async def _on_event(self, event: dict) -> None:
        """A worker's frame; a visitor asking for the broadcast so far; another host's broadcast replacing this."""
        if event["type"] == "worker.frame":
            await self.run.on_worker_frame(event)
        elif event["type"] == "workshop.event" and event.get("kind") == "sync" and self.broadcast.id is not None:
            try:
                await self.layer.send(event["reply_to"], {
                    "type": "workshop.event", "kind": "frames", "broadcast": self.broadcast.id,
                    "frames": list(self.broadcast.kept), "next_seq": self.broadcast.next_seq})
            except ChannelFull:  # that visitor is far behind; it asks again when more frames pile up
                pass
        elif event["type"] == "workshop.event" and event.get("kind") == "state" and \
                self._superseded_by(event["state"].get("broadcast") or {}):
            await self.run.end()  # one broadcast at a time: the newest wins
            await self.drop_question()
            self.broadcast = Broadcast()

    def _superseded_by(self, other: dict) -> bool:
        """Another host started a broadcast after this one (stale news about older ones is ignored)."""
        mine = self.broadcast.summary
        return bool(mine) and other.get("host") not in (None, self.channel) and \
            other.get("started_at", 0) > mine["started_at"]


async def announce(layer, state: dict) -> None:
    await layer.group_send(GROUP, {"type": "workshop.event", "kind": "state", "state": state})

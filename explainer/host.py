"""Workshop mode, the host's side: the password-protected host page and its socket.

The host page (`/host/`) logs in with settings.EXPLAINER_HOST_PASSWORD (none set = workshop mode off)
and opens `/ws/host/`. That socket sends `host_stats` every second and takes the host's commands: a
`broadcast` run whose every frame goes to the "workshop" group (explainer/services/workshop/following.py has the
visitors' side), its controls, `pin` and `limits` (stored by explainer/services/workshop/policy.py).
"""
from __future__ import annotations

import asyncio
import hmac
import json
import logging
import secrets
import time

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.exceptions import ChannelFull
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.core.cache import cache
from django.shortcuts import redirect, render
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_http_methods

from explainer import lan
from explainer.messages import error_payload
from explainer.protocol import ReleasedOnExit, StrictJson, encode_frame, json_object, parse_frame, prompt_fields
from explainer.services.workshop import room_stats
from explainer.services.admission.lockout import Lockout
from explainer.services.run import placement
from explainer.services.workshop import policy, presence
from explainer.services.run.visitor_run import refusal
from explainer.services.workshop.following import GROUP

log = logging.getLogger(__name__)
SESSION_FLAG = "workshop_host"
NOT_HOST_CLOSE_CODE = 4003
STATS_EVERY_S = 1.0
RUN_VERBS = ("pause", "resume", "step", "stop", "ack")
COMMANDS = ("broadcast", "pin", "limits", "reset") + RUN_VERBS
LOGIN = Lockout("host")  # wrong passwords per address (explainer/services/admission/lockout.py)
RUN_FAILURES = {"model_error", "out_of_memory", "worker_lost"}  # the run broke; every other error refuses a verb


# ---- the page ---------------------------------------------------------------------------------------

@require_http_methods(["GET", "HEAD", "POST"])
def host_page(request):
    """Log in (POST password, or the console's one-time ?link=), log out (POST action=logout), or show the
    host's dashboard."""
    if not settings.EXPLAINER_HOST_PASSWORD:
        return render(request, "host.html", {"disabled": True}, status=404)
    if request.method == "POST" and request.POST.get("action") == "logout":
        request.session.pop(SESSION_FLAG, None)
        return redirect("host")
    if request.method == "POST":
        return _log_in(request)
    if "link" in request.GET:
        return _log_in_by_link(request)
    logged_in = bool(request.session.get(SESSION_FLAG))
    return render(request, "host.html", {"logged_in": logged_in, "class_urls": _class_urls() if logged_in else []})


def _class_urls() -> list[dict]:
    """The students' URLs (`make workshop` sets them), each with its short form and QR code."""
    return [{"url": url, "short": lan.short_form(url), "qr": mark_safe(lan.qr_svg(url))}  # segno's markup, our URL
            for url in settings.EXPLAINER_CLASS_URLS]


def _become_host(request):
    request.session.cycle_key()  # a fresh session id for the new privilege
    request.session[SESSION_FLAG] = True
    return redirect("host")


def _log_in(request):
    """The password, with a per-address backoff kept in the shared cache (Redis across processes): a
    guesser elsewhere never locks the host out, and one behind the same NAT is answered by the console's link."""
    if wait := LOGIN.wait(request):
        return render(request, "host.html", {"error": f"Too many wrong passwords from this address: wait {wait:.0f} s, "
                                             "or open the one-time host link printed by `make workshop`."}, status=429)
    given = request.POST.get("password", "")
    if hmac.compare_digest(given.encode(), settings.EXPLAINER_HOST_PASSWORD.encode()):
        LOGIN.succeeded(request)
        return _become_host(request)
    LOGIN.failed(request)
    return render(request, "host.html", {"error": "Wrong password."}, status=403)


def _log_in_by_link(request):
    """`make workshop` prints /host/?link=<token> (EXPLAINER_HOST_LINK_TOKEN): it logs in once, past any lockout."""
    token = settings.EXPLAINER_HOST_LINK_TOKEN
    given = request.GET.get("link", "")
    if token and hmac.compare_digest(given.encode(), token.encode()) and cache.add(f"host-link-used:{token}", True, None):
        return _become_host(request)
    return render(request, "host.html", {"error": "This host link is not valid or has been used: log in with the password."},
                  status=403)


@database_sync_to_async
def _is_host(scope) -> bool:
    session = scope.get("session")
    return bool(settings.EXPLAINER_HOST_PASSWORD and session is not None and session.get(SESSION_FLAG))


# ---- the broadcast ------------------------------------------------------------------------------------

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


# ---- the host's socket -----------------------------------------------------------------------------------

class HostConsumer(ReleasedOnExit, StrictJson, AsyncJsonWebsocketConsumer):
    """/ws/host/: stats every second; broadcast, pause/resume/step/stop, pin, limits."""

    async def connect(self):
        await self.accept()
        if not await _is_host(self.scope):
            await self.send_json(error_payload("not_host", "log in as the workshop host at /host/ first"))
            await self.close(code=NOT_HOST_CLOSE_CODE)
            return
        self.broadcast = Broadcast()
        self.run = placement.open_run(self._send_frame, self.channel_name)
        self.run.keep_while_connected = True  # pausing to explain never ends the broadcast (VisitorRun._idle_too_long)
        await self.channel_layer.group_add(GROUP, self.channel_name)
        self.ticker = asyncio.create_task(self._tick())
        presence.census_publisher.ensure_running()

    async def disconnect(self, code):
        if not hasattr(self, "run") or not self.first_disconnect():
            return
        self.ticker.cancel()
        await self.channel_layer.group_discard(GROUP, self.channel_name)
        await self.run.end()
        if self.broadcast.live:  # the room must not wait for a run nobody drives
            self.broadcast.summary["state"] = "ended"
            await self._publish(replaces=self.broadcast.id)

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        """One command; a refusal is an `error` and the socket stays open."""
        if not hasattr(self, "run"):
            return
        try:
            message = parse_frame(text_data, bytes_data, settings.EXPLAINER_MAX_FRAME_BYTES, COMMANDS)
            kind = message["type"]
            if kind in RUN_VERBS:
                await getattr(self.run, kind)(message)
            else:
                await getattr(self, f"_{kind}")(message)
        except Exception as exc:
            await self.send_json(refusal(exc))

    async def _broadcast(self, message: dict) -> None:
        """Start the host's run for the room (ending any earlier one, on any host socket)."""
        fields = prompt_fields(message)
        await self.run.end()  # before numbering anew: the old run must send nothing into the new broadcast
        self.broadcast.begin(fields, self.channel_name)
        await self._publish()
        start = {"type": "start", "params": fields["params"], "paused": fields["paused"]}
        start.update({"messages": fields["messages"]} if fields["messages"] is not None else {"text": fields["text"]})
        try:
            await self.run.start(start)
        except Exception:
            self.broadcast.summary["state"] = "failed"
            await self._publish(replaces=self.broadcast.id)
            raise

    async def _pin(self, message: dict) -> None:
        pins = policy.validate_pins(message.get("params", {}))
        await self._announce(await policy.save_pins(pins))

    async def _limits(self, message: dict) -> None:
        limits = policy.validate_limits(message)
        await self._announce(await policy.save_limits(limits))

    async def _reset(self, _message: dict) -> None:
        """Reset workshop: end this host's broadcast, clear pins, limits and the stored broadcast, tell everyone."""
        await self.run.end()
        self.broadcast = Broadcast()
        await self._announce(await policy.reset())

    async def _send_frame(self, frame: dict) -> None:
        """The broadcast run's `send`: every frame to the room, numbered, and to the host's page."""
        if frame["type"] == "busy":  # no slot for the host's run: the host's news, not the room's
            await self.send_json(frame)
            if self.broadcast.summary.get("state") == "starting":
                self.broadcast.summary["state"] = "busy"
                await self._publish(replaces=self.broadcast.id)
            return
        frame = json_object(encode_frame(frame))
        if frame["type"] == "error":  # a refusal of the host's verb, or the run's failure: the host's to read
            await self.send_json(frame)  # (the room reads the run's state from the status that follows a failure)
            if frame.get("code") in RUN_FAILURES and self.broadcast.summary.get("state") != "finished":
                self.broadcast.summary["state"] = "failed"
                await self._publish(replaces=self.broadcast.id)
            return
        seq = self.broadcast.keep(frame)
        await self.channel_layer.group_send(GROUP, {"type": "workshop.frame", "broadcast": self.broadcast.id,
                                                    "seq": seq, "frame": frame, "bytes": len(json.dumps(frame))})
        await self.send_json(frame)
        if frame["type"] == "status":
            await self._publish(replaces=self.broadcast.id)

    async def _publish(self, replaces: str | None = None) -> None:
        """Store the broadcast's summary and tell every socket (visitors update, other hosts stand down)."""
        state = await policy.save_broadcast(dict(self.broadcast.summary), replaces)
        if state is not None:
            await self._announce(state)

    async def _announce(self, state: dict) -> None:
        await self.channel_layer.group_send(GROUP, {"type": "workshop.event", "kind": "state", "state": state})

    # ---- channel-layer messages -----------------------------------------------------------------

    async def workshop_frame(self, event):
        """This host's own broadcast, echoed by the group: the page already has it."""

    async def workshop_event(self, event):
        """A visitor asks for the broadcast so far; another host's broadcast replaces this one."""
        if event.get("kind") == "sync" and self.broadcast.id is not None:
            try:
                await self.channel_layer.send(event["reply_to"], {
                    "type": "workshop.event", "kind": "frames", "broadcast": self.broadcast.id,
                    "frames": list(self.broadcast.kept), "next_seq": self.broadcast.next_seq})
            except ChannelFull:  # that visitor is far behind; it asks again when more frames pile up
                pass
        elif event.get("kind") == "state" and self._superseded_by(event["state"].get("broadcast") or {}):
            await self.run.end()  # one broadcast at a time: the newest wins
            self.broadcast = Broadcast()

    def _superseded_by(self, other: dict) -> bool:
        """Another host socket started a broadcast after this one (stale news about older ones is ignored)."""
        mine = self.broadcast.summary
        return bool(mine) and other.get("host") not in (None, self.channel_name) and \
            other.get("started_at", 0) > mine["started_at"]

    async def worker_frame(self, event):
        """A message from the broadcast run on an inference worker (REDIS_URL mode)."""
        await self.run.on_worker_frame(event)

    async def _tick(self) -> None:
        while True:
            try:
                await self.send_json(await self._stats())
            except Exception:  # a stats hiccup must not end the host's socket
                log.exception("host stats failed")
            await asyncio.sleep(STATS_EVERY_S)

    async def _stats(self) -> dict:
        shared = await policy.snapshot()
        stats = await sync_to_async(room_stats.server_stats, thread_sensitive=False)()  # the shared cache's reads
        if settings.EXPLAINER_WORKERS:
            stats = room_stats.with_workers(stats, *await self.run.survey_workers())
        return {"type": "host_stats", **stats, "broadcast": self.broadcast.summary or
                shared["broadcast"], "pins": shared["pins"], "limits": shared["limits"]}

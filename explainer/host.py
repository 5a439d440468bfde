"""Workshop mode, the host's side: the password-protected host page and its socket.

The host page (`/host/`) logs in with settings.EXPLAINER_HOST_PASSWORD (none set = workshop mode off)
and opens `/ws/host/`. That socket sends `host_stats` every second and takes the host's commands: a
`broadcast` run whose every frame goes to the "workshop" group (explainer/services/workshop/following.py has the
visitors' side), its controls, `pin` and `limits` (stored by explainer/services/workshop/policy.py).
"""
from __future__ import annotations

import asyncio
import functools
import hmac
import logging
import time

from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.core.cache import cache
from django.shortcuts import redirect, render
from django.utils import translation
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_http_methods

from explainer import lan
from explainer.messages import error_payload
from explainer.protocol import ProtocolError, ReleasedOnExit, StrictJson, integer, parse_frame, prompt_fields
from explainer.services.workshop import room_stats
from explainer.services.admission.lockout import Lockout
from explainer.services.device import model_registry
from explainer.services.workshop import policy, presence
from explainer.services.run.visitor_run import refusal
from explainer.services.workshop import away, quiz
from explainer.services.workshop.relay import Broadcast, BroadcastRelay, announce
from explainer.words import say
from inference.wire.said import said

log = logging.getLogger(__name__)
SESSION_FLAG = policy.HOST_SESSION_FLAG
NOT_HOST_CLOSE_CODE = 4003
STATS_EVERY_S = 1.0
RUN_VERBS = ("pause", "resume", "step", "stop", "ack")
COMMANDS = ("broadcast", "pin", "limits", "reset", "look", "ask", "reveal") + RUN_VERBS
LOGIN = Lockout("host")  # wrong passwords per address (explainer/services/admission/lockout.py)


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


def is_host_request(request) -> bool:
    """Workshop mode is on and this browser has logged in as the host."""
    return bool(settings.EXPLAINER_HOST_PASSWORD and request.session.get(SESSION_FLAG))


def host_only(view):
    """A GET page of the host's session only (the projector view, the quiz recap); anyone else goes to /host/."""
    @require_http_methods(["GET", "HEAD"])
    @functools.wraps(view)
    def guarded(request, *args, **kwargs):
        return view(request, *args, **kwargs) if is_host_request(request) else redirect("host")
    return guarded


@host_only
def present_page(request):
    """The projector view: the article in large type, following the broadcast (the host's session only)."""
    status = model_registry.page_status()
    return render(request, "index.html", {"model": status, "present": True, "workshop_on": policy.enabled()},
                  status=200 if status["ok"] else 503)


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
        return _refused(request, said("Too many wrong passwords from this address: wait %(wait)s s, or open the "
                                      "one-time host link printed by `make workshop`.", wait=f"{wait:.0f}"), 429)
    given = request.POST.get("password", "")
    if hmac.compare_digest(given.encode(), settings.EXPLAINER_HOST_PASSWORD.encode()):
        LOGIN.succeeded(request)
        return _become_host(request)
    LOGIN.failed(request)
    return _refused(request, said("Wrong password."), 403)


def _log_in_by_link(request):
    """`make workshop` prints /host/?link=<token> (EXPLAINER_HOST_LINK_TOKEN): it logs in once, past any lockout."""
    token = settings.EXPLAINER_HOST_LINK_TOKEN
    given = request.GET.get("link", "")
    if token and hmac.compare_digest(given.encode(), token.encode()) and cache.add(f"host-link-used:{token}", True, None):
        return _become_host(request)
    return _refused(request, said("This host link is not valid or has been used: log in with the password."), 403)


def _refused(request, error, status: int):
    """The login form again, saying why in the page's language."""
    return render(request, "host.html", {"error": say(error, translation.get_language())}, status=status)


# ---- the host's socket -----------------------------------------------------------------------------------

class HostConsumer(ReleasedOnExit, StrictJson, AsyncJsonWebsocketConsumer):
    """/ws/host/: stats every second; broadcast, pause/resume/step/stop, pin, limits."""

    async def connect(self):
        await self.accept()
        if not await policy.is_host_scope(self.scope):
            await self.send_json(error_payload("not_host", said("log in as the workshop host at /host/ first")))
            await self.close(code=NOT_HOST_CLOSE_CODE)
            return
        # the broadcast this host left running (a reload, a dropped connection), or a new relay for the next one
        self.relay = away.take() or await BroadcastRelay.opened(self.channel_layer)
        self.relay.attach(self)
        if self.relay.broadcast.id is not None:
            await self.relay.publish(replaces=self.relay.broadcast.id)  # the room: the host is back
        self.ticker = asyncio.create_task(self._tick())
        presence.census_publisher.ensure_running()

    @property
    def run(self):
        return self.relay.run

    @property
    def broadcast(self) -> Broadcast:
        return self.relay.broadcast

    async def disconnect(self, code):
        if not hasattr(self, "relay") or not self.first_disconnect():
            return
        self.ticker.cancel()
        await away.leave(self.relay)  # a live broadcast waits EXPLAINER_HOST_GONE_S for the host; the room goes on

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        """One command; a refusal is an `error` and the socket stays open."""
        if not hasattr(self, "relay"):
            return
        try:
            message = parse_frame(text_data, bytes_data, settings.EXPLAINER_MAX_FRAME_BYTES, COMMANDS)
            kind = message["type"]
            if kind == "ack":  # counted on this socket: the relay shifts it past frames sent before it opened
                await self.relay.ack(message)
            elif kind in RUN_VERBS:
                self.relay.asking.refuse_run_verbs()
                await getattr(self.run, kind)(message)
            elif kind in ("ask", "reveal"):  # the class's question (explainer/services/workshop/asking.py)
                await getattr(self.relay, kind)()
            else:
                await getattr(self, f"_{kind}")(message)
        except Exception as exc:
            await self.send_json(refusal(exc))

    async def _broadcast(self, message: dict) -> None:
        """Start the host's run for the room (ending any earlier one, on any host socket)."""
        fields = prompt_fields(message)
        await self.relay.drop_question()  # its held step belongs to the run that ends here
        await self.run.end()  # before numbering anew: the old run must send nothing into the new broadcast
        self.broadcast.begin(fields, self.relay.channel)
        await self.relay.publish()
        start = {"type": "start", "params": fields["params"], "paused": fields["paused"]}
        start.update({"messages": fields["messages"]} if fields["messages"] is not None else {"text": fields["text"]})
        try:
            await self.run.start(start)
        except Exception:
            self.broadcast.summary["state"] = "failed"
            await self.relay.publish(replaces=self.broadcast.id)
            raise

    async def _look(self, message: dict) -> None:
        """"Everyone look at step N": the room's step bars go there (each page's own choice of step aside)."""
        if self.broadcast.id is None:
            raise ProtocolError("no_run", said("broadcast a run first"), "type")
        step = integer(message, "step", 0, self.broadcast.summary.get("step", 0))
        self.broadcast.summary["look"] = {"step": step, "at": time.time()}
        await self.relay.publish(replaces=self.broadcast.id)

    async def _pin(self, message: dict) -> None:
        pins = policy.validate_pins(message.get("params", {}))
        await announce(self.channel_layer, await policy.save_pins(pins))

    async def _limits(self, message: dict) -> None:
        limits = policy.validate_limits(message)
        await announce(self.channel_layer, await policy.save_limits(limits))

    async def _reset(self, _message: dict) -> None:
        """Reset workshop: end this host's broadcast, clear pins, limits and the stored broadcast, tell everyone."""
        await self.relay.drop_question()
        await self.run.end()
        self.relay.broadcast = Broadcast()
        await quiz.forget_all()  # the class's answers go with it
        await announce(self.channel_layer, await policy.reset())

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
                shared["broadcast"], "pins": shared["pins"], "limits": shared["limits"], "quiz": await self._quiz()}

    async def _quiz(self) -> dict | None:
        """The open question with the room's answers so far (its outcome once revealed), for the host's chart."""
        asked = self.broadcast.summary.get("quiz")
        if asked is None or asked["state"] != "open":
            return asked
        return {**asked, **await quiz.counts(asked["id"])}

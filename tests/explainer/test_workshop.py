"""Workshop mode: the host page's login, the host socket, broadcasts to followers, pins and limits."""
import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.core.cache import cache
from django.db import connections
from django.test import Client

from explainer.asgi import application
from explainer.services.admission.lockout import MAX_FAILURES
from explainer.services.device import model_registry
from explainer.services.admission.capacity import generating
from explainer.services.run.visitor_run import live_sessions
from explainer.services.workshop import away
from tests.support import stories_spec, until

PASSWORD = "class-of-2025"
ORIGIN = (b"origin", b"http://127.0.0.1")
MESSAGES = [{"role": "user", "content": "<t403> <t407>"}]
BROADCAST = {"type": "broadcast", "messages": MESSAGES, "params": {"temperature": 0.8, "seed": 3, "max_new_tokens": 5}}
DB = pytest.mark.django_db(transaction=True)  # the sockets read the database from other threads
OPEN = []  # sockets a test has not closed yet (it failed half-way)


@pytest.fixture(autouse=True)
def workshop_on(settings):
    settings.EXPLAINER_MODEL = stories_spec()
    settings.EXPLAINER_HOST_PASSWORD = PASSWORD
    settings.EXPLAINER_MAX_SESSIONS = 4
    model_registry.reset()
    cache.clear()
    yield
    model_registry.reset()


@pytest.fixture(autouse=True)
async def no_leftovers():
    """Close what a failed test left open, then drop the socket thread's database handle."""
    yield
    await close(*OPEN)
    await away.end_parked()  # a broadcast whose host socket closed waits for the host (EXPLAINER_HOST_GONE_S)
    await sync_to_async(forget_connections)()


def forget_connections():
    """The sockets' thread keeps its handle to the in-memory test database (SQLite ignores close() there);
    a later test without database access would trip over it when Channels closes old connections."""
    for alias in list(connections):
        try:
            del connections[alias]
        except AttributeError:  # never opened in this thread
            pass


# ---- helpers ------------------------------------------------------------------------------------

def log_in(password=PASSWORD) -> str:
    """Log in on the host page as a browser would; the session id that the host socket will carry."""
    browser = Client()
    assert browser.post("/host/", {"password": password}).status_code == 302
    return browser.cookies["sessionid"].value


async def host_socket(session_id=None):
    headers = [ORIGIN] + ([(b"cookie", f"sessionid={session_id}".encode())] if session_id else [])
    comm = WebsocketCommunicator(application, "/ws/host/", headers=headers)
    connected, _ = await comm.connect()
    assert connected
    OPEN.append(comm)
    return comm


async def logged_in_host():
    return await host_socket(await sync_to_async(log_in)())


async def visitor():
    comm = WebsocketCommunicator(application, "/ws/session/", headers=[ORIGIN])
    connected, _ = await comm.connect()
    assert connected
    OPEN.append(comm)
    await until(comm, lambda m: m.get("state") == "ready")
    return comm


def of_type(kind):
    return lambda m: m["type"] == kind


def run_frames(messages):
    """What a page draws: everything but the workshop's own news and the host's stats."""
    return [m for m in messages if m["type"] not in ("workshop", "host_stats")]


async def follow(comm):
    await comm.send_json_to({"type": "follow", "on": True})
    news = (await until(comm, of_type("workshop")))[-1]
    assert news["following"] is True


async def to_the_end(comm):
    """The broadcast's frames through `done`, its closing checks and the finished status."""
    return run_frames(await until(comm, lambda m: m["type"] == "status" and m["state"] == "finished"))


async def drain(comm):
    """Whatever has arrived by now."""
    got = []
    while not await comm.receive_nothing(timeout=0.3):
        got.append(await comm.receive_json_from())
    return got


async def close(*comms):
    for comm in comms:
        OPEN.remove(comm)
        await comm.disconnect()


# ---- the page ------------------------------------------------------------------------------------

@DB
def test_wrong_password_is_refused_then_locked_out(client):
    refused = client.post("/host/", {"password": "guess"})
    assert refused.status_code == 403 and b"Wrong password" in refused.content
    assert "workshop_host" not in client.session
    for _ in range(MAX_FAILURES - 1):
        client.post("/host/", {"password": "guess"})
    locked = client.post("/host/", {"password": PASSWORD})  # even the right one, during the lockout
    assert locked.status_code == 429 and "workshop_host" not in client.session


@DB
def test_login_shows_the_dashboard_and_logout_leaves_it(client):
    assert b'name="password"' in client.get("/host/").content
    assert client.post("/host/", {"password": PASSWORD}).status_code == 302
    page = client.get("/host/").content.decode()
    assert 'id="stats"' in page and "js/host.js" in page and 'name="password"' not in page
    client.post("/host/", {"action": "logout"})
    assert b'name="password"' in client.get("/host/").content


def test_host_mode_off_without_a_password(client, settings):
    settings.EXPLAINER_HOST_PASSWORD = ""
    response = client.get("/host/")
    assert response.status_code == 404 and b"EXPLAINER_HOST_PASSWORD" in response.content
    assert client.post("/host/", {"password": ""}).status_code == 404


# ---- the host socket ---------------------------------------------------------------------------------

@DB
async def test_host_socket_refuses_without_login():
    comm = await host_socket()
    error = await comm.receive_json_from()
    assert (error["type"], error["code"]) == ("error", "not_host")
    assert (await comm.receive_output())["code"] == 4003


@DB
async def test_host_stats_arrive():
    guest = await visitor()
    host = await logged_in_host()
    stats = (await until(host, of_type("host_stats")))[-1]
    assert stats["visitors"]["connected"] == 1 and stats["visitors"]["following"] == 0
    assert stats["generations"] == {"active": 0, "limit": 4}
    assert stats["device"]["memory"]["used_bytes"] > 0 and stats["device"]["memory"]["total_bytes"] > 0
    # Behaviour, not the spec this test configured: watching the server does not load the model.
    assert stats["model"]["loaded"] is False and not model_registry.is_loaded()
    assert stats["limits"]["own_runs_allowed"] is True
    await follow(guest)
    stats = (await until(host, of_type("host_stats")))[-1]
    assert stats["visitors"]["connected"] == 1 and stats["visitors"]["following"] == 1
    await host.send_json_to({"type": "take_over"})
    assert (await until(host, of_type("error")))[-1]["code"] == "unknown_type"
    await close(guest, host)


@DB
async def test_broadcast_reaches_followers_in_the_same_order_and_no_one_else():
    first, second, loner = await visitor(), await visitor(), await visitor()
    await follow(first)
    await follow(second)
    host = await logged_in_host()
    await host.send_json_to(BROADCAST)
    seen_first, seen_second = await to_the_end(first), await to_the_end(second)
    assert seen_first == seen_second
    kinds = [m["type"] for m in seen_first if m["type"] != "status"]
    assert kinds[:3] == ["session", "prefill", "check"] and kinds.count("step") == 5
    assert [m["step"] for m in seen_first if m["type"] == "step"] == [1, 2, 3, 4, 5]
    assert next(m for m in seen_first if m["type"] == "session")["params"]["seed"] == 3
    assert run_frames(await until(host, lambda m: m.get("state") == "finished")) == seen_first  # the host page too
    news = await drain(loner)  # a visitor who does not follow hears about the broadcast, and sees none of it
    assert run_frames(news) == [] and any(m["host_live"] for m in news)
    assert generating.active == 0
    await close(first, second, loner, host)


@DB
async def test_late_joiner_gets_the_frames_so_far_then_the_rest():
    early = await visitor()
    await follow(early)
    host = await logged_in_host()
    await host.send_json_to({**BROADCAST, "paused": True})
    await until(host, lambda m: m["type"] == "status" and m["state"] == "paused")
    for step in (1, 2):
        await host.send_json_to({"type": "step"})
        await until(host, lambda m: m["type"] == "step" and m["step"] == step)
    late = await visitor()
    await late.send_json_to({"type": "follow", "on": True})
    caught_up = run_frames(await until(late, lambda m: m["type"] == "step" and m["step"] == 2))
    await host.send_json_to({"type": "resume"})
    seen_early, seen_late = await to_the_end(early), caught_up + await to_the_end(late)
    assert seen_late == seen_early
    assert [m["step"] for m in seen_late if m["type"] == "step"] == [1, 2, 3, 4, 5]
    await close(early, late, host)


@DB
async def test_following_ends_the_visitors_own_run_and_a_start_goes_own_way():
    guest = await visitor()
    await guest.send_json_to({"type": "start", "messages": MESSAGES, "paused": True, "params": {"max_new_tokens": 50}})
    await until(guest, of_type("check"))
    assert live_sessions() == 1  # paused: its cache, no generation slot
    await follow(guest)
    assert generating.active == 0 and live_sessions() == 0
    await guest.send_json_to({"type": "start", "messages": MESSAGES,
                              "params": {"max_new_tokens": 2, "min_new_tokens": 2, "seed": 5}})
    news = (await until(guest, of_type("workshop")))[-1]
    assert news["following"] is False
    assert (await until(guest, of_type("done")))[-1]["steps"] == 2
    await guest.send_json_to({"type": "follow", "on": "yes"})
    error = (await until(guest, of_type("error")))[-1]
    assert (error["code"], error["field"]) == ("wrong_type", "on")
    await close(guest)


# ---- pins and limits ----------------------------------------------------------------------------------

@DB
async def test_pins_and_the_token_cap_change_a_visitors_own_run():
    guest = await visitor()
    host = await logged_in_host()
    await host.send_json_to({"type": "pin", "params": {"temperature": 0, "seed": 7}})
    await host.send_json_to({"type": "limits", "max_new_tokens": 3, "max_sessions": None, "own_runs_allowed": True})
    news = (await until(guest, lambda m: m["type"] == "workshop" and m["limits"]["max_new_tokens"] == 3))[-1]
    assert news["pins"] == {"temperature": 0, "seed": 7}
    await guest.send_json_to({"type": "start", "messages": MESSAGES, "params": {"temperature": 0.9, "seed": 1,
                                                                                 "max_new_tokens": 8}})
    seen = await until(guest, of_type("done"))
    session = next(m for m in seen if m["type"] == "session")
    assert (session["params"]["temperature"], session["params"]["seed"], session["params"]["max_new_tokens"]) == (0, 7, 3)
    assert seen[-1]["steps"] == 3
    await host.send_json_to({"type": "pin", "params": {}})
    await until(guest, lambda m: m["type"] == "workshop" and m["pins"] == {})
    await guest.send_json_to({"type": "start", "messages": MESSAGES, "params": {"temperature": 0.9, "seed": 1}})
    session = next(m for m in await until(guest, of_type("session")) if m["type"] == "session")
    assert (session["params"]["temperature"], session["params"]["seed"]) == (0.9, 1)
    await close(guest, host)


@DB
async def test_bad_pins_and_limits_get_named_errors():
    host = await logged_in_host()
    for command, field in [({"type": "pin", "params": {"temperature": 9}}, "temperature"),
                           ({"type": "pin", "params": {"mood": 1}}, "mood"),
                           ({"type": "limits", "max_new_tokens": 0}, "max_new_tokens"),
                           ({"type": "limits", "own_runs_allowed": "no"}, "own_runs_allowed"),
                           ({**BROADCAST, "params": {"top_p": 5}}, "top_p"),
                           ({"type": "broadcast"}, "messages")]:
        await host.send_json_to(command)
        error = (await until(host, of_type("error")))[-1]
        assert error["field"] == field, error
    stats = (await until(host, of_type("host_stats")))[-1]
    assert stats["broadcast"]["state"] == "failed" and stats["pins"] == {}
    await close(host)


@DB
async def test_own_runs_off_refuses_a_visitors_start_but_not_following():
    guest = await visitor()
    host = await logged_in_host()
    await host.send_json_to({"type": "limits", "own_runs_allowed": False})
    await until(guest, lambda m: m["type"] == "workshop" and m["limits"]["own_runs_allowed"] is False)
    await guest.send_json_to({"type": "start", "messages": MESSAGES})
    error = (await until(guest, of_type("error")))[-1]
    assert (error["code"], error["field"]) == ("workshop_pinned", None)  # no stray "(type)" on the page
    assert generating.active == 0
    await follow(guest)
    await host.send_json_to(BROADCAST)
    assert sum(m["type"] == "step" for m in await to_the_end(guest)) == 5
    await close(guest, host)


@DB
async def test_own_runs_off_covers_live_embeds_served_by_this_site():
    """`/embed/tokens/?prompt=…&autostart=1` opens /ws/embed/: its start obeys the host like an article's."""
    embed = WebsocketCommunicator(application, "/ws/embed/", headers=[ORIGIN])
    assert (await embed.connect())[0]
    OPEN.append(embed)
    await until(embed, lambda m: m.get("state") == "ready")
    host = await logged_in_host()
    await host.send_json_to({"type": "limits", "own_runs_allowed": False})
    await until(host, lambda m: m["type"] == "host_stats" and m["limits"]["own_runs_allowed"] is False)
    await embed.send_json_to({"type": "start", "messages": MESSAGES})
    assert (await until(embed, of_type("error")))[-1]["code"] == "workshop_pinned"
    assert generating.active == 0
    await host.send_json_to({"type": "limits", "own_runs_allowed": True})
    await until(host, lambda m: m["type"] == "host_stats" and m["limits"]["own_runs_allowed"] is True)
    await embed.send_json_to({"type": "start", "messages": MESSAGES, "params": {"max_new_tokens": 2}})
    assert (await until(embed, of_type("done")))[-1]["type"] == "done"
    await close(embed, host)


@DB
async def test_session_limit_tells_the_next_visitor_busy(settings):
    settings.EXPLAINER_OUTBOUND_WINDOW = 4  # the first run's reader acks nothing more: it stays running (held)
    settings.EXPLAINER_START_QUEUE = 0  # no line: the second start hears `busy` (tests/explainer/test_start_queue.py)
    first, second = await visitor(), await visitor()
    host = await logged_in_host()
    await host.send_json_to({"type": "limits", "max_sessions": 1})
    await until(first, lambda m: m["type"] == "workshop" and m["limits"]["max_sessions"] == 1)
    await first.send_json_to({"type": "ack", "received": 1})
    await first.send_json_to({"type": "start", "messages": MESSAGES, "params": {"max_new_tokens": 200}})
    await until(first, lambda m: m["type"] == "status" and m.get("run_state") == "held")
    await second.send_json_to({"type": "start", "messages": MESSAGES})
    busy = (await until(second, lambda m: m["type"] in ("busy", "session")))[-1]
    assert busy["type"] == "busy" and "1 visitors" in busy["reason"]
    await host.send_json_to(BROADCAST)  # the host's run needs a slot too: the room is not left waiting
    assert (await until(host, lambda m: m["type"] in ("busy", "session")))[-1]["type"] == "busy"
    news = (await until(second, lambda m: m["type"] == "workshop" and m["broadcast"].get("state") == "busy"))[-1]
    assert news["host_live"] is False
    await close(first, second, host)


def test_cuda_memory_is_the_allocators_view(monkeypatch):
    import torch

    from explainer.services.workshop.room_stats import device_memory

    class Properties:
        total_memory = 80 << 30

    asked = []
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda i: asked.append(i) or 3 << 30)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda i: 5 << 30)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: Properties())
    assert device_memory("cuda:1") == {"kind": "cuda", "used_bytes": 3 << 30, "reserved_bytes": 5 << 30,
                                       "total_bytes": 80 << 30}
    assert asked == [1]
    cpu = device_memory("cpu")
    assert cpu["kind"] == "cpu" and 0 < cpu["used_bytes"] < cpu["total_bytes"]


@DB
async def test_a_second_hosts_broadcast_replaces_the_first():
    guest = await visitor()
    await follow(guest)
    one, two = await logged_in_host(), await logged_in_host()
    await one.send_json_to({**BROADCAST, "paused": True})
    first_id = (await until(guest, lambda m: m["type"] == "workshop" and m["host_live"]))[-1]["broadcast"]["id"]
    await until(guest, lambda m: m.get("state") == "paused")
    await two.send_json_to({**BROADCAST, "params": {**BROADCAST["params"], "seed": 11}})
    seen = await to_the_end(guest)
    assert next(m for m in seen if m["type"] == "session")["params"]["seed"] == 11
    stats = (await until(one, lambda m: m["type"] == "host_stats" and m["broadcast"].get("id") not in (None, first_id)))[-1]
    assert stats["broadcast"]["params"]["seed"] == 11  # the first host stood down and shows the room's broadcast
    assert generating.active == 0
    await close(guest, one, two)


async def test_follow_is_refused_when_workshop_mode_is_off(settings):
    settings.EXPLAINER_HOST_PASSWORD = ""
    guest = WebsocketCommunicator(application, "/ws/session/", headers=[ORIGIN])
    await guest.connect()
    OPEN.append(guest)
    assert (await guest.receive_json_from())["state"] == "ready"  # no workshop news first
    await guest.send_json_to({"type": "follow", "on": True})
    assert (await guest.receive_json_from())["code"] == "invalid_state"
    await close(guest)


class FakeRoom:
    """A follower's consumer and channel layer, recording what the follower sends."""

    channel_name = "visitor-channel"

    def __init__(self):
        self.channel_layer, self.to_page, self.to_group = self, [], []

    async def send_frame(self, message):
        self.to_page.append(message)

    async def group_send(self, group, message):
        self.to_group.append(message)


async def test_follower_puts_frames_in_order_and_asks_again_after_a_gap():
    from explainer.services.workshop.following import Follower

    room = FakeRoom()
    follower = Follower(room)
    follower.joined = follower.following = True
    frame = lambda n: {"type": "step", "step": n}  # noqa: E731
    await follower.on_frame({"broadcast": "b1", "seq": 0, "frame": frame(0)})
    await follower.on_frame({"broadcast": "b1", "seq": 2, "frame": frame(2)})  # seq 1 was dropped on the way
    assert room.to_page == [frame(0)] and room.to_group[-1] == {"type": "workshop.event", "kind": "sync",
                                                                 "reply_to": "visitor-channel"}
    await follower.on_event({"kind": "frames", "broadcast": "b1", "frames": [[0, frame(0)], [1, frame(1)]], "next_seq": 2})
    assert room.to_page == [frame(0), frame(1), frame(2)]
    await follower.on_frame({"broadcast": "b1", "seq": 5, "frame": frame(5)})
    await follower.on_event({"kind": "frames", "broadcast": "b1", "frames": [], "next_seq": 5})  # 3, 4 not kept
    assert room.to_page[-1] == frame(5)
    await follower.on_frame({"broadcast": "b2", "seq": 0, "frame": frame(0)})  # a new broadcast starts over
    assert room.to_page[-1] == frame(0) and follower.next_seq == 1
    follower.following = False
    await follower.on_frame({"broadcast": "b2", "seq": 1, "frame": frame(1)})
    assert room.to_page[-1] == frame(0)


@DB
async def test_the_host_stops_pauses_and_steps_a_broadcast_under_the_same_rules():
    """Stop wins for a host too: at most one step after it, `done` stopped, then named errors (issue 11)."""
    guest = await visitor()
    await follow(guest)
    host = await logged_in_host()
    await host.send_json_to({**BROADCAST, "params": {**BROADCAST["params"], "max_new_tokens": 200}})
    await until(host, lambda m: m["type"] == "step" and m["step"] == 2)
    await host.send_json_to({"type": "pause"})
    paused = await until(host, lambda m: m["type"] == "status" and m.get("run_state") == "paused")
    last = max([2] + [m["step"] for m in paused if m["type"] == "step"])
    await host.send_json_to({"type": "step"})
    await host.send_json_to({"type": "stop", "step": last})
    rest = run_frames(await until(host, lambda m: m["type"] == "status" and m["state"] == "finished"))
    assert [m["step"] for m in rest if m["type"] == "step"] in ([], [last + 1])
    done = next(m for m in rest if m["type"] == "done")
    assert done["stop_reason"] == "stopped" and done["steps"] <= last + 1
    for verb in ("resume", "step"):
        await host.send_json_to({"type": verb})
        error = (await until(host, of_type("error")))[-1]
        assert error["code"] == "finished", error
    followed = await to_the_end(guest)  # the room saw the same end
    assert next(m for m in followed if m["type"] == "done") == done
    assert generating.active == 0
    await close(guest, host)

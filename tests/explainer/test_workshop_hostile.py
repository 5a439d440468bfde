"""Hostile input in workshop mode: leaked connection counts, follow amplification, host lockout."""
import asyncio
import json
import subprocess
import sys

import pytest
import websockets
from channels.testing import WebsocketCommunicator
from django.core.cache import cache
from django.test import Client

from explainer.services.admission import lockout
from explainer.asgi import application
from explainer.services.admission import limits
from explainer.services.workshop.following import FOLLOW_BURST, Follower
from tests.explainer.live_server import ORIGIN, ROOT, migrate, start_daphne
from tests.explainer.redis_server import redis_server
from tests.support import stories_spec

PASSWORD = "class-of-2025"
DB = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def workshop_on(settings):
    settings.EXPLAINER_HOST_PASSWORD = PASSWORD
    settings.EXPLAINER_HOST_LINK_TOKEN = "console-link-token"
    cache.clear()
    yield settings
    cache.clear()


# ---- connection counts ---------------------------------------------------------------------------

@DB
async def test_a_connect_that_fails_half_way_gives_its_connection_back(monkeypatch):
    """Whatever fails inside connect(), the address's count comes back (disconnect() never runs then)."""
    async def broken_join(self):
        raise ConnectionError("the socket closed during the handshake")

    monkeypatch.setattr(Follower, "join", broken_join)
    for _ in range(3):
        comm = WebsocketCommunicator(application, "/ws/session/", headers=[(b"origin", ORIGIN.encode())])
        comm.scope["client"] = ["203.0.113.9", 40000]
        with pytest.raises(ConnectionError):  # the application instance ends with the error
            await comm.connect()
            await comm.wait()
        assert limits.open_connections("203.0.113.9") == 0


async def test_a_send_to_a_gone_socket_is_a_close_not_an_error():
    from explainer.consumers import VisitorConsumer

    consumer = VisitorConsumer()
    calls = []

    async def gone(text_data=None, bytes_data=None, close=False):
        calls.append(text_data)
        raise ConnectionError("gone")

    consumer.send = gone
    await consumer.send_frame({"type": "status"})  # raises nothing
    await consumer.send_frame({"type": "status"})
    assert consumer.gone and len(calls) == 1  # nothing more is sent to it


def test_fast_connect_close_cycles_never_leak_the_address_count(tmp_path):
    """A real Daphne in workshop mode: 50 sockets closed right after the handshake, then the full 16 open."""
    migrate({**__import__("os").environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'live.sqlite3'}"})
    server = start_daphne(tmp_path, stories_spec(), env={"EXPLAINER_HOST_PASSWORD": PASSWORD,
                                                        "EXPLAINER_MAX_CONNECTIONS_PER_IP": "16"})
    try:
        asyncio.run(asyncio.wait_for(cycle_then_fill(server.ws_url, server.origin), 150))
    finally:
        server.stop()


async def first_frames(ws, count: int = 2) -> list[dict]:
    """Up to `count` frames (fewer if the server closes the socket first, as it does after a refusal)."""
    frames = []
    try:
        for _ in range(count):
            frames.append(json.loads(await asyncio.wait_for(ws.recv(), 30)))
    except websockets.ConnectionClosed:
        pass
    return frames


async def cycle_then_fill(url: str, page_origin: str, settle_s: float = 30) -> None:
    origin = websockets.Origin(page_origin)
    for i in range(50):  # close at awkward moments: right away, or after the first frame
        ws = await websockets.connect(url, origin=origin)
        if i % 2:
            await ws.recv()
        ws.transport.abort() if i % 3 == 0 else await ws.close()
    # Daphne notices the aborted ones within a second or so (longer on a loaded machine): until then a
    # socket may be refused. A leaked count never comes back, so the full 16 must fit within settle_s.
    deadline = asyncio.get_running_loop().time() + settle_s
    while True:
        sockets = [await websockets.connect(url, origin=origin) for _ in range(16)]
        answers = [await first_frames(ws) for ws in sockets]
        refused = "too_many_connections" in json.dumps(answers)
        if not refused or asyncio.get_running_loop().time() > deadline:
            break
        for ws in sockets:
            await ws.close()
        await asyncio.sleep(0.25)
    for frames in answers:
        assert "too_many_connections" not in json.dumps(frames), frames
        assert any(f.get("state") == "ready" for f in frames), frames
    for ws in sockets:
        await ws.close()


# ---- follow amplification ------------------------------------------------------------------------

class Page:
    """A follower's consumer: counts what it sends, like VisitorConsumer.send_frame."""

    channel_name = "visitor-channel"

    def __init__(self):
        self.channel_layer, self.to_page, self.to_group, self.frames_sent = self, [], [], 0

    async def send_frame(self, message):
        self.frames_sent += 1
        self.to_page.append(message)

    async def group_send(self, group, message):
        self.to_group.append(message)

    async def group_discard(self, group, channel):
        pass


def frame(n, size=100):
    return {"type": "step", "step": n, "pad": "x" * size}


async def test_catch_up_waits_for_the_pages_acks(settings):
    """A page that stopped reading gets at most the window of host frames; its acks let the rest through."""
    settings.EXPLAINER_OUTBOUND_WINDOW = 8
    page = Page()
    follower = Follower(page)
    follower.joined = follower.following = True
    follower.saw_ack({"received": 0})
    await follower.on_event({"kind": "frames", "broadcast": "b1", "frames": [[n, frame(n)] for n in range(40)], "next_seq": 40})
    assert len(page.to_page) == 9 and len(follower.pending) == 31  # the window (8) + the one that filled it
    follower.saw_ack({"received": 9})
    await asyncio.sleep(0.05)
    assert len(page.to_page) == 18
    follower.saw_ack({"received": 40})
    await asyncio.sleep(0.05)
    assert [m["step"] for m in page.to_page] == list(range(40)) and not follower.pending
    await follower.leave()


async def test_catch_up_is_bounded_in_bytes_and_asked_again_once_read(settings):
    settings.EXPLAINER_OUTBOUND_WINDOW = 4
    settings.EXPLAINER_FOLLOW_PENDING_BYTES = 20_000
    page = Page()
    follower = Follower(page)
    follower.joined = follower.following = True
    follower.saw_ack({"received": 0})
    for _ in range(60):  # a never-reading page asked for the whole broadcast again and again
        await follower.on_event({"kind": "frames", "broadcast": "b1", "frames": [[n, frame(n, 1000)] for n in range(200)],
                                 "next_seq": 200})
        assert follower.pending_bytes <= 20_000
    assert len(page.to_page) == 5 and follower.overflowed
    page.to_group.clear()
    follower.saw_ack({"received": 10_000})
    await asyncio.sleep(0.05)
    assert page.to_group and page.to_group[-1]["kind"] == "sync"  # the dropped frames are asked for again
    await follower.leave()


@DB
async def test_follow_toggles_are_rate_limited():
    comm = WebsocketCommunicator(application, "/ws/session/", headers=[(b"origin", ORIGIN.encode())])
    assert (await comm.connect())[0]
    codes = []
    for i in range(FOLLOW_BURST + 3):
        await comm.send_json_to({"type": "follow", "on": i % 2 == 0})
        while True:
            message = await comm.receive_json_from(timeout=10)
            if message["type"] in ("error", "workshop") and not (message["type"] == "workshop" and i == 0 and
                                                                 "following" in message and not message["following"]):
                break
        codes.append(message.get("code", "ok"))
    assert codes[:FOLLOW_BURST] == ["ok"] * FOLLOW_BURST and "rate_limited" in codes[FOLLOW_BURST:]
    await comm.disconnect()


# ---- the host's login ----------------------------------------------------------------------------

def wrong(client, n, address="198.51.100.20"):
    for _ in range(n):
        assert client.post("/host/", {"password": "guess"}, REMOTE_ADDR=address).status_code in (403, 429)


@DB
def test_a_guesser_elsewhere_never_locks_the_host_out():
    wrong(Client(), lockout.MAX_FAILURES + 3)
    assert Client().post("/host/", {"password": PASSWORD}, REMOTE_ADDR="198.51.100.20").status_code == 429
    assert Client().post("/host/", {"password": PASSWORD}, REMOTE_ADDR="198.51.100.21").status_code == 302


def test_the_backoff_doubles_past_the_limit_and_is_capped():
    now = __import__("time").time()
    assert lockout.locked_for({"n": lockout.MAX_FAILURES - 1, "last": now}) == 0
    assert lockout.LOCKOUT_S - 1 < lockout.locked_for({"n": lockout.MAX_FAILURES, "last": now}) <= lockout.LOCKOUT_S
    assert 2 * lockout.LOCKOUT_S - 1 < lockout.locked_for({"n": lockout.MAX_FAILURES + 1, "last": now}) <= 2 * lockout.LOCKOUT_S
    assert lockout.locked_for({"n": 50, "last": now}) <= lockout.MAX_LOCKOUT_S


@DB
def test_the_consoles_link_logs_in_once_past_a_lockout():
    """The host behind the same NAT as the guesser: the link printed by `make workshop` still works, once."""
    wrong(Client(), lockout.MAX_FAILURES)
    browser = Client(REMOTE_ADDR="198.51.100.20")
    assert browser.post("/host/", {"password": PASSWORD}).status_code == 429
    assert browser.get("/host/?link=wrong-token").status_code == 403
    assert browser.get("/host/?link=console-link-token").status_code == 302
    assert b'id="stats"' in browser.get("/host/").content
    assert Client().get("/host/?link=console-link-token").status_code == 403  # one time only


@DB
def test_the_lockout_is_shared_by_every_process_through_redis(settings, tmp_path):
    """With REDIS_URL the cache is Redis: wrong passwords here lock the address out in another process too."""
    with redis_server() as url:
        before, settings.CACHES = settings.CACHES, {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                                             "LOCATION": url}}
        wrong(Client(), lockout.MAX_FAILURES)
        other = subprocess.run(
            [sys.executable, "-c", "import django; django.setup(); from django.core.management import call_command; "
             "call_command('migrate', verbosity=0); from django.test import Client; "
             "print(Client().post('/host/', {'password': 'class-of-2025'}, REMOTE_ADDR='198.51.100.20').status_code, "
             "Client().post('/host/', {'password': 'class-of-2025'}, REMOTE_ADDR='198.51.100.30').status_code)"],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
            env={**__import__("os").environ, "REDIS_URL": url, "EXPLAINER_HOST_PASSWORD": PASSWORD,
                 "DJANGO_SETTINGS_MODULE": "explainer.settings", "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"})
        settings.CACHES = before  # before this Redis goes
        assert other.stdout.split() == ["429", "302"], other.stderr[-2000:]

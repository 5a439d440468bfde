"""Limits (docs/protocol.md, "Limits and flow control"): rate, connections per address, the device queue,
the outbound window, and Daphne's frame cap as the Makefile sets it."""
import asyncio
import json
import shutil
import subprocess
import threading

import pytest
import websockets
from websockets.asyncio.client import connect as ws_connect

from explainer.services.admission import limits
from explainer.services.device import model_registry
from explainer.services.admission.capacity import generating
from explainer.services.device.executors import executor_for
from explainer.services.run.visitor_run import READER_PAUSED, live_sessions
from tests.conftest import require
from tests.explainer.live_server import ORIGIN, daphne_flag, start_daphne
from tests.support import client_module, connect, stories_spec, until

MESSAGES = [{"role": "user", "content": "<t403> <t407>"}]


pytestmark = pytest.mark.usefixtures("stories_model")  # tests/explainer/conftest.py


class FrozenClock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock(monkeypatch):
    frozen = FrozenClock()
    monkeypatch.setattr(limits, "now", frozen)
    return frozen


# ---- the token bucket and the address -----------------------------------------------------------
def test_token_bucket_spends_its_burst_then_refills_at_its_rate():
    clock = FrozenClock()
    bucket = limits.TokenBucket(rate=2, burst=3, clock=clock)
    assert [bucket.take() for _ in range(3)] == [0, 0, 0]
    assert bucket.take() == pytest.approx(0.5)  # the next token is half a second away at 2/s
    clock.t += 0.5
    assert bucket.take() == 0 and bucket.take() == pytest.approx(0.5)
    clock.t += 100
    assert [bucket.take() for _ in range(4)][:3] == [0, 0, 0]  # refills only up to the burst


@pytest.mark.parametrize("peer,forwarded,trusted,expected", [
    ("1.2.3.4", None, [], "1.2.3.4"),
    ("1.2.3.4", "9.9.9.9", [], "1.2.3.4"),  # an untrusted peer's header is ignored
    ("10.0.0.1", "203.0.113.7", ["10.0.0.1"], "203.0.113.7"),
    ("10.0.0.1", "6.6.6.6, 203.0.113.7, 10.0.0.2", ["10.0.0.1", "10.0.0.2"], "203.0.113.7"),  # left part is the client's word
    ("10.0.0.1", None, ["10.0.0.1"], "10.0.0.1"),
    (None, "203.0.113.7", [], None),
])
def test_client_address(settings, peer, forwarded, trusted, expected):
    settings.EXPLAINER_TRUSTED_PROXIES = trusted
    scope = {"client": [peer, 1] if peer else None, "headers": [(b"x-forwarded-for", forwarded.encode())] if forwarded else []}
    assert limits.client_address(scope) == expected


# ---- rate -----------------------------------------------------------------------------------------
async def test_rate_limited_frames_get_retry_after_and_the_socket_stays_usable(settings, clock):
    settings.EXPLAINER_RATE_PER_S, settings.EXPLAINER_RATE_BURST = 2, 3
    comm = await connect()
    for _ in range(3):
        await comm.send_json_to({"type": "pause"})
        assert (await comm.receive_json_from())["code"] == "no_run"  # read and answered
    await comm.send_json_to({"type": "pause"})
    refused = await comm.receive_json_from()
    assert (refused["code"], refused["retry_after_s"]) == ("rate_limited", 0.5)
    clock.t += refused["retry_after_s"]
    await comm.send_json_to({"type": "pause"})
    assert (await comm.receive_json_from())["code"] == "no_run"
    await comm.disconnect()


async def test_a_socket_that_keeps_flooding_is_closed(settings, clock):
    settings.EXPLAINER_RATE_PER_S, settings.EXPLAINER_RATE_BURST = 1, 1
    comm = await connect()
    await comm.send_json_to({"type": "pause"})
    assert (await comm.receive_json_from())["code"] == "no_run"
    for _ in range(limits.STRIKES_BEFORE_CLOSE):
        await comm.send_json_to({"type": "pause"})
        assert (await comm.receive_json_from())["code"] == "rate_limited"
    await comm.send_json_to({"type": "pause"})  # one more refusal than the strikes allow
    assert (await comm.receive_json_from())["code"] == "rate_limited"
    assert await comm.receive_output(timeout=5) == {"type": "websocket.close", "code": limits.REFUSED_CLOSE_CODE}


# ---- connections per address ----------------------------------------------------------------------
async def test_connections_per_address(settings):
    settings.EXPLAINER_MAX_CONNECTIONS_PER_IP = 2
    first, second = await connect("198.51.100.7"), await connect("198.51.100.7")
    other = await connect("198.51.100.8")
    third = await connect("198.51.100.7", expect_ready=False)
    refusal = await third.receive_json_from()
    assert (refusal["type"], refusal["code"]) == ("error", "too_many_connections")
    assert await third.receive_output() == {"type": "websocket.close", "code": limits.REFUSED_CLOSE_CODE}
    assert limits.open_connections("198.51.100.7") == 2
    await first.disconnect()
    again = await connect("198.51.100.7")  # a closed socket frees its place
    for comm in (second, other, again):
        await comm.disconnect()
    assert limits.open_connections("198.51.100.7") == limits.open_connections("198.51.100.8") == 0


# ---- overload: the device queue -------------------------------------------------------------------
async def test_on_demand_requests_get_busy_while_the_device_queue_is_long(settings):
    settings.EXPLAINER_MAX_DEVICE_QUEUE = 0
    comm = await connect()
    await comm.send_json_to({"type": "measure", "what": "kv"})
    assert (await until(comm, lambda m: m["type"] == "serving"))[-1]["what"] == "kv"  # model loaded, queue empty
    gate = threading.Event()
    device = model_registry.get_model().description.device
    blocked = [executor_for(device).submit(gate.wait, 30) for _ in range(2)]  # one running, one waiting
    try:
        await comm.send_json_to({"type": "measure", "what": "kv"})
        busy = await comm.receive_json_from()
        assert busy["type"] == "busy" and busy["retry_after_s"] > 0 and "waiting for the device" in busy["reason"]
    finally:
        gate.set()
    for future in blocked:
        await asyncio.wrap_future(future)
    await comm.send_json_to({"type": "measure", "what": "kv"})
    assert (await comm.receive_json_from())["type"] == "serving"
    await comm.disconnect()


# ---- slow readers: the outbound window -----------------------------------------------------------
def start(steps: int, **extra) -> dict:
    return {"type": "start", "messages": MESSAGES, "params": {"seed": 4, "max_new_tokens": steps}, **extra}


async def test_a_client_that_never_acks_is_not_held_to_the_window(settings):
    settings.EXPLAINER_OUTBOUND_WINDOW = 8
    comm = await connect()
    for _ in range(2):  # two whole runs, each far longer than the window
        await comm.send_json_to(start(30))
        seen = await until(comm, lambda m: m["type"] == "status" and m["state"] == "finished")
        assert [m["type"] for m in seen].count("step") == 30 and READER_PAUSED not in seen
    await comm.send_json_to({"type": "detail", "what": "hidden", "step": 1, "layer": 0})
    assert (await comm.receive_json_from())["type"] == "detail"
    await comm.disconnect()


async def test_a_client_that_never_acks_waits_past_its_ceiling(settings):
    """Run after run without reading: past EXPLAINER_UNACKED_MAX messages the run waits for an ack."""
    settings.EXPLAINER_UNACKED_MAX = 50
    comm = await connect()
    await comm.send_json_to(start(30))
    seen = await until(comm, lambda m: m["type"] == "status" and m["state"] == "finished")
    assert READER_PAUSED not in seen  # one whole run fits under the ceiling
    await comm.send_json_to(start(30))
    seen = await until(comm, lambda m: m == READER_PAUSED)
    assert 0 < [m["type"] for m in seen].count("step") < 30
    assert await comm.receive_nothing(timeout=0.3)
    await comm.send_json_to({"type": "ack", "received": 10_000})
    seen = await until(comm, lambda m: m["type"] == "status" and m["state"] == "finished")
    assert seen[-1]["message"] == "max_new_tokens"
    await comm.disconnect()


async def test_a_slow_reader_pauses_the_run_and_acks_resume_it(settings):
    settings.EXPLAINER_OUTBOUND_WINDOW = 12
    comm = await connect()
    read = 1  # the ready status
    await comm.send_json_to({"type": "ack", "received": read})  # a client that acks is held to the window
    await comm.send_json_to(start(40))
    seen = await until(comm, lambda m: m == READER_PAUSED)
    read += len(seen)
    steps = [m for m in seen if m["type"] == "step"]
    assert 0 < len(steps) < 40 and len(seen) <= 1 + 12 + 2  # what was acked, the window, the step past it, the notice
    assert await comm.receive_nothing(timeout=0.3)  # paused: nothing more is queued for this reader
    await comm.send_json_to({"type": "detail", "what": "hidden", "step": 1, "layer": 0})
    busy = await comm.receive_json_from()
    assert busy["type"] == "busy" and busy["reason"] == READER_PAUSED["message"]
    read += 1
    await comm.send_json_to({"type": "ack", "received": 2})  # 14 of the run's 16 unread: still past the window
    assert await comm.receive_nothing(timeout=0.3)
    await comm.send_json_to({"type": "ack", "received": 0})  # a stale ack changes nothing
    assert await comm.receive_nothing(timeout=0.3)
    total = len(steps)
    while True:  # acking as the page does, the run goes on to the end
        await comm.send_json_to({"type": "ack", "received": read})
        message = await comm.receive_json_from(timeout=30)
        read += 1
        total += message["type"] == "step"
        if message["type"] == "status" and message["state"] == "finished":
            break
    assert total == 40
    await comm.disconnect()


async def test_stop_and_disconnect_work_while_waiting_for_acks(settings):
    settings.EXPLAINER_OUTBOUND_WINDOW = 8
    comm = await connect()
    await comm.send_json_to({"type": "ack", "received": 0})
    await comm.send_json_to(start(40))
    await until(comm, lambda m: m == READER_PAUSED)
    await comm.send_json_to({"type": "stop"})
    done = (await until(comm, lambda m: m["type"] == "done"))[-1]
    assert done["stop_reason"] == "stopped"
    await comm.send_json_to(start(40))
    await until(comm, lambda m: m == READER_PAUSED)
    assert generating.active == 1 and live_sessions() == 1
    await comm.disconnect(timeout=30)
    assert generating.active == 0 and live_sessions() == 0


async def test_a_visitor_pause_while_waiting_for_acks_holds_after_the_acks(settings):
    settings.EXPLAINER_OUTBOUND_WINDOW = 8
    comm = await connect()
    await comm.send_json_to({"type": "ack", "received": 0})
    await comm.send_json_to(start(40))
    seen = await until(comm, lambda m: m == READER_PAUSED)
    await comm.send_json_to({"type": "pause"})
    assert (await comm.receive_json_from())["state"] == "paused"
    await comm.send_json_to({"type": "ack", "received": 1 + len(seen) + 1})  # everything read
    assert await comm.receive_nothing(timeout=0.3)  # room again, but the visitor paused it: no step
    await comm.send_json_to({"type": "resume"})
    assert (await comm.receive_json_from())["state"] == "running"
    assert (await comm.receive_json_from())["type"] == "step"
    await comm.disconnect()


@pytest.mark.parametrize("ack,code", [({}, "missing_field"), ({"received": -1}, "out_of_range"),
                                      ({"received": "7"}, "wrong_type"), ({"received": 2**53 + 1}, "out_of_range"),
                                      ({"received": True}, "wrong_type")])
async def test_bad_acks_are_refused(ack, code):
    comm = await connect()
    await comm.send_json_to({"type": "ack", **ack})
    error = await comm.receive_json_from()
    assert (error["code"], error["field"]) == (code, "received")
    await comm.send_json_to({"type": "ack", "received": 1})  # a good one has no reply
    assert await comm.receive_nothing(timeout=0.2)
    await comm.disconnect()


def test_client_js_acks_every_8_messages_at_most_every_100_ms_and_when_idle(tmp_path):
    node = require(shutil.which("node"), "node", "apt-get install nodejs")
    module = client_module(tmp_path)  # the same file, as an ES module node will import
    driver = tmp_path / "drive.mjs"
    driver.write_text(NODE_DRIVER)
    out = subprocess.run([node, str(driver), module.as_uri()], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result == {"acks_after_11": [8], "acks_after_idle": [8, 11], "acks_in_a_burst": [8, 11, 35],
                      "acks_spaced_out": [8, 11, 35, 43], "acks_after_reconnect": [8, 11, 35, 43, 49, 3],
                      "steps_seen": 52, "user_frames": [{"type": "start"}]}


NODE_DRIVER = """
const sent = [];
class FakeSocket extends EventTarget {
  static CONNECTING = 0; static OPEN = 1; static CLOSING = 2; static CLOSED = 3;
  constructor(url) { super(); this.readyState = 0; FakeSocket.last = this; }
  send(text) { sent.push(JSON.parse(text)); }
  close() { this.readyState = 3; this.dispatchEvent(new Event("close")); }
  open() { this.readyState = 1; this.dispatchEvent(new Event("open")); }
  deliver(message) { const event = new Event("message"); event.data = JSON.stringify(message); this.dispatchEvent(event); }
}
globalThis.WebSocket = FakeSocket;
let now = 0;
Date.now = () => now;
const timers = [];
globalThis.setTimeout = (fn) => { timers.push({ fn, live: true }); return timers.length; };
globalThis.clearTimeout = (id) => { if (id) timers[id - 1].live = false; };
const runTimers = () => { for (const t of timers.splice(0)) if (t.live) { t.live = false; t.fn(); } };
const acks = () => sent.filter((m) => m.type === "ack").map((m) => m.received);

const { SessionClient } = await import(process.argv[2]);
const client = new SessionClient("ws://test/ws/session/");
let steps = 0;
client.addEventListener("step", () => { steps += 1; });
client.connect();
FakeSocket.last.open();
client.send({ type: "start" });
for (let i = 0; i < 11; i++) FakeSocket.last.deliver({ type: "step", step: i });
const out = { acks_after_11: acks() };
runTimers();
out.acks_after_idle = acks();
for (let i = 0; i < 27; i++) FakeSocket.last.deliver({ type: "step", step: i });  // within 100 ms: only the urgent ack
out.acks_in_a_burst = acks();
now += 150;
for (let i = 0; i < 11; i++) FakeSocket.last.deliver({ type: "step", step: i });  // 100 ms later: every 8 again
out.acks_spaced_out = acks();
runTimers();
FakeSocket.last.close();  // the server went away: the client reconnects and counts again from 0
runTimers();
FakeSocket.last.open();
for (let i = 0; i < 3; i++) FakeSocket.last.deliver({ type: "step", step: i });
runTimers();
out.acks_after_reconnect = acks();
out.steps_seen = steps;
out.user_frames = sent.filter((m) => m.type !== "ack");
client.close();
console.log(JSON.stringify(out));
"""


# ---- Daphne's frame cap, as `make run` sets it -------------------------------------------------------
async def test_daphne_refuses_frames_past_its_cap_and_the_app_names_smaller_ones(tmp_path, settings):
    cap = int(daphne_flag("--websocket-max-message-size"))
    assert settings.EXPLAINER_MAX_FRAME_BYTES < cap  # frames in between get a named error, not a dropped socket
    server = await asyncio.to_thread(start_daphne, tmp_path, stories_spec())
    try:
        async with ws_connect(server.ws_url, origin=server.origin, proxy=None, compression=None, max_size=None) as ws:
            assert json.loads(await ws.recv())["state"] == "ready"
            for size in (settings.EXPLAINER_MAX_FRAME_BYTES + 1, cap):  # past the app's cap, within Daphne's
                await ws.send(json.dumps({"type": "start", "text": "x" * (size - 29)}))  # exactly size bytes
                assert json.loads(await ws.recv())["code"] == "frame_too_large"
            await ws.send("x" * (cap + 1))
            with pytest.raises(websockets.ConnectionClosed):  # autobahn drops the connection, reading no further
                await ws.recv()
        async with ws_connect(server.ws_url, origin=server.origin, proxy=None) as ws:  # and goes on serving others
            assert json.loads(await ws.recv())["state"] == "ready"
    finally:
        await asyncio.to_thread(server.stop)

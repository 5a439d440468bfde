"""Slow readers cost bytes, not messages (issue 16, finding 1): a client that never reads, and one that acks
what it never read, each cost the server at most EXPLAINER_MAX_QUEUED_BYTES, are closed, and the server's
RSS comes back to within 10% of its baseline once they are gone. Run on a real Daphne (make run's flags).

Both clients meet one Daphne (module-scoped), each reading its own part of its log. Each figure is read on
a settled RSS (steady for a second: settled_rss): the cost of the unread replies is measured from the
server's RSS once the client's own paused run is open, so that run's KV cache and kept tensors (any
visitor's) are not counted as queued bytes; the margin over the bound is ALLOCATOR_SLACK."""
import asyncio
import json
import os
import socket
import time

import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

from explainer.services.admission.limits import OutboundWindow
from tests.explainer.live_server import start_daphne
from tests.inference.conftest import STORIES

MIB = 2**20
# Below the default (8 MiB): Daphne stops reading a socket once 64 KiB wait to be sent, so a client's own
# requests can queue only a few MB of replies on this model before that backpressure holds them.
BOUND = 1 * MIB
ALLOCATOR_SLACK = 4 * MIB  # the replies being built and encoded, allocator rounding (3.4 MiB seen)
# ~140 tokens: each attention detail is ~105 KB, as in the report (and under Daphne's 128 KiB message cap).
PROMPT = " ".join(f"<t{400 + i % 100}>" for i in range(45))
DETAIL = {"type": "detail", "what": "attention", "step": 0, "layer": 0, "head": 0}
REQUESTS = 150  # ~16 MB of replies: past the bound plus the server's kernel send buffer (up to 4 MB)
PACE_S = 0.07  # with an ack every 4th request, 18 frames a second (EXPLAINER_RATE_PER_S is 20)
CLIENT_RECEIVE_BUFFER = 64 * 1024  # fixed, so the client's kernel cannot absorb tens of MB (Linux autotunes to 32 MB)


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def open_paused_run(server, **options):
    """A socket with a paused run on the long prompt, everything up to the `paused` status and the causal-mask
    check (it runs after the prefill, so it may come after the status) read."""
    ws = await ws_connect(server.ws_url, origin=server.origin, proxy=None, max_size=None, compression=None, **options)
    assert json.loads(await ws.recv())["state"] == "ready"
    await ws.send(json.dumps({"type": "start", "text": PROMPT, "paused": True, "params": {"seed": 1, "max_new_tokens": 4}}))
    paused = checked = False
    while not (paused and checked):
        message = json.loads(await ws.recv())
        paused = paused or message.get("state") == "paused"
        checked = checked or message.get("type") == "check"
    return ws


async def warm_up(server) -> None:
    """One honest visitor reads a detail reply: the allocations every visitor makes are in the baseline."""
    ws = await open_paused_run(server)
    for _ in range(3):
        await ws.send(json.dumps(DETAIL))
        assert json.loads(await ws.recv())["type"] == "detail"
    await ws.close()


async def misbehave(server, lie: bool) -> tuple[int, int, bool]:
    """Ask for REQUESTS big replies and read none (acking them all when `lie`): the server's settled RSS once
    this client's paused run is open (its KV cache and kept tensors are what any visitor's run costs, not
    unread bytes), the peak RSS seen while its replies pile up, and whether the server closed the socket."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, CLIENT_RECEIVE_BUFFER)
    sock.connect(("127.0.0.1", server.port))
    log_from = len(server.log())  # the module's server: only this client's close counts
    ws = await open_paused_run(server, max_queue=1, sock=sock)  # the client library stops reading once one frame waits
    with_run = await settled_rss(server.proc.pid)
    peak, closed = with_run, False
    try:
        for n in range(REQUESTS):
            await ws.send(json.dumps(DETAIL))
            if lie and n % 4 == 3:
                await ws.send(json.dumps({"type": "ack", "received": 2**53}))
            await asyncio.sleep(PACE_S)
            peak = max(peak, rss(server.proc.pid))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not closed:
            await asyncio.sleep(0.1)
            peak = max(peak, rss(server.proc.pid))
            closed = "bytes unread" in server.log()[log_from:]
    except ConnectionClosed:
        closed = True
    finally:
        if not closed:
            ws.transport.abort()  # it cannot close politely: it never reads the server's close frame
    return with_run, peak, closed


async def settled_rss(pid: int, target: int | None = None, steady: int = 256 * 1024, timeout_s: float = 15) -> int:
    """RSS once it has settled: at or under `target` if one is given (Daphne reaps closed sockets each second),
    else once four readings 0.25 s apart (a second) stay within `steady` bytes of each other."""
    readings = [rss(pid)]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        await asyncio.sleep(0.25)
        readings.append(rss(pid))
        if target is not None and readings[-1] <= target:
            break
        if target is None and len(readings) >= 4 and max(readings[-4:]) - min(readings[-4:]) <= steady:
            break
    return readings[-1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One Daphne for both clients (each test reads its own figures from it, and its own part of the log)."""
    server = start_daphne(tmp_path_factory.mktemp("slow-readers"), str(STORIES), {"EXPLAINER_MAX_QUEUED_BYTES": str(BOUND)})
    yield server
    server.stop()


@pytest.mark.xdist_group("slow_readers")  # both on one worker, so they share its server
@pytest.mark.parametrize("lie", [False, True], ids=["never_reads", "acks_what_it_never_read"])
async def test_an_unread_socket_costs_at_most_the_bound_and_gives_it_back(server, lie):
    log_from = len(server.log())
    await warm_up(server)
    baseline = await settled_rss(server.proc.pid)  # idle, after one honest visitor
    with_run, peak, closed = await misbehave(server, lie)
    after = await settled_rss(server.proc.pid, int(baseline * 1.1))
    print(f"\n{'lying' if lie else 'never-reading'} client: RSS baseline {baseline / MIB:.0f} MiB, its paused run "
          f"{(with_run - baseline) / MIB:+.1f} MiB, its unread replies +{(peak - with_run) / MIB:.1f} MiB at the peak "
          f"(bound {BOUND / MIB:.0f} MiB + slack {ALLOCATOR_SLACK / MIB:.0f} MiB), after it left "
          f"{(after - baseline) / MIB:+.1f} MiB")
    log = server.log()[log_from:]
    assert closed, log[-2000:]
    assert peak - with_run <= BOUND + ALLOCATOR_SLACK  # what its unread replies cost, over its run's settled RSS
    assert after <= baseline * 1.10
    assert "Traceback" not in log, log[-3000:]


def test_an_ack_cannot_claim_more_than_was_sent():
    window = OutboundWindow(size=2, unacked_max=100)
    for _ in range(5):
        window.count_sent(100)
    window.ack(9007199254740992)  # 2**53: it would switch the window off
    assert window.acked == 5
    for _ in range(4):
        window.count_sent(100)
    assert window.full  # 4 unread > 2: the lie bought nothing more than the truth would have


def test_the_window_fills_on_bytes_too():
    window = OutboundWindow(size=32, unacked_max=1024, max_bytes=1000)
    window.ack(0)
    window.count_sent(400)
    assert not window.full
    window.count_sent(200)  # 600 unread bytes > half the bound, though only 2 messages
    assert window.full
    window.ack(1)
    assert not window.full and window.queued_bytes == 200

"""Slow HTTP clients cannot exhaust the server (issue 22, N5): the real Daphne, as `make run` starts it, under a
lowered file-descriptor limit, with 300 sockets trickling request headers from one loopback address."""
import errno
import os
import resource
import socket
import time
import urllib.request

import pytest

from explainer.slow_clients import HalfOpenCount, HeaderDeadline
from tests.explainer.live_server import start_daphne

SOCKETS = 300
FD_ROOM = 200  # descriptors the server may open past its idle count: fewer than SOCKETS, many more than the cap
HEADER_TIMEOUT_S = 2  # EXPLAINER_HEADER_TIMEOUT_S for the test (10 by default)
PER_ADDRESS = 64  # EXPLAINER_HALF_OPEN_PER_ADDRESS's default
ATTACKER = "127.0.0.2"  # another loopback address: /healthz is asked from 127.0.0.1, as a health check would be


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


class Trickle:
    """Sockets that send a request line, then one byte of a header at a time, and never finish their headers."""

    def __init__(self, port: int, count: int):
        self.port, self.count = port, count
        self.open: list[socket.socket] = []
        self.answers: list[bytes] = []  # what the server said before it closed a socket (408, 503), or b""

    def __enter__(self):
        for _ in range(self.count):
            s = socket.socket()
            s.bind((ATTACKER, 0))
            s.settimeout(0.2)  # a server out of descriptors never accepts: don't wait long for each
            try:
                s.connect(("127.0.0.1", self.port))
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Trickle: ")
            except OSError:
                s.close()
                continue
            s.setblocking(False)
            self.open.append(s)
        return self

    def tick(self) -> None:
        """One more byte on every open socket; forget those the server closed."""
        still = []
        for s in self.open:
            if self._closed_by_server(s):
                s.close()
                continue
            try:
                s.send(b"a")
            except OSError:
                s.close()
                continue
            still.append(s)
        self.open = still

    def _closed_by_server(self, s) -> bool:
        try:
            answer = s.recv(4096)
        except BlockingIOError:
            return False
        except OSError as e:
            assert e.errno in (errno.ECONNRESET, errno.EPIPE), e
            answer = b""
        self.answers.append(answer)
        return True

    def __exit__(self, *exc):
        for s in self.open:
            s.close()


def healthz_s(url: str) -> float:
    """Seconds /healthz took to answer 200; fails past 1 s."""
    started = time.monotonic()
    with urllib.request.urlopen(url + "/healthz", timeout=1) as response:
        assert response.status == 200
    return time.monotonic() - started


@pytest.fixture
def server(tmp_path):
    live = start_daphne(tmp_path, "bundled", env={"EXPLAINER_HEADER_TIMEOUT_S": str(HEADER_TIMEOUT_S)})
    _, hard = resource.prlimit(live.proc.pid, resource.RLIMIT_NOFILE)
    resource.prlimit(live.proc.pid, resource.RLIMIT_NOFILE, (open_fds(live.proc.pid) + FD_ROOM, hard))
    yield live
    live.stop()


def test_300_trickling_sockets_leave_healthz_answering_and_are_closed_after_the_header_timeout(server):
    idle = open_fds(server.proc.pid)
    started = time.monotonic()
    with Trickle(server.port, SOCKETS) as trickle:
        print(f"connected {len(trickle.open)} in {time.monotonic() - started:.2f} s")
        latencies, held = [], []
        while time.monotonic() - started < HEADER_TIMEOUT_S * 0.75:  # before the deadline
            trickle.tick()
            held.append(open_fds(server.proc.pid) - idle)
            latencies.append(healthz_s(server.url))
            time.sleep(0.25)
        print(f"{SOCKETS} trickling sockets: server fds held {max(held)} past idle, /healthz {max(latencies):.3f} s at worst")
        assert len(trickle.open) <= PER_ADDRESS, "one address holds a bounded number of half-open connections"
        assert any(a.startswith(b"HTTP/1.1 503") for a in trickle.answers)
        while trickle.open and time.monotonic() - started < HEADER_TIMEOUT_S + 5:
            trickle.tick()
            time.sleep(0.25)
        assert not trickle.open, f"{len(trickle.open)} trickling sockets still open after the header timeout"
        assert any(a.startswith(b"HTTP/1.1 408") for a in trickle.answers)
    assert healthz_s(server.url) < 1
    server_log = server.log()
    assert "Traceback" not in server_log, server_log[-3000:]


def test_a_complete_request_after_a_slow_start_is_served(server):
    """Headers that arrive in pieces within the deadline are a normal request; keep-alive still works."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        for piece in (b"GET /healthz HTTP/1.1\r\n", b"Host: 127.0.0.1\r\n", b"\r\n"):
            s.sendall(piece)
            time.sleep(HEADER_TIMEOUT_S / 4)
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")  # the same connection, kept alive
        assert s.recv(4096).startswith(b"HTTP/1.1 200")


class FakeTimer:
    def __init__(self, call):
        self.call, self.cancelled = call, False

    def active(self):
        return not self.cancelled

    def cancel(self):
        self.cancelled = True


def test_an_idle_keep_alive_connection_is_timed_but_not_counted():
    count = HalfOpenCount(per_address=1, exempt=["10.0.0.9"])
    timers, expired = [], []
    deadline = HeaderDeadline(count, "10.0.0.1", 10, lambda _s, call: timers.append(FakeTimer(call)) or timers[-1],
                              lambda: expired.append(True))
    deadline.waiting()
    assert not count.admits("10.0.0.1") and count.admits("10.0.0.2") and count.admits("10.0.0.9")
    deadline.done()  # headers in
    assert count.admits("10.0.0.1") and timers[0].cancelled and not count.open
    deadline.waiting(idle=True)  # after the response, kept alive
    assert count.admits("10.0.0.1")
    deadline.data()  # the next request's headers begin
    assert not count.admits("10.0.0.1")
    timers[-1].call()
    assert expired == [True] and count.admits("10.0.0.1") and not count.open

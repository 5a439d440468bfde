"""Per-socket and per-address limits (docs/protocol.md, "Limits and flow control").

A token bucket caps each socket's message rate; a socket that keeps flooding is closed. Open sockets are
counted per client address. The outbound window (how far a run may get ahead of what its client has
read) is `OutboundWindow`, used by explainer/services/run/visitor_run.py.
"""
from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter, deque

from django.conf import settings
from django.core.cache import cache

from explainer.protocol import ProtocolError
from explainer.messages import error_payload
from inference.wire.said import said

REFUSED_CLOSE_CODE = 4029  # like HTTP 429: too many connections, or a socket that kept flooding
QUEUED_CLOSE_CODE = 4009  # like 1009: more than EXPLAINER_MAX_QUEUED_BYTES sent and not yet read (explainer/daphne_patch.py)
STRIKES_BEFORE_CLOSE = 50  # refused frames a socket may accumulate before it is closed
STRIKES_FORGIVEN_PER_S = 1.0  # a flooder that calms down earns its strikes back slowly

_lock = threading.Lock()
_open_per_address: Counter[str] = Counter()


class RateLimited(ProtocolError):
    """`rate_limited`, with how long to wait before the next frame is accepted."""

    def __init__(self, retry_after_s: float):
        super().__init__("rate_limited", said("too many messages; wait %(seconds)s s", seconds=f"{retry_after_s:g}"))
        self.retry_after_s = retry_after_s

    def as_message(self) -> dict:
        return {**super().as_message(), "retry_after_s": self.retry_after_s}


def now() -> float:
    """The buckets' clock (tests replace it)."""
    return time.monotonic()


class TokenBucket:
    """`rate` tokens a second, at most `burst` saved up; each accepted event spends one."""

    def __init__(self, rate: float, burst: float, clock=None):
        self.rate, self.burst, self.clock = rate, burst, clock or now
        self.tokens, self.last = burst, self.clock()

    def take(self) -> float:
        """0 when a token was spent, else the seconds until one will be there."""
        t = self.clock()
        self.tokens = min(self.burst, self.tokens + (t - self.last) * self.rate)
        self.last = t
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate


def shared_take(key: str, rate: float, burst: float) -> float:
    """TokenBucket.take() for a bucket kept in Django's cache (Redis across processes with REDIS_URL): 0 when
    a token was spent, else the seconds to wait. Read and written back without a lock: two processes
    racing may both spend the same token, which a rate limit can afford."""
    bucket = TokenBucket(rate, burst, clock=time.time)
    bucket.tokens, bucket.last = cache.get(key) or (burst, bucket.last)
    wait = bucket.take()
    cache.set(key, (bucket.tokens, bucket.last), int(burst / rate) + 60)
    return wait


def client_address(scope) -> str | None:
    """The peer's address; behind a trusted proxy, the nearest X-Forwarded-For hop that is not a proxy."""
    peer = (scope.get("client") or [None])[0]
    trusted = settings.EXPLAINER_TRUSTED_PROXIES
    if peer is None or peer not in trusted:
        return peer
    forwarded = b",".join(v for k, v in scope.get("headers", []) if k.lower() == b"x-forwarded-for")
    hops = [hop.strip() for hop in forwarded.decode("latin-1").split(",") if hop.strip()]
    # Read from the right: each trusted proxy appended the address it saw; the left part is the client's word.
    for hop in reversed(hops):
        if hop not in trusted:
            return hop
    return hops[0] if hops else peer


def request_address(request) -> str | None:
    """An HTTP request's client address: under Daphne the one the socket limits use (trusted proxies resolved)."""
    scope = getattr(request, "scope", None)
    return client_address(scope) if scope else request.META.get("REMOTE_ADDR")


class SocketGuard:
    """Connections per address, message rate per socket."""

    def __init__(self, scope):
        self.address = client_address(scope)
        self.counted = False
        rate = settings.EXPLAINER_RATE_PER_S  # 0 turns the rate limit off
        self.bucket = TokenBucket(rate, max(1.0, settings.EXPLAINER_RATE_BURST)) if rate > 0 else None
        self.strikes = TokenBucket(STRIKES_FORGIVEN_PER_S, STRIKES_BEFORE_CLOSE)
        self.should_close = False  # set once the socket has flooded past STRIKES_BEFORE_CLOSE

    def admit(self) -> dict | None:
        """None to admit, else the `error` message to send before closing with REFUSED_CLOSE_CODE."""
        limit = settings.EXPLAINER_MAX_CONNECTIONS_PER_IP  # 0 turns the limit off
        if self.address is None or limit <= 0:  # no address (a UNIX socket, no trusted proxy): nothing to count by
            return None
        with _lock:
            if _open_per_address[self.address] >= limit:
                return error_payload("too_many_connections",
                                     said("at most %(limit)s open connections per address", limit=limit))
            _open_per_address[self.address] += 1
            self.counted = True
        return None

    def check_rate(self) -> None:
        """Raise RateLimited when the socket sends faster than its bucket allows."""
        wait = self.bucket.take() if self.bucket else 0.0
        if wait:
            if self.strikes.take():
                self.should_close = True
            raise RateLimited(round(max(wait, 0.01), 2))

    def release(self) -> None:
        """The socket closed (safe to call twice, and for a socket that was never admitted)."""
        if not self.counted:
            return
        self.counted = False
        with _lock:
            _open_per_address[self.address] -= 1
            if _open_per_address[self.address] <= 0:
                del _open_per_address[self.address]


def open_connections(address: str | None = None) -> int:
    """How many sockets from this address (None: from every address) are open now."""
    with _lock:
        return sum(_open_per_address.values()) if address is None else _open_per_address.get(address, 0)


class OutboundWindow:
    """How many messages (and bytes) a run has sent and its client has read (`ack`); the run waits while too far ahead.

    The window holds from the client's first ack on: more than `size` unread messages, or more than half of
    `max_bytes` (EXPLAINER_MAX_QUEUED_BYTES) of them, and the run waits, so an honest slow reader is
    paused long before the transport's own bound closes its socket (explainer/daphne_patch.py). A client
    that never acks (a short script) gets a much larger ceiling, `unacked_max` messages in all; its bytes are
    bounded by that transport check, which counts what is really unsent, whatever a client claims.
    """

    def __init__(self, size: int, unacked_max: int, max_bytes: int | None = None):
        self.size, self.unacked_max, self.sent, self.acked = size, unacked_max, 0, 0
        self.max_bytes = settings.EXPLAINER_MAX_QUEUED_BYTES if max_bytes is None else max_bytes
        self.unread_sizes: deque[int] = deque()  # encoded size of each sent message not yet acked, oldest first
        self.queued_bytes = 0  # their sum
        self.acking = False  # the client has acked at least once
        self._changed = asyncio.Event()

    @property
    def full(self) -> bool:
        if self.acking:
            too_many_bytes = 0 < self.max_bytes // 2 < self.queued_bytes
            return self.sent - self.acked > self.size or too_many_bytes
        return self.sent > self.unacked_max

    def count_sent(self, nbytes: int = 0) -> None:
        """One more message went out, `nbytes` long once encoded (0 where the sender cannot tell)."""
        self.sent += 1
        self.unread_sizes.append(nbytes)
        self.queued_bytes += nbytes

    def ack(self, received: int) -> None:
        """The client has read `received` messages on this socket (acks only move forward, and never past
        what was sent: a client cannot open the window by claiming more)."""
        received = min(received, self.sent)
        while self.acked < received:
            self.acked += 1
            self.queued_bytes -= self.unread_sizes.popleft()
        self.acking = True
        self._changed.set()

    def wake(self) -> None:
        """Make a waiting run look again (it was stopped or ended)."""
        self._changed.set()

    async def wait_for_room(self, give_up) -> None:
        """Return once the window has room, or as soon as give_up() is true."""
        while self.full and not give_up():
            self._changed.clear()
            await self._changed.wait()

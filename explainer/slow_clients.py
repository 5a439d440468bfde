"""Slow HTTP clients (slowloris): a deadline on request headers and a cap on half-open connections per address.

Daphne (Twisted) keeps a connection open while its request headers trickle in: Twisted's idle timeout (60 s)
restarts with every byte, and the per-address socket cap (EXPLAINER_MAX_CONNECTIONS_PER_IP) counts only
upgraded WebSockets. So 1,000 sockets sending a byte a second held every file descriptor of a process under
`ulimit -n 1024` and /healthz stopped answering (issue 22, N5). explainer/daphne_patch.py hooks these into
Daphne's HTTP factory and Twisted's HTTPChannel:

- HeaderDeadline: a connection waiting for request headers, its first request's or a keep-alive's next, is
  answered 408 and closed when they are not complete within EXPLAINER_HEADER_TIMEOUT_S.
- HalfOpenCount: connections of one address with a request's headers begun or not yet started on a new
  connection; past EXPLAINER_HALF_OPEN_PER_ADDRESS, a new connection from it is answered 503 and closed.
  An idle keep-alive connection (a browser's, between requests) is timed but not counted.
"""
from __future__ import annotations

import logging
from collections import Counter

log = logging.getLogger(__name__)

REQUEST_TIMEOUT = b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
TOO_MANY_HALF_OPEN = (b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 10\r\n"
                      b"Content-Length: 0\r\n\r\n")


class HalfOpenCount:
    """Half-open connections per client address; addresses in `exempt` (the trusted proxies) are never capped."""

    def __init__(self, per_address: int, exempt=()):
        self.per_address = per_address
        self.exempt = set(exempt)
        self.open = Counter()

    def admits(self, host) -> bool:
        return not self.per_address or host is None or host in self.exempt or self.open[host] < self.per_address

    def add(self, host) -> None:
        if host is not None:
            self.open[host] += 1

    def remove(self, host) -> None:
        if host is not None:
            self.open[host] -= 1
            if self.open[host] <= 0:
                del self.open[host]  # no entry per address ever seen


class HeaderDeadline:
    """One connection's wait for request headers: timed always, counted unless the connection is idle."""

    def __init__(self, count: HalfOpenCount, host, timeout_s: float, call_later, on_expiry):
        self.count, self.host, self.timeout_s = count, host, timeout_s
        self.call_later, self.on_expiry = call_later, on_expiry
        self.timer = None
        self.counted = False

    def waiting(self, idle: bool = False) -> None:
        """Headers are due: on a new connection (counted) or after a keep-alive response (idle, not counted)."""
        self.done()
        if not idle:
            self._count()
        if self.timeout_s > 0:
            self.timer = self.call_later(self.timeout_s, self._expire)

    def data(self) -> None:
        """Bytes arrived: an idle keep-alive connection has begun its next request's headers."""
        if self.timer is not None and not self.counted:
            self._count()

    def done(self) -> None:
        """Headers complete, or the connection is gone."""
        if self.timer is not None and self.timer.active():
            self.timer.cancel()
        self.timer = None
        if self.counted:
            self.count.remove(self.host)
            self.counted = False

    def _count(self) -> None:
        self.count.add(self.host)
        self.counted = True

    def _expire(self) -> None:
        self.timer = None
        log.info("closing a connection from %s: no complete request headers within %g s", self.host, self.timeout_s)
        self.done()
        self.on_expiry()

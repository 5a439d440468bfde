"""Fixes to Daphne 4.2, applied when the ASGI application is imported (explainer/asgi.py).

- Shutdown: on SIGTERM, `Server.kill_all_applications()` raises KeyError('application_instance') for a
  request that was upgraded to a WebSocket in the last second (it has no application yet). Then no
  application gets cancelled, and on Python < 3.11.8 the process segfaults at exit (CPython gh-113566).
  tests/explainer/test_lifecycle.py sends SIGTERM mid-run and needs a clean exit within the close timeout.
  Open sockets are also sent close code 1001 (going away) first, instead of having their TCP dropped (1006).
- Oversize frames: autobahn drops the TCP connection on a protocol failure (`failByDrop`), so a frame past
  --websocket-max-frame-size reached clients as 1006; with failByDrop off it sends close code 1009 first.
- Unread bytes: Twisted buffers whatever a client does not read, without limit. A socket with more than
  EXPLAINER_MAX_QUEUED_BYTES unsent is closed with 4009 (limits.QUEUED_CLOSE_CODE) and dropped a second
  later (autobahn's close handshake timeout) if the client does not read up to the close frame; the
  freed buffers are then handed back to the operating system (malloc_trim).
- Slow clients: Twisted waits for request headers as long as a byte arrives each minute, and nothing caps the
  connections one address holds before their headers are in. Headers must be complete within
  EXPLAINER_HEADER_TIMEOUT_S (408, closed), and one address may hold EXPLAINER_HALF_OPEN_PER_ADDRESS such
  connections (a new one past that gets 503): explainer/slow_clients.py.
"""
import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)
SHUTDOWN_CLOSE_CODE = 1001  # going away
SHUTDOWN_FLUSH_S = 0.25  # time for the close frames to leave before the reactor drops every connection


def patch_daphne() -> None:
    """Apply every fix once (idempotent)."""
    try:
        from daphne.server import Server
        from daphne.http_protocol import HTTPFactory
        from daphne.ws_protocol import WebSocketFactory, WebSocketProtocol
        from twisted.web.http import HTTPChannel
    except ImportError:
        return
    if getattr(Server.kill_all_applications, "patched_by_hit_enter", False):
        return
    _patch_shutdown(Server, WebSocketProtocol)
    _patch_fail_with_close_frame(WebSocketFactory)
    _patch_queued_bytes_limit(WebSocketProtocol)
    _patch_header_deadline(HTTPFactory, HTTPChannel)


patch_daphne_shutdown = patch_daphne  # the name explainer/asgi.py imports


def _patch_shutdown(Server, WebSocketProtocol) -> None:
    """Skip connections without an application while cancelling the others; say 1001 to open sockets first."""
    original = Server.kill_all_applications

    def kill_all_applications(self):
        from twisted.internet import defer, reactor, task  # the reactor Daphne installed, by now

        sockets = [p for p in self.connections if isinstance(p, WebSocketProtocol) and p.state == p.STATE_OPEN]
        for protocol in sockets:
            protocol.sendCloseFrame(code=SHUTDOWN_CLOSE_CODE, reasonUtf8=b"server shutting down")  # sendClose refuses 1001
        log.info("closing %d open WebSockets with %d", len(sockets), SHUTDOWN_CLOSE_CODE)
        everything = self.connections
        self.connections = {p: d for p, d in everything.items() if "application_instance" in d}
        try:
            cancelled = original(self)
        finally:
            self.connections = everything
        if not sockets:
            return cancelled
        return defer.DeferredList([cancelled, task.deferLater(reactor, SHUTDOWN_FLUSH_S, lambda: None)])

    kill_all_applications.patched_by_hit_enter = True
    Server.kill_all_applications = kill_all_applications


def _patch_fail_with_close_frame(WebSocketFactory) -> None:
    """Protocol failures (a frame over the size limit: 1009) send their close code instead of dropping TCP."""
    original = WebSocketFactory.__init__

    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.setProtocolOptions(failByDrop=False)

    WebSocketFactory.__init__ = __init__


def unsent_bytes(transport) -> int:
    """What Twisted holds for this connection and has not yet handed to the kernel."""
    buffered = getattr(transport, "dataBuffer", b"")
    return len(buffered) - getattr(transport, "offset", 0) + getattr(transport, "_tempDataLen", 0)


def _patch_queued_bytes_limit(WebSocketProtocol) -> None:
    from django.conf import settings

    from explainer.services.admission.limits import QUEUED_CLOSE_CODE

    original_send, original_close = WebSocketProtocol.serverSend, WebSocketProtocol.onClose

    def serverSend(self, content, binary=False):
        if self.state in (self.STATE_CLOSING, self.STATE_CLOSED):
            return  # closing (e.g. by the check below): the application's late messages have nowhere to go
        original_send(self, content, binary)
        limit = settings.EXPLAINER_MAX_QUEUED_BYTES
        queued = unsent_bytes(self.transport)
        if 0 < limit < queued and self.state == self.STATE_OPEN:
            log.warning("closing a WebSocket from %s: %d bytes unread (limit %d)", self.client_addr, queued, limit)
            self.queued_bytes_closed = True
            self.sendClose(code=QUEUED_CLOSE_CODE, reason="too much unread: read your messages")

    def onClose(self, wasClean, code, reason):
        original_close(self, wasClean, code, reason)
        if getattr(self, "queued_bytes_closed", False):
            drop_buffers(self.transport)  # the connection is gone: its unsent bytes can go now, not when Daphne reaps it
            release_freed_memory()

    WebSocketProtocol.serverSend, WebSocketProtocol.onClose = serverSend, onClose


def drop_buffers(transport) -> None:
    if hasattr(transport, "dataBuffer"):
        transport.dataBuffer, transport.offset, transport._tempDataBuffer, transport._tempDataLen = b"", 0, [], 0


def release_freed_memory() -> None:
    """Hand freed heap back to the OS: glibc keeps large freed buffers in its arenas otherwise."""
    name = ctypes.util.find_library("c")
    try:
        ctypes.CDLL(name).malloc_trim(0)
    except (OSError, AttributeError, TypeError):  # not glibc: nothing to trim
        pass


def _refusal():
    """What a connection past the half-open cap gets instead of Daphne's protocol: 503, then closed."""
    from twisted.internet.protocol import Protocol

    from explainer.slow_clients import TOO_MANY_HALF_OPEN

    class Refusal(Protocol):
        def connectionMade(self):
            self.transport.write(TOO_MANY_HALF_OPEN)
            self.transport.loseConnection()  # what it sent before the close is not read

    return Refusal()


def _patch_header_deadline(HTTPFactory, HTTPChannel) -> None:
    """Daphne's factory gives each connection a HeaderDeadline; HTTPChannel drives it (explainer/slow_clients.py)."""
    original_build = HTTPFactory.buildProtocol

    def buildProtocol(self, addr):
        count = _half_open_count(self)
        host = getattr(addr, "host", None)  # None for a UNIX socket: never capped
        if not count.admits(host):
            log.info("refusing a connection from %s: %d connections without complete headers", host, count.open[host])
            return _refusal()
        protocol = original_build(self, addr)
        channel = getattr(protocol, "_channel", protocol)  # Twisted's generic HTTP/1.1-or-2 proxy
        if isinstance(channel, HTTPChannel):
            channel.header_deadline = _deadline_for(channel, count, host)
        return protocol

    HTTPFactory.buildProtocol = buildProtocol
    _hook_channel(HTTPChannel)


def _half_open_count(factory):
    """One count per Daphne HTTP factory (one per process), made on its first connection, when settings are read."""
    from django.conf import settings

    from explainer.slow_clients import HalfOpenCount

    if getattr(factory, "half_open", None) is None:
        factory.half_open = HalfOpenCount(settings.EXPLAINER_HALF_OPEN_PER_ADDRESS, settings.EXPLAINER_TRUSTED_PROXIES)
    return factory.half_open


def _deadline_for(channel, count, host):
    from django.conf import settings

    from explainer.slow_clients import REQUEST_TIMEOUT, HeaderDeadline

    def expire():
        if channel.transport is not None:
            channel.transport.write(REQUEST_TIMEOUT)
            channel.timeoutConnection()  # close now; abort after Twisted's abortTimeout if the client does not read

    return HeaderDeadline(count, host, settings.EXPLAINER_HEADER_TIMEOUT_S, channel.callLater, expire)


def _hook_channel(HTTPChannel) -> None:
    """Start the deadline when headers are due, stop it when they are in or the connection is gone."""
    made, received, headers, done, lost = (HTTPChannel.connectionMade, HTTPChannel.dataReceived,
                                           HTTPChannel.allHeadersReceived, HTTPChannel.requestDone,
                                           HTTPChannel.connectionLost)

    def connectionMade(self):
        made(self)
        if getattr(self, "header_deadline", None):
            self.header_deadline.waiting()

    def dataReceived(self, data):
        if getattr(self, "header_deadline", None):
            self.header_deadline.data()  # before parsing: the headers may complete within these bytes
        received(self, data)

    def allHeadersReceived(self):
        if getattr(self, "header_deadline", None):
            self.header_deadline.done()
        headers(self)

    def requestDone(self, request):
        # Armed before Twisted parses a pipelined request it buffered, whose headers then stop it again.
        if getattr(self, "header_deadline", None) and self.persistent and self.transport is not None:
            self.header_deadline.waiting(idle=True)
        done(self, request)

    def connectionLost(self, reason):
        if getattr(self, "header_deadline", None):
            self.header_deadline.done()
        lost(self, reason)

    HTTPChannel.connectionMade, HTTPChannel.dataReceived = connectionMade, dataReceived
    HTTPChannel.allHeadersReceived, HTTPChannel.requestDone, HTTPChannel.connectionLost = (
        allHeadersReceived, requestDone, connectionLost)

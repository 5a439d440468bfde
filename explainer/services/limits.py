"""Per-socket and per-IP limits (issue 7). Placeholder: admits everything until the limits land."""

REFUSED_CLOSE_CODE = 4029


class SocketGuard:
    """Connections per IP, message rate per socket."""

    def __init__(self, scope):
        self.scope = scope

    def admit(self) -> dict | None:
        """None to admit, else the `error` message to send before closing."""
        return None

    def check_rate(self) -> None:
        """Raise ProtocolError("rate_limited", …) when the socket sends too fast."""

    def release(self) -> None:
        """The socket closed."""

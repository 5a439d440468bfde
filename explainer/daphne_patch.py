"""A fix for Daphne 4.2's shutdown, applied when the ASGI application is imported (explainer/asgi.py).

On SIGTERM, `Server.kill_all_applications()` raises KeyError('application_instance') for a request that
was upgraded to a WebSocket in the last second (it has no application yet). Then no application gets
cancelled, and on Python < 3.11.8 the process segfaults at exit (CPython gh-113566).
tests/explainer/test_lifecycle.py sends SIGTERM mid-run and needs a clean exit within the close timeout.
"""


def patch_daphne_shutdown() -> None:
    """Skip connections without an application while cancelling the others."""
    try:
        from daphne.server import Server
    except ImportError:
        return
    if getattr(Server.kill_all_applications, "patched_by_hit_enter", False):
        return
    original = Server.kill_all_applications

    def kill_all_applications(self):
        everything = self.connections
        self.connections = {p: d for p, d in everything.items() if "application_instance" in d}
        try:
            return original(self)
        finally:
            self.connections = everything

    kill_all_applications.patched_by_hit_enter = True
    Server.kill_all_applications = kill_all_applications

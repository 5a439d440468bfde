"""Workshop mode, the visitor's side: follow the host's broadcast run or go on alone. Placeholder."""
VERBS = ("follow",)


class NoFollower:
    """For sockets that never follow a host (embeds)."""

    def __init__(self, consumer=None):
        self.consumer = consumer

    async def join(self): pass

    async def leave(self): pass

    async def go_own_way(self): pass

    async def handle(self, message):
        from explainer.protocol import ProtocolError

        raise ProtocolError("invalid_state", "this socket cannot follow a workshop host", "type")

    async def on_frame(self, event): pass

    async def on_event(self, event): pass


Follower = NoFollower

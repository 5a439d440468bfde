"""Who is in the room: this process's article sockets, and the whole room's count over every Daphne process.

Every Daphne process writes its own census into a slot of the shared cache (Redis with REDIS_URL) every
second, and the host page sums the slots that are fresh. Following (following.py) and the host page's
figures (room_stats.py) both read it; neither imports the other.
"""
from __future__ import annotations

import asyncio
import logging
import os
import secrets

from asgiref.sync import sync_to_async
from django.core.cache import cache

log = logging.getLogger(__name__)
CENSUS_SLOTS, CENSUS_EVERY_S, CENSUS_TTL_S = 64, 1.0, 5  # Daphne processes counted, how often, kept how long

_present: set = set()  # this process's article sockets (workshop Followers), for the host page
BEHIND_STEPS = 2  # a follower whose page is more than this many steps behind the broadcast is "behind"
_closed = [0]  # article pages closed since this process started (a reload counts too)


def arrive(follower) -> None:
    """An article socket joined the workshop group."""
    _present.add(follower)


def leave(follower) -> None:
    """An article socket left (closed, or the workshop was off)."""
    if follower in _present:
        _closed[0] += 1
    _present.discard(follower)


def census() -> dict:
    """Connected, following and behind students on this process's sockets, the pages closed here, and the host's
    projector views (counted apart: the room's figures are its students)."""
    students = [f for f in _present if not f.projector]
    following = [f for f in students if f.following]
    return {"connected": len(students), "following": len(following), "projectors": len(_present) - len(students),
            "behind": sum(1 for f in following if f.steps_behind() > BEHIND_STEPS), "closed": _closed[0]}


class Census:
    """This process's slot in the shared cache: claimed once (cache.add is atomic), renewed every second."""

    def __init__(self):
        self.slot: int | None = None
        self.me = f"{os.getpid()}-{secrets.token_hex(3)}"
        self.task: asyncio.Task | None = None

    def ensure_running(self) -> None:
        """Start publishing from this process's event loop (the first workshop socket or host page)."""
        loop = asyncio.get_running_loop()
        if self.task is None or self.task.done() or self.task.get_loop() is not loop:
            self.task = loop.create_task(self._publish_forever())

    async def _publish_forever(self) -> None:
        while True:
            try:
                await sync_to_async(self.publish, thread_sensitive=False)()
            except Exception as exc:  # a Redis hiccup: the room's count is stale for a second
                log.warning("census not published: %s", exc)
            await asyncio.sleep(CENSUS_EVERY_S)

    def publish(self) -> None:
        entry = {"process": self.me, **census()}
        if self.slot is not None and (cache.get(f"census:{self.slot}") or {}).get("process") == self.me:
            cache.set(f"census:{self.slot}", entry, CENSUS_TTL_S)
            return
        self.slot = next((i for i in range(CENSUS_SLOTS) if cache.add(f"census:{i}", entry, CENSUS_TTL_S)), None)


census_publisher = Census()


def room_census() -> dict:
    """Connected and following visitors over every Daphne process whose census is fresh, and this one's."""
    here = census()
    entries = [e for e in cache.get_many([f"census:{i}" for i in range(CENSUS_SLOTS)]).values() if e]
    entries = [e for e in entries if e["process"] != census_publisher.me] + [{"process": census_publisher.me, **here}]
    totals = {key: sum(e.get(key, 0) for e in entries) for key in ("connected", "following", "behind", "closed", "projectors")}
    return {**totals, "processes": len(entries), "this_process": here}

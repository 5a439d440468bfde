"""A live broadcast while no host page is connected: parked for EXPLAINER_HOST_GONE_S, then ended with a note.

One broadcast at a time (the newest wins), so at most one is parked per process; the host's next socket in this
process takes it back (adopt). Followers are told when it will end (`host_away_until` in the broadcast summary).
"""
from __future__ import annotations

import asyncio
import time

from django.conf import settings

from explainer.services.workshop.relay import HOST_LEFT, BroadcastRelay


class Away:
    relay: BroadcastRelay | None = None
    timer: asyncio.Task | None = None


async def park(relay: BroadcastRelay) -> None:
    """Keep `relay`'s broadcast for the room until the host comes back or the time is up (an older parked one ends)."""
    if Away.relay is not None:
        await _end(take())
    relay.host = None
    relay.broadcast.summary["host_away_until"] = round(time.time() + settings.EXPLAINER_HOST_GONE_S)
    await relay.publish(replaces=relay.broadcast.id)
    Away.relay, Away.timer = relay, asyncio.create_task(_end_later(relay))


def take() -> BroadcastRelay | None:
    """The parked broadcast, for the host's socket that has just connected (its timer stops); None if there is none."""
    relay, timer = Away.relay, Away.timer
    Away.relay, Away.timer = None, None
    if timer is not None and timer is not asyncio.current_task():
        timer.cancel()
    if relay is not None:
        relay.broadcast.summary.pop("host_away_until", None)
    return relay


async def end_parked() -> None:
    """End the parked broadcast now, if there is one (a test's cleanup; the server's shutdown)."""
    if (relay := take()) is not None:
        await _end(relay)


async def _end_later(relay: BroadcastRelay) -> None:
    await asyncio.sleep(settings.EXPLAINER_HOST_GONE_S)
    if Away.relay is relay:
        await _end(take())


async def _end(relay: BroadcastRelay, reason: str = HOST_LEFT) -> None:
    """End the broadcast for good; a live one is marked `ended` for the room, with why."""
    live = relay.broadcast.live
    await relay.close()
    if live:
        relay.broadcast.summary.update(state="ended", stop_reason=reason)
        await relay.publish(replaces=relay.broadcast.id)


async def leave(relay: BroadcastRelay) -> None:
    """The host's socket closed: park a live broadcast, or end it now (EXPLAINER_HOST_GONE_S = 0, or nothing live)."""
    if relay.broadcast.live and settings.EXPLAINER_HOST_GONE_S > 0:
        await park(relay)
    else:
        relay.host = None
        await _end(relay)

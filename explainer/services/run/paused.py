"""Paused runs hold no generation slot, only their cache: a learner may step through a long run slowly while
others generate. What paused runs keep is bounded in bytes (EXPLAINER_PAUSED_BYTES): past it, the least
recently active paused run is ended with a message that says why (control.PAUSED_MEMORY)."""
from __future__ import annotations

from django.conf import settings

_paused: dict = {}  # run -> bytes it keeps (cache and kept tensors); the event loop's thread only


def session_bytes(session) -> int:
    """What a paused session keeps: its KV cache and its kept tensors (detail, retemper)."""
    return session.kv()["bytes"] + session.kept.used


def enter(run, nbytes: int) -> list:
    """`run` waits paused keeping `nbytes`: the runs to end (least recently active first) to fit the budget."""
    _paused[run] = nbytes
    budget, total = settings.EXPLAINER_PAUSED_BYTES, sum(_paused.values())
    ended = []
    for victim in sorted(_paused, key=lambda r: r.control.active_at):
        if total <= budget:
            break
        total -= _paused.pop(victim)
        ended.append(victim)
    return ended


def leave(run) -> None:
    _paused.pop(run, None)


def paused_bytes() -> int:
    """Bytes kept by paused runs in this process (the host page, tests)."""
    return sum(_paused.values())

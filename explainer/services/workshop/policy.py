"""Workshop mode's shared rules: the host's pins and limits, kept in the database so every process obeys them.

With workshop mode off (no EXPLAINER_HOST_PASSWORD) nothing here touches the database: runs keep the
server's own limits.
"""
from __future__ import annotations

from channels.db import database_sync_to_async
from django.conf import settings
from django.core.cache import cache

from explainer.models import WorkshopState
from explainer.protocol import ProtocolError, integer
from inference.sampling import ParamError, SamplingParams
from inference.wire.said import said, told

LIVE_STATES = ("starting", "loading", "prefilling", "running", "paused")  # a broadcast in one of these is in progress
NO_LIMITS = {"max_new_tokens": None, "max_sessions": None, "own_runs_allowed": True}
# A broadcast's relay (relay.py) says it is alive in the cache (shared by every process in REDIS_URL mode) every
# RELAY_BEAT_S; a live broadcast whose relay has not for RELAY_GONE_S ran in a process that is gone (a restart):
# no frame of it will ever come, so it reads as ended, and pages say why.
RELAY_BEAT_S, RELAY_GONE_S = 10, 35
SERVER_RESTARTED = "server_restarted"  # the stop_reason of such a broadcast
HOST_SESSION_FLAG = "workshop_host"  # set in the Django session of a browser logged in at /host/


def relay_key(channel: str | None) -> str:
    return f"workshop-relay:{channel}"


def relay_alive(channel: str | None) -> bool:
    try:
        return channel is not None and cache.get(relay_key(channel)) is not None
    except Exception:  # the cache (Redis) unreachable: say nothing ended rather than end a running class
        return True


def enabled() -> bool:
    return bool(settings.EXPLAINER_HOST_PASSWORD)


@database_sync_to_async
def is_host_scope(scope) -> bool:
    """A socket opened by the logged-in host's browser (the host page, or its projector view)."""
    session = scope.get("session")
    return bool(enabled() and session is not None and session.get(HOST_SESSION_FLAG))


def as_snapshot(state: WorkshopState | None) -> dict:
    """What visitors and hosts are told: pins, limits and the broadcast's summary."""
    if state is None:
        return {"pins": {}, "limits": dict(NO_LIMITS), "broadcast": {}}
    limits = {"max_new_tokens": state.max_new_tokens, "max_sessions": state.max_sessions,
              "own_runs_allowed": state.own_runs_allowed}
    broadcast = dict(state.broadcast)
    if is_live(broadcast) and not relay_alive(broadcast.get("host")):
        broadcast.update(state="ended", stop_reason=SERVER_RESTARTED)
    return {"pins": dict(state.pins), "limits": limits, "broadcast": broadcast}


def is_live(broadcast: dict) -> bool:
    return broadcast.get("state") in LIVE_STATES


def read() -> dict:
    return as_snapshot(WorkshopState.load() if enabled() else None)


async def snapshot() -> dict:
    if not enabled():
        return as_snapshot(None)
    return await database_sync_to_async(read)()


# ---- the host's commands ------------------------------------------------------------------------

def validate_pins(params) -> dict:
    """Pins are sampling parameters: each must pass the same checks as a visitor's own."""
    if not isinstance(params, dict):
        raise ProtocolError("wrong_type", said("params must be an object"), "params")
    try:
        SamplingParams.from_dict(params, max_new_tokens_cap=settings.EXPLAINER_MAX_NEW_TOKENS)
    except ParamError as exc:
        raise ProtocolError(getattr(exc, "code", "invalid_value"), told(exc), getattr(exc, "field", "params")) from None
    return params


def validate_limits(message: dict) -> dict:
    """max_new_tokens and max_sessions: a positive integer or null (the server's); own_runs_allowed: bool."""
    limits = {"max_new_tokens": integer(message, "max_new_tokens", 1, settings.EXPLAINER_MAX_NEW_TOKENS, required=False),
              "max_sessions": integer(message, "max_sessions", 1, required=False)}
    allowed = message.get("own_runs_allowed", True)
    if not isinstance(allowed, bool):
        raise ProtocolError("wrong_type", said("%(field)s must be true or false", field="own_runs_allowed"),
                            "own_runs_allowed")
    limits["own_runs_allowed"] = allowed
    return limits


def _update(**fields) -> dict:
    state = WorkshopState.load()
    for name, value in fields.items():
        setattr(state, name, value)
    state.save()
    return as_snapshot(state)


@database_sync_to_async
def save_pins(pins: dict) -> dict:
    return _update(pins=pins)


@database_sync_to_async
def save_limits(limits: dict) -> dict:
    return _update(**limits)


@database_sync_to_async
def reset() -> dict:
    """The host's "reset workshop": no pins, the server's limits, no stored broadcast."""
    return _update(pins={}, broadcast={}, **NO_LIMITS)


def fresh_class() -> dict:
    """`make workshop` starting a new class: what the last class left (its broadcast, pins, limits), cleared.
    Its followers' sockets died with its processes; pages that reconnect are told there is no broadcast."""
    left = as_snapshot(WorkshopState.load())
    _update(pins={}, broadcast={}, **NO_LIMITS)
    return left


@database_sync_to_async
def save_broadcast(summary: dict, replaces: str | None = None) -> dict | None:
    """Store the host's broadcast; with `replaces`, only while that broadcast is still the stored one."""
    state = WorkshopState.load()
    if replaces is not None and state.broadcast.get("id") != replaces:
        return None  # another host has broadcast since: leave theirs alone
    return _update(broadcast=summary)


# ---- every run's start -----------------------------------------------------------------------------

def _apply(fields: dict) -> tuple[dict, int]:
    slots = settings.EXPLAINER_MAX_SESSIONS
    state = WorkshopState.load()
    params = {**fields["params"], **state.pins}
    cap = state.max_new_tokens
    asked = params.get("max_new_tokens", SamplingParams.max_new_tokens)
    if cap is not None and isinstance(asked, int) and not isinstance(asked, bool):
        params["max_new_tokens"] = min(asked, cap)  # a wrong type is left for SamplingParams to name
    if state.max_sessions is not None:
        slots = min(slots, state.max_sessions)
    return {**fields, "params": params}, slots


async def apply_to_start(fields: dict) -> tuple[dict, int]:
    """The start's fields with the host's pins merged and max_new_tokens capped, and the slots allowed."""
    if not enabled():  # no host: no database round trip on every start
        return fields, settings.EXPLAINER_MAX_SESSIONS
    return await database_sync_to_async(_apply)(fields)

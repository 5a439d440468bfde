"""Recorded runs: validate and save a visitor's run; read it back brought up to the current payload schema.

A recording is stored as it was sent, with the version it was recorded in; the wire's ``upgrade``
(inference/wire/upgrades.py) runs whenever a recording is validated or read, so old permalinks keep replaying.
Saving is bounded (docs/deploy.md, "Recorded runs"): per address by a rate, per recording by
EXPLAINER_MAX_RECORDING_BYTES, in all by EXPLAINER_RECORDINGS_MAX_BYTES (new saves are refused once full).
"""
from __future__ import annotations

import datetime
import json
import math

from django.conf import settings
from django.db.models import Sum

from explainer.models import RecordedRun
from explainer.protocol import ProtocolError, TooDeep, json_object
from explainer.services import recording_checks as check
from explainer.services.admission import limits
from explainer.services.recording_checks import RecordingError, upgrade  # noqa: F401 (the API's names)
from explainer.services.run import provenance
from inference.wire.said import said
from inference.wire.schema import SCHEMA_VERSION

REQUIRED = ("messages", "params", "seed", "model_spec", "payloads")
# What a stored row can throw while Django reads it (a JSON text nested past the recursion limit, a date
# that does not parse): a damaged row, answered as `broken_recording`, never a 500.
DAMAGED_ROW = (RecursionError, ValueError, TypeError, AttributeError, OverflowError, KeyError)


def _too_large() -> RecordingError:
    limit = settings.EXPLAINER_MAX_RECORDING_BYTES
    return RecordingError("too_large", said("recordings are limited to %(limit)s bytes", limit=limit), None, status=413)


def admit(address: str | None) -> None:
    """This address may save one more recording now (a token bucket in the shared cache), else `rate_limited` (429)."""
    per_min, burst = settings.EXPLAINER_RECORDING_SAVES_PER_MIN, settings.EXPLAINER_RECORDING_SAVE_BURST
    if per_min <= 0 or address is None:  # 0 turns the rate off; no address (a UNIX socket): nothing to count by
        return
    wait = limits.shared_take(f"recording-saves:{address}", per_min / 60, max(1.0, burst))
    if wait:
        error = RecordingError("rate_limited", said("at most %(per_min)s recordings a minute (bursts of %(burst)s) from "
                                                    "one address; wait %(wait)s s", per_min=f"{per_min:g}",
                                                    burst=f"{burst:g}", wait=math.ceil(wait)), None, status=429)
        error.retry_after_s = math.ceil(wait)
        raise error


def parse_body(body: bytes) -> dict:
    """The request body as a JSON object, within EXPLAINER_MAX_RECORDING_BYTES and MAX_DEPTH."""
    if len(body) > settings.EXPLAINER_MAX_RECORDING_BYTES:
        raise _too_large()
    try:
        data = json_object(body)
    except TooDeep:  # nested past the parser's recursion limit: refused whole, by the same name as below
        raise RecordingError("too_deep", said("objects and arrays may nest at most %(depth)s deep",
                                              depth=check.MAX_DEPTH)) from None
    except ProtocolError as exc:
        raise RecordingError(exc.code, exc.message) from None
    check.depth(data)
    return data


def _room_for(size: int) -> None:
    """The stored recordings stay under EXPLAINER_RECORDINGS_MAX_BYTES: once full, new saves are refused (507)."""
    cap = settings.EXPLAINER_RECORDINGS_MAX_BYTES
    stored = RecordedRun.objects.aggregate(total=Sum("size_bytes"))["total"] or 0
    if cap > 0 and stored + size > cap:
        raise RecordingError("recordings_full", said("this server's space for recordings is full (%(stored)s of %(cap)s "
                                                     "bytes used); nothing was saved: download the run instead, or ask "
                                                     "its host", stored=stored, cap=cap), None, status=507)


def save_run(data: dict) -> RecordedRun:
    """Validate a recording (see docs/protocol.md, "Recorded runs") and store it; raises RecordingError."""
    if not isinstance(data, dict):
        raise RecordingError("bad_json", said("the body must be a JSON object"))
    check.depth(data)
    if len(json.dumps(data, separators=(",", ":")).encode()) > settings.EXPLAINER_MAX_RECORDING_BYTES:
        raise _too_large()
    for name in REQUIRED:
        if name not in data:
            raise RecordingError("missing_field", said("%(name)s is required", name=name), name)
    messages, params = check.messages(data["messages"]), check.params(data["params"])
    seed, spec = check.seed(data["seed"]), check.model_spec(data["model_spec"])
    payloads, version = check.payloads(data["payloads"])
    signature = provenance.produced_here(payloads)
    if signature and (same := RecordedRun.objects.filter(signature=signature).first()):
        return same  # this server's run, saved before: one permalink, not a second copy
    size = len(json.dumps([messages, params, payloads], separators=(",", ":")).encode())
    _room_for(size)
    return RecordedRun.objects.create(model_spec=spec, messages=messages, params=params, seed=seed,
                                      schema_version=version, payloads=payloads, size_bytes=size, signature=signature)


def load(run_id: str) -> RecordedRun | None:
    """The stored run, or None; a row Django cannot even read is `broken_recording` (422)."""
    try:
        return RecordedRun.find(run_id)
    except DAMAGED_ROW as exc:
        raise RecordingError("broken_recording", said("this recording cannot be read: its stored row is damaged "
                                                      "(%(exception)s)", exception=type(exc).__name__), None,
                             status=422) from None


def replayable_payloads(run: RecordedRun) -> list[dict]:
    """The stored payloads upgraded and checked as on saving; one stored before that check, or damaged since,
    is refused as `broken_recording` (422) instead of reaching a page or the API as it is."""
    try:
        if not isinstance(run.created_at, datetime.datetime):
            raise RecordingError("invalid_value", said("created_at is not a date"), "created_at")
        check.depth({"messages": run.messages, "params": run.params, "payloads": run.payloads})
        check.payloads(run.payloads)
        return upgrade(run.payloads, run.schema_version)
    except RecordingError as exc:
        raise RecordingError("broken_recording", check.bounded(said("this recording cannot be replayed: %(problem)s",
                                                                    problem=exc.message)), exc.field, status=422) from None


def verified(run: RecordedRun) -> bool:
    """Recorded on this server: its stored signature matches its stored payloads (explainer/services/run/provenance.py)."""
    return provenance.verified(run.payloads, run.signature)


def as_json(run: RecordedRun) -> dict:
    """The recording as the API returns it: payloads upgraded to the current schema (RecordingError if broken)."""
    payloads = replayable_payloads(run)
    return {"id": run.id, "url": f"/runs/{run.id}", "created_at": run.created_at.isoformat(),
            "recorded_on_this_server": verified(run),
            "model_spec": run.model_spec, "messages": run.messages, "params": run.params, "seed": run.seed,
            "schema_version": SCHEMA_VERSION, "recorded_schema_version": run.schema_version,
            "payloads": payloads}

"""Recorded runs: validate and save a visitor's run; read it back brought up to the current payload schema.

A recording is stored as it was sent, with the version it was recorded in; the wire's ``upgrade``
(inference/wire/upgrades.py) runs whenever a recording is validated or read, so old permalinks keep replaying.
"""
from __future__ import annotations

import json

from django.conf import settings

from explainer.models import RecordedRun
from explainer.protocol import ProtocolError, json_object
from inference.wire.schema import SCHEMA, SCHEMA_VERSION, SchemaError
from inference.wire.upgrades import UpgradeError, upgrade as wire_upgrade
from inference.wire.validation import check_recorded_payload


class RecordingError(ValueError):
    """A recording the server refuses; becomes {"error": {code, message, field}} with status 400 (or 413)."""

    def __init__(self, code: str, message: str, field: str | None = None, status: int = 400):
        super().__init__(message)
        self.code, self.message, self.field, self.status = code, message, field, status

    def as_dict(self) -> dict:
        return {"error": {"code": self.code, "message": self.message, "field": self.field}}


def upgrade(payloads: list[dict], from_version: int) -> list[dict]:
    """Copies of ``payloads`` brought up to SCHEMA_VERSION; a version the wire cannot upgrade is a RecordingError."""
    try:
        return wire_upgrade(payloads, from_version)
    except UpgradeError as exc:
        raise RecordingError(exc.code, exc.message, "schema_version") from None


# ---- validation and storage ---------------------------------------------------------------------

def _messages(value) -> list[dict]:
    if not isinstance(value, list) or not value:
        raise RecordingError("wrong_type", "messages must be a non-empty list of {role, content}", "messages")
    for n, m in enumerate(value):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise RecordingError("wrong_type", "each message needs a string role and content", f"messages[{n}]")
    return [{"role": m["role"], "content": m["content"]} for m in value]


def _schema_version(payloads: list[dict]) -> int:
    versions = {p.get("schema_version") for p in payloads if "schema_version" in p}
    if len(versions) != 1:
        raise RecordingError("invalid_value", "every payload must carry the same schema_version", "payloads")
    version = versions.pop()
    if isinstance(version, bool) or not isinstance(version, int):
        raise RecordingError("wrong_type", "schema_version must be an integer", "payloads")
    return version


def _payloads(value) -> tuple[list[dict], int]:
    if not isinstance(value, list) or not value:
        raise RecordingError("wrong_type", "payloads must be a non-empty list of payload objects", "payloads")
    for n, p in enumerate(value):
        if not isinstance(p, dict):
            raise RecordingError("wrong_type", "each payload must be an object", f"payloads[{n}]")
        if p.get("type") not in SCHEMA:
            raise RecordingError("unknown_type", f"unknown payload type {str(p.get('type'))[:40]!r}", f"payloads[{n}].type")
    version = _schema_version(value)
    current = upgrade(value, version)
    kinds = [p["type"] for p in current]
    if kinds[0] != "session" or "prefill" not in kinds:
        raise RecordingError("invalid_value", "a recording starts with a session payload and has a prefill", "payloads")
    for n, p in enumerate(current):  # every payload, field by field and nested (inference/wire/validation.py)
        try:
            check_recorded_payload(p)
        except SchemaError as exc:
            raise RecordingError("invalid_payload", str(exc)[:300], f"payloads[{n}]") from None
    return value, version


def parse_body(body: bytes) -> dict:
    """The request body as a JSON object, within EXPLAINER_MAX_RECORDING_BYTES."""
    limit = settings.EXPLAINER_MAX_RECORDING_BYTES
    if len(body) > limit:
        raise RecordingError("too_large", f"recordings are limited to {limit} bytes", None, status=413)
    try:
        return json_object(body)
    except ProtocolError as exc:
        raise RecordingError(exc.code, exc.message) from None


def save_run(data: dict) -> RecordedRun:
    """Validate a recording (see docs/protocol.md, "Recorded runs") and store it; raises RecordingError."""
    if not isinstance(data, dict):
        raise RecordingError("bad_json", "the body must be a JSON object")
    limit = settings.EXPLAINER_MAX_RECORDING_BYTES
    if len(json.dumps(data, separators=(",", ":")).encode()) > limit:
        raise RecordingError("too_large", f"recordings are limited to {limit} bytes", None, status=413)
    for name in ("messages", "params", "seed", "model_spec", "payloads"):
        if name not in data:
            raise RecordingError("missing_field", f"{name} is required", name)
    messages = _messages(data["messages"])
    if not isinstance(data["params"], dict):
        raise RecordingError("wrong_type", "params must be an object", "params")
    seed = data["seed"]
    if isinstance(seed, bool) or not isinstance(seed, int) or not -2**63 <= seed < 2**63:
        raise RecordingError("wrong_type", "seed must be an integer", "seed")
    spec = data["model_spec"]
    if not isinstance(spec, str) or not spec.strip() or len(spec) > 300:
        raise RecordingError("wrong_type", "model_spec must be a non-empty string (at most 300 characters)", "model_spec")
    payloads, version = _payloads(data["payloads"])
    return RecordedRun.objects.create(model_spec=spec, messages=messages, params=data["params"], seed=seed,
                                      schema_version=version, payloads=payloads)


def replayable_payloads(run: RecordedRun) -> list[dict]:
    """The stored payloads upgraded and checked as on saving; one stored before that check, or damaged since,
    is refused as `broken_recording` (422) instead of reaching a page or the API as it is."""
    try:
        _payloads(run.payloads)
        return upgrade(run.payloads, run.schema_version)
    except RecordingError as exc:
        raise RecordingError("broken_recording", f"this recording cannot be replayed: {exc.message}"[:300], exc.field,
                             status=422) from None


def as_json(run: RecordedRun) -> dict:
    """The recording as the API returns it: payloads upgraded to the current schema (RecordingError if broken)."""
    payloads = replayable_payloads(run)
    return {"id": run.id, "url": f"/runs/{run.id}", "created_at": run.created_at.isoformat(),
            "model_spec": run.model_spec, "messages": run.messages, "params": run.params, "seed": run.seed,
            "schema_version": SCHEMA_VERSION, "recorded_schema_version": run.schema_version,
            "payloads": payloads}

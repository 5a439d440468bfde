"""Old recordings brought up to the current payload schema.

Each payload carries its ``schema_version``. ``UPGRADES[v]`` turns version v into v + 1: one function per
renamed or removed field. A field added with a default (a third item in its SCHEMA rule) needs no version
and no function: ``with_defaults`` fills it into payloads recorded before it existed.
"""
from __future__ import annotations

import copy

from .said import said
from .schema import SCHEMA, SCHEMA_VERSION


class UpgradeError(ValueError):
    """A recording whose version cannot be brought up to this server's schema."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message



def _v0_to_v1(payload: dict) -> dict:
    """Version 0 had no ``kv.stored_tokens``: without a sliding window the cache holds every position it saw."""
    kv = payload.get("kv")
    if isinstance(kv, dict) and "stored_tokens" not in kv and "seq_len" in kv:
        kv["stored_tokens"] = kv["seq_len"]
    return payload


def _v1_to_v2(payload: dict) -> dict:
    """Version 1 came before batched decoding: every step ran in a forward pass of its own."""
    if payload.get("type") == "step" and "batch_size" not in payload:
        payload["batch_size"] = 1
    return payload


def _v2_to_v3(payload: dict) -> dict:
    """Version 2 came before batched prefills: every prefill ran in a forward pass of its own."""
    if payload.get("type") == "prefill" and "batch_size" not in payload:
        payload["batch_size"] = 1
    return payload


UPGRADES = {0: _v0_to_v1, 1: _v1_to_v2, 2: _v2_to_v3}  # from version -> function(payload) giving version + 1; one per schema change


def upgrade(payloads: list[dict], from_version: int) -> list[dict]:
    """Copies of ``payloads`` brought from ``from_version`` to SCHEMA_VERSION (identity when already current)."""
    if isinstance(from_version, bool) or not isinstance(from_version, int) or from_version < 0:
        raise UpgradeError("wrong_type", said("schema_version must be a non-negative integer"))
    if from_version > SCHEMA_VERSION:
        raise UpgradeError("unsupported_schema", said("schema_version %(version)s is newer than this server's %(current)s",
                                                      version=from_version, current=SCHEMA_VERSION))
    out = payloads if from_version == SCHEMA_VERSION else copy.deepcopy(payloads)
    for version in range(from_version, SCHEMA_VERSION):
        step = UPGRADES.get(version)
        if step is None:
            raise UpgradeError("unsupported_schema", said("no upgrade from schema_version %(version)s", version=version))
        out = [step(p) for p in out]
        for p in out:
            if "schema_version" in p:
                p["schema_version"] = version + 1
    if not any(_defaults_missing(p) for p in out):
        return out  # current and complete: the payloads themselves
    return [with_defaults(copy.deepcopy(p)) if _defaults_missing(p) else p for p in out]


def with_defaults(payload: dict) -> dict:
    """The payload with every field the schema gives a default (rule[2]) filled in where it lacks it."""
    _defaults_missing(payload, fill=True)
    return payload


def _defaults_missing(payload: dict, spec: dict | None = None, fill: bool = False) -> bool:
    """Whether a field with a default is absent (nested objects included); `fill`: put the default there."""
    spec = SCHEMA.get(payload.get("type"), {}) if spec is None else spec
    missing = False
    for name, rule in spec.items():
        if isinstance(rule, dict):
            if isinstance(payload.get(name), dict):
                missing |= _defaults_missing(payload[name], rule, fill)
        elif len(rule) > 2 and name not in payload:
            missing = True
            if fill:
                payload[name] = copy.deepcopy(rule[2])
    return missing

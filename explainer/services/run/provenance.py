"""Which recordings this server produced (docs/protocol.md, "Recorded runs").

While a live run sends its payloads, `RunDigest` hashes the ones the page records (static/js/save-run.js
keeps session, prefill, step, done, check and detail, in order, a new session starting over). From the run's `done`
on, every digest it reaches is remembered in the shared cache for KEPT_S. A recording posted later whose
payloads hash to a remembered digest was produced here: it is stored with an HMAC of that digest under
settings.SECRET_KEY. Anything else (a changed figure, a forged model name) hashes to a digest the server
never sent, so it is stored unsigned: "posted through the API, not verified".
"""
from __future__ import annotations

import hashlib
import json
import logging

from django.core.cache import cache
from django.utils.crypto import constant_time_compare, salted_hmac

from inference.wire.framing import Encoded
from inference.wire.packing import PlainList

log = logging.getLogger(__name__)
# What the page keeps of a run (save-run.js); in compare mode run B's payloads (`run: "b"`) and the `compare`s too
RECORDED = ("session", "prefill", "step", "done", "check", "detail", "compare")
KEPT_S = 24 * 3600  # how long after a run it can be saved as "recorded on this server"
SALT = "hit-enter.recorded-run"


_LEAVES = frozenset({str, int, bool, type(None), PlainList})  # as they are (PlainList: so already, by its builder)


def _plain(value):
    """JSON as a browser re-encodes it: 2.0 reads back as 2, so integral floats become ints. Leaves are passed over
    without a call (a step has ~700 values: this walk was half of writing its canonical text)."""
    kind = type(value)
    if kind is float:
        return int(value) if value.is_integer() else value
    if kind in _LEAVES:
        return value
    if isinstance(value, dict):
        return {k: v if type(v) in _LEAVES else _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [v if type(v) in _LEAVES else _plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():  # a float's subclass (numpy's)
        return int(value)
    return value


def canonical_text(payload: dict) -> str:
    """A payload as the digest reads it: sorted keys, no spaces, ASCII, integral floats as ints (strict JSON: a
    ValueError on NaN or infinity). A recorded message goes out as this text too (RunDigest.saw)."""
    return json.dumps(_plain(payload), sort_keys=True, separators=(",", ":"), allow_nan=False)


class Canonical(Encoded):
    """A message with its canonical text, made where the message was made (a decode tick's steps: on the device's
    thread, inference/scheduler.py encoded_tick); RunDigest.saw hashes that text and the socket sends it."""
    __slots__ = ()


def with_canonical_text(message: dict) -> dict:
    """The message as Canonical; as it is when it is not strict JSON (RunDigest.saw and the send path refuse it)."""
    try:
        return Canonical(message, canonical_text(message))
    except ValueError:
        return message


def canonical(payload: dict) -> bytes:
    """One payload's bytes for the digest: its canonical text and a newline."""
    return canonical_text(payload).encode() + b"\n"


def digest(payloads: list[dict]) -> str:
    """SHA-256 over the payloads' canonical bytes, in order."""
    h = hashlib.sha256()
    for payload in payloads:
        h.update(canonical(payload))
    return h.hexdigest()


def signature(payloads_digest: str) -> str:
    """HMAC-SHA256 of a digest under SECRET_KEY: stored with a recording this server produced."""
    return salted_hmac(SALT, payloads_digest, algorithm="sha256").hexdigest()


def _key(payloads_digest: str) -> str:
    return f"recorded-run:{payloads_digest}"


def produced_here(payloads: list[dict]) -> str:
    """The signature to store when this server sent exactly these payloads in a run, else ""."""
    found = digest(payloads)
    return signature(found) if cache.get(_key(found)) else ""


def verified(payloads: list[dict], stored_signature: str) -> bool:
    """The stored signature matches the stored payloads (a row changed in the database no longer does)."""
    return bool(stored_signature) and constant_time_compare(signature(digest(payloads)), stored_signature)


class RunDigest:
    """The running digest of one socket's recorded payloads (VisitorRun.send calls saw() for each message)."""

    def __init__(self):
        self.hash = None
        self.done = False

    def saw(self, message: dict) -> str | None:
        """Hash a message the page records; its canonical text, which the socket sends as the message's frame (one
        encoding for both: a class's steps are ~40 KB each), or None when the recording does not take it."""
        kind = message.get("type")
        if kind not in RECORDED or (kind != "session" and self.hash is None):
            return None
        if kind == "session" and message.get("run") is None:  # run B's session is part of run A's recording
            self.hash, self.done = hashlib.sha256(), False
        try:
            text = message.text if type(message) is Canonical else canonical_text(message)
        except ValueError:  # not strict JSON: the send path refuses it, the page never records it
            self.hash = None
            return None
        self.hash.update(text.encode() + b"\n")
        self.done = self.done or kind == "done"
        if self.done:  # the page may save from here on (the checks follow the done)
            try:
                cache.set(_key(self.hash.hexdigest()), True, KEPT_S)
            except Exception:  # the cache down: the run goes on, its recording will read "not verified"
                log.warning("could not remember a run's digest", exc_info=True)
        return text

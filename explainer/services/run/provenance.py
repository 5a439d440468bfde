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
import logging

from django.core.cache import cache
from django.utils.crypto import constant_time_compare, salted_hmac

from inference.wire.canonical import Canonical, canonical_text

log = logging.getLogger(__name__)
# What the page keeps of a run (save-run.js); in compare mode run B's payloads (`run: "b"`) and the `compare`s too
RECORDED = ("session", "prefill", "step", "done", "check", "detail", "compare")
KEPT_S = 24 * 3600  # how long after a run it can be saved as "recorded on this server"
SALT = "hit-enter.recorded-run"


def with_canonical_text(message: dict) -> dict:
    """The message as Canonical (as it is when it is one already); as it is when it is not strict JSON (RunDigest.saw
    and the send path refuse it)."""
    if type(message) is Canonical:
        return message
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

"""Wrong-password backoff per client address, kept in the shared cache (Redis across processes).

Used by the host's login (explainer/host.py) and the admin's (explainer/admin.py): MAX_FAILURES wrong
passwords from one address, then a lockout of LOCKOUT_S that doubles with each further failure, up to
MAX_LOCKOUT_S. A guesser elsewhere never locks anyone else out.
"""
from __future__ import annotations

import time

from django.core.cache import cache

from explainer.services.admission.limits import request_address

MAX_FAILURES, LOCKOUT_S = 5, 60  # wrong passwords per client address before a short lockout
MAX_LOCKOUT_S, FAILURES_KEPT_S = 600, 3600  # each failure past MAX_FAILURES doubles the wait, up to 10 min


def locked_for(failures: dict) -> float:
    """Seconds this address must still wait: none before MAX_FAILURES, then LOCKOUT_S doubling per failure."""
    if failures["n"] < MAX_FAILURES:
        return 0.0
    wait = min(MAX_LOCKOUT_S, LOCKOUT_S * 2 ** (failures["n"] - MAX_FAILURES))
    return max(0.0, failures["last"] + wait - time.time())


class Lockout:
    """One login's failures per client address, under the cache key prefix ``name``."""

    def __init__(self, name: str):
        self.name = name

    def key(self, request) -> str:
        return f"{self.name}-login-failures:{request_address(request) or ''}"

    def wait(self, request) -> float:
        """Seconds before this address may try again (0: now)."""
        return locked_for(cache.get(self.key(request)) or {"n": 0, "last": 0.0})

    def failed(self, request) -> None:
        key = self.key(request)
        failures = cache.get(key) or {"n": 0, "last": 0.0}
        cache.set(key, {"n": failures["n"] + 1, "last": time.time()}, FAILURES_KEPT_S)

    def succeeded(self, request) -> None:
        cache.delete(self.key(request))

"""How many visitors may generate at once in this process, in all and per client address. Past the first a
start waits in line (start_queue.py); past the second it is told `busy` at once."""
import threading
from collections import Counter

from django.conf import settings

from explainer.services.admission import start_queue
from inference.wire.said import said


def per_address_limit() -> int:
    """EXPLAINER_MAX_RUNS_PER_ADDRESS; unset means half the slots (at least one); 0 turns the cap off."""
    limit = settings.EXPLAINER_MAX_RUNS_PER_ADDRESS
    return max(1, settings.EXPLAINER_MAX_SESSIONS // 2) if limit is None else limit


class Capacity:
    def __init__(self):
        self._lock = threading.Lock()
        self.active = 0
        self.by_address: Counter = Counter()

    @property
    def limit(self) -> int:
        return settings.EXPLAINER_MAX_SESSIONS

    def address_refusal(self, address: str | None) -> str | None:
        """Why this address may take no slot now (its own cap), whatever the line: `busy`, never a wait."""
        per_address = per_address_limit()
        if address is not None and per_address > 0 and self.by_address[address] >= per_address:
            return said("at most %(limit)s runs generate at once from one address", limit=per_address)
        return None

    def try_acquire(self, limit: int | None = None, address: str | None = None) -> bool:
        """Take a slot if fewer than the limit are taken (a workshop host may set a lower one)."""
        return self.refusal(limit, address) is None

    def refusal(self, limit: int | None = None, address: str | None = None) -> str | None:
        """Take a slot and return None, or say why not (the `busy` reason). An address of None is not counted."""
        limit = self.limit if limit is None else min(limit, self.limit)
        with self._lock:
            if self.active >= limit:
                return said("%(limit)s visitors are generating already", limit=limit)
            if (refused := self.address_refusal(address)) is not None:
                return refused
            self.active += 1
            if address is not None:
                self.by_address[address] += 1
            return None

    def release(self, address: str | None = None, held_s: float | None = None) -> None:
        """Give a slot back (`held_s`: how long the run held it, for the line's estimate); the line moves."""
        with self._lock:
            self.active = max(0, self.active - 1)
            if address is not None and self.by_address[address] > 0:
                self.by_address[address] -= 1
                if not self.by_address[address]:
                    del self.by_address[address]
        start_queue.slot_came_back(held_s)


generating = Capacity()

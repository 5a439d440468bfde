"""How many visitors may generate at once in this process, in all and per client address; past that
they are told `busy` at once."""
import threading
from collections import Counter

from django.conf import settings


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

    def try_acquire(self, limit: int | None = None, address: str | None = None) -> bool:
        """Take a slot if fewer than the limit are taken (a workshop host may set a lower one)."""
        return self.refusal(limit, address) is None

    def refusal(self, limit: int | None = None, address: str | None = None) -> str | None:
        """Take a slot and return None, or say why not (the `busy` reason). An address of None is not counted."""
        limit = self.limit if limit is None else min(limit, self.limit)
        per_address = per_address_limit()
        with self._lock:
            if self.active >= limit:
                return f"{limit} visitors are generating already"
            if address is not None and per_address > 0 and self.by_address[address] >= per_address:
                return f"at most {per_address} runs generate at once from one address"
            self.active += 1
            if address is not None:
                self.by_address[address] += 1
            return None

    def release(self, address: str | None = None) -> None:
        with self._lock:
            self.active = max(0, self.active - 1)
            if address is not None and self.by_address[address] > 0:
                self.by_address[address] -= 1
                if not self.by_address[address]:
                    del self.by_address[address]


generating = Capacity()

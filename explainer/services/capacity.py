"""How many visitors may generate at once in this process; past that they are told `busy` at once."""
import threading

from django.conf import settings


class Capacity:
    def __init__(self):
        self._lock = threading.Lock()
        self.active = 0

    @property
    def limit(self) -> int:
        return settings.EXPLAINER_MAX_SESSIONS

    def try_acquire(self, limit: int | None = None) -> bool:
        """Take a slot if fewer than the limit are taken (a workshop host may set a lower one)."""
        limit = self.limit if limit is None else min(limit, self.limit)
        with self._lock:
            if self.active >= limit:
                return False
            self.active += 1
            return True

    def release(self) -> None:
        with self._lock:
            self.active = max(0, self.active - 1)


generating = Capacity()

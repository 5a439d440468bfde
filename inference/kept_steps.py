"""What a session keeps for detail-on-demand and retemper, within a byte budget (oldest go first)."""
from __future__ import annotations

from collections import OrderedDict

import torch

from .wire.said import said

DEFAULT_BUDGET_BYTES = 32 * 1024 * 1024


class NotKept(LookupError):
    """The step's data was evicted (or never kept) under the session's memory budget."""


class KeptSteps:
    def __init__(self, budget_bytes: int = DEFAULT_BUDGET_BYTES):
        self.budget = budget_bytes
        self.used = 0
        self._steps: OrderedDict[int, dict[str, torch.Tensor]] = OrderedDict()

    def put(self, step: int, **tensors: torch.Tensor) -> None:
        self.drop(step)
        entry = {name: t.detach() for name, t in tensors.items() if t is not None}
        size = sum(t.nbytes for t in entry.values())
        if size > self.budget:
            return  # too large to keep at all; detail for it will say so
        self._steps[step] = entry
        self.used += size
        while self.used > self.budget:
            _, evicted = self._steps.popitem(last=False)
            self.used -= sum(t.nbytes for t in evicted.values())

    def get(self, step: int, name: str) -> torch.Tensor:
        try:
            return self._steps[step][name]
        except KeyError:
            raise NotKept(said("%(name)s for step %(step)s is not kept (memory budget %(budget)s bytes)",
                               name=name, step=step, budget=self.budget)) from None

    def drop(self, step: int) -> None:
        entry = self._steps.pop(step, None)
        if entry:
            self.used -= sum(t.nbytes for t in entry.values())

    def drop_from(self, step: int) -> None:
        for s in [s for s in self._steps if s >= step]:
            self.drop(s)

    def clear(self) -> None:
        self._steps.clear()
        self.used = 0

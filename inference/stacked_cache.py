"""A decode tick's stacked cache: every session's cache left-padded into one batch, kept while the same
sessions step again.

Stacking the caches into a new batch and copying each row back out copies every cache twice per tick:
about a fifth of a 32-visitor SmolLM2 tick at 50 tokens, and more as the context grows. While the same
sessions step again, the last tick's stack is fed as it is and each session's cache is a view of its row
(the model appends to the stack; nothing writes into a row in place). A session that leaves the stack
(paused, finished, stopped, forked) gets its own copy when the stack is replaced or when it finishes, so
nobody keeps a whole batch's memory alive.
"""
from __future__ import annotations

from transformers import DynamicCache

from .forward import cache_holding


def stacked_cache(sessions, lengths: list[int], longest: int) -> DynamicCache:
    """Every session's cache, left-padded with zeros to the longest: (batch, kv_heads, longest, head_dim) per layer."""
    def stacked(tensors):
        out = tensors[0].new_zeros(len(tensors), tensors[0].shape[1], longest, tensors[0].shape[3])
        for i, t in enumerate(tensors):
            out[i, :, longest - lengths[i]:] = t[0]
        return out
    return cache_holding((stacked([s.cache.layers[n].keys for s in sessions]), stacked([s.cache.layers[n].values for s in sessions]))
                         for n in range(len(sessions[0].cache.layers)))


def row_view(batched: DynamicCache, row: int, pad: int) -> DynamicCache:
    """Row `row` of the batch's cache without its left padding, as views (no copy)."""
    return cache_holding((layer.keys[row:row + 1, :, pad:], layer.values[row:row + 1, :, pad:]) for layer in batched.layers)


def own_copy(cache: DynamicCache) -> DynamicCache:
    return cache_holding((layer.keys.clone(), layer.values.clone()) for layer in cache.layers)


def storage_of(cache) -> int | None:
    """Where the cache's first keys live (views of one stack share it)."""
    layers = getattr(cache, "layers", None)
    keys = getattr(layers[0], "keys", None) if layers else None
    return keys.untyped_storage().data_ptr() if keys is not None and keys.numel() else None


class KeptStack:
    """The last tick's stack, its sessions in row order, and the layer-0 keys view each was given."""

    def __init__(self):
        self.cache: DynamicCache | None = None
        self.order: list = []
        self.given: list = []

    def holds_all(self, sessions) -> bool:
        """The same sessions as the last tick, each cache still exactly the row it was given."""
        return (self.cache is not None and len(sessions) == len(self.order)
                and {id(s) for s in sessions} == {id(s) for s in self.order}
                and all(s.cache is not None and s.cache.layers[0].keys is g for s, g in zip(self.order, self.given)))

    def keep(self, order: list, cache: DynamicCache) -> None:
        """After a pass: `order`'s caches are views of `cache`; whoever still shares the old stack gets a copy."""
        if cache is not self.cache:
            staying = {id(s) for s in order}
            self.let_go([s for s in self.order if id(s) not in staying])
        self.cache, self.order = cache, list(order)
        self.given = [s.cache.layers[0].keys for s in order]

    def let_go(self, sessions) -> None:
        """These sessions leave the stack: each one still sharing its memory gets its own copy."""
        shared = storage_of(self.cache)
        for session in sessions:
            if shared is not None and storage_of(session.cache) == shared:
                session.cache = own_copy(session.cache)

    def forget(self) -> None:
        """A pass over the kept stack failed part way (the model may have appended to it): restack next time."""
        self.cache, self.order, self.given = None, [], []

"""What the prefix cache saved on one prompt, measured: its prefill with the first `cached` tokens taken from a
prefix cache, and without one, on the loaded model (the `measure what=prefix` reply).

The server's own cache is not touched (its figures stay the visitors'): each timed run gets a private cache
holding exactly the prefix that the visitor's prefill found, so "with" is the visitor's case, not a rerun of a
prompt that is by now cached to its last token.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import replace

from .engine import GenerationSession
from .forward import synchronize
from .prefix_cache import PrefixCache
from .prompting import build_prompt
from .sampling import SamplingParams
from .wire.said import said

REPEATS = 3
PRIVATE_BYTES = 1 << 40  # a private cache for one prompt: bounded by the prompt, not by this


def timed_prefill(loaded, ids: list[int]) -> tuple[float, float, int]:
    """(the prefill call's ms, its forward pass's ms, its cached_tokens) for ids on `loaded`."""
    session = GenerationSession(loaded, build_prompt(loaded.tokenizer, input_ids=ids), SamplingParams(max_new_tokens=1, temperature=0.0))
    try:
        t0 = time.perf_counter()
        payload = session.prefill()
        synchronize(loaded.model.device)
        return (time.perf_counter() - t0) * 1e3, payload["timing"]["forward_ms"], session.cached_tokens
    finally:
        session.close()


def prefix_saving(loaded, ids: list[int], cached: int, repeats: int = REPEATS, progress=None) -> dict:
    """Medians over `repeats` of the prefill of `ids` with its first `cached` tokens from a prefix cache and
    without; each "with" run's cache was filled by an untimed prefill of exactly those tokens."""
    report = progress or (lambda done, total, label: None)
    plain = replace(loaded, prefix_cache=None)
    cached = max(0, min(cached, len(ids) - 1))
    timed_prefill(plain, ids)  # warm-up: first calls pay one-off costs
    without, with_cache, found = [], [], 0
    for r in range(repeats):
        report(2 * r, 2 * repeats, said("your prompt's prefill without the prefix cache (%(run)s of %(runs)s)",
                                        run=r + 1, runs=repeats))
        without.append(timed_prefill(plain, ids))
        report(2 * r + 1, 2 * repeats, said("your prompt's prefill from its first %(cached)s tokens in the cache "
                                            "(%(run)s of %(runs)s)", cached=cached, run=r + 1, runs=repeats))
        private = replace(loaded, prefix_cache=PrefixCache(PRIVATE_BYTES if cached else 0))
        if cached:
            timed_prefill(private, ids[:cached])  # untimed here: it leaves exactly ids[:cached] in the private cache
        call_ms, forward_ms, found = timed_prefill(private, ids)
        with_cache.append((call_ms, forward_ms, found))
    median = lambda rows, k: round(statistics.median(row[k] for row in rows), 3)  # noqa: E731
    saved = median(without, 0) - median(with_cache, 0)
    return {"prompt_tokens": len(ids), "cached_tokens": found, "repeats": repeats,
            "without_ms": median(without, 0), "with_ms": median(with_cache, 0),
            "without_forward_ms": median(without, 1), "with_forward_ms": median(with_cache, 1),
            "saved_ms": round(saved, 3), "speedup": round(median(without, 0) / median(with_cache, 0), 3) if median(with_cache, 0) else None}

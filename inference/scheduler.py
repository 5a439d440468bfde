"""Continuous batching across visitor sessions: one decode forward pass for every session waiting for a step.

Each tick the scheduler takes the sessions that asked for a step (up to max_batch, oldest first), runs
their decode forwards as ONE batched pass, and hands each session its own row: logits, attention rows
over its own cache, hidden states; each then samples from its row with its own parameters and seed, as a
lone step would. Sessions join and leave between ticks; a prefill is its own call on the device thread, so
it runs between two ticks. No Django here: the caller gives the device runner and the limits.

Caches of different lengths are stacked with left padding and an attention mask (transformers'
continuous-batching PagedAttentionCache does not hand back per-session eager attention weights, which
every step payload carries). Only plain DynamicLayer caches batch; sliding-window or recurrent caches,
and models without a cache, step alone.
"""
from __future__ import annotations

import asyncio
import time
from functools import partial

import torch
from transformers import DynamicCache

from .capture import residual_stream
from .forward import ForwardRow, aligned_attentions, last_rows, one_thread, plain_cache, synchronize


def can_batch(session) -> bool:
    """A decode step (not step 1, which samples from the prefill) on a plain dynamic cache."""
    return session.adapter.has_cache and session.step_index > 0 and not session.finished and plain_cache(session.cache)


def cache_holding(pairs) -> DynamicCache:
    """A DynamicCache of plain layers holding these (keys, values) as they are (its constructor copies them)."""
    pairs = list(pairs)
    cache = DynamicCache(ddp_cache_data=[(None, None)] * len(pairs))  # empty DynamicLayers
    for layer, (keys, values) in zip(cache.layers, pairs):
        layer.lazy_initialization(keys, values)
        layer.keys, layer.values = keys, values
    return cache


def stacked_cache(sessions, lengths: list[int], longest: int) -> DynamicCache:
    """Every session's cache, left-padded with zeros to the longest: (batch, kv_heads, longest, head_dim) per layer."""
    def stacked(tensors):
        out = tensors[0].new_zeros(len(tensors), tensors[0].shape[1], longest, tensors[0].shape[3])
        for i, t in enumerate(tensors):
            out[i, :, longest - lengths[i]:] = t[0]
        return out
    return cache_holding((stacked([s.cache.layers[n].keys for s in sessions]), stacked([s.cache.layers[n].values for s in sessions]))
                         for n in range(len(sessions[0].cache.layers)))


def own_cache(batched: DynamicCache, row: int, pad: int) -> DynamicCache:
    """Row `row` of the batch's updated cache, without its left padding (a copy: the batch's tensors go)."""
    return cache_holding((layer.keys[row:row + 1, :, pad:].clone(), layer.values[row:row + 1, :, pad:].clone())
                         for layer in batched.layers)


@torch.no_grad()
def batched_decode(sessions) -> list[ForwardRow]:
    """One forward pass feeding each session its last token on top of its own cache; one row each."""
    model, adapter = sessions[0].model, sessions[0].adapter
    lengths = [s.cache.get_seq_length() for s in sessions]
    longest, batch = max(lengths), len(sessions)
    mask = torch.zeros(batch, longest + 1, dtype=torch.long, device=model.device)  # (batch, keys + the new one)
    for i, length in enumerate(lengths):
        mask[i, longest - length:] = 1
    input_ids = torch.tensor([[s.ids[-1]] for s in sessions], device=model.device)  # (batch, 1)
    positions = torch.tensor([[length] for length in lengths], device=model.device)  # each its own position
    with one_thread():  # small per-row copies
        cache = stacked_cache(sessions, lengths, longest)
    with residual_stream(model, adapter) as residuals:
        t0 = time.perf_counter()
        out = model(input_ids=input_ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True,
                    output_attentions=True, logits_to_keep=1)
        synchronize(model.device)
        t1 = time.perf_counter()
    with one_thread():  # small per-row copies
        return own_rows(sessions, out, residuals, lengths, (t1 - t0) * 1e3, t1)


def own_rows(sessions, out, residuals, lengths: list[int], forward_ms: float, ended_at: float) -> list[ForwardRow]:
    """Each session's row of the batched pass, and its own cache back (without the left padding)."""
    longest, batch = max(lengths), len(sessions)
    rows, caches = [], []
    for i, session in enumerate(sessions):
        pad = longest - lengths[i]
        caches.append(own_cache(out.cache, i, pad))
        returned = [a[i:i + 1, :, :, pad:] for a in (getattr(out, "attentions", None) or ())]
        attentions = aligned_attentions(returned, 1, len(session.ids), session.description.layers)
        rows.append(ForwardRow(logits=out.logits[i, -1].float(), hidden=torch.stack([r[i] for r in residuals]),
                               last_attn=last_rows(attentions, 1), forward_ms=forward_ms, ended_at=ended_at,
                               attentions=attentions, batch_size=batch))
    for session, own in zip(sessions, caches):  # only once every row is out: a failure above changes no session
        session.cache = own
    return rows


def step_all(sessions) -> list:
    """One tick on the device thread: the batched forward, then each session's own step (a payload, or the
    exception that session raised: one visitor's failure is not another's)."""
    ready = [s for s in sessions if can_batch(s)]
    forwards: dict[int, ForwardRow] = {}
    if len(ready) > 1:
        try:
            forwards = {id(s): f for s, f in zip(ready, batched_decode(ready))}
        except Exception:  # noqa: BLE001 - e.g. out of memory for the stacked cache: each steps alone instead
            forwards = {}
    results = []
    for session in sessions:
        try:
            results.append(session.step(forward=forwards.get(id(session))))
        except Exception as exc:  # noqa: BLE001 - handed to that session's driver
            results.append(exc)
    return results


class StepScheduler:
    """One per device: sessions await step(); ticks run them in batches on the device's thread."""

    def __init__(self, run, max_batch: int, max_wait_s: float):
        self.run = run  # async callable: run(fn) -> fn() on the device's thread
        self.max_batch, self.max_wait_s = max(1, max_batch), max(0.0, max_wait_s)
        self.waiting: list[tuple[object, asyncio.Future]] = []
        self.ticker: asyncio.Task | None = None
        self.ticks = self.stepped = 0  # figures: mean batch size = stepped / ticks
        self.returning: set[int] = set()  # sessions of the last tick that did not finish: they will ask again
        self.asked = asyncio.Event()  # set whenever a session asks for a step

    async def step(self, session) -> dict:
        """This session's next step payload, computed in the next tick."""
        future = asyncio.get_running_loop().create_future()
        self.waiting.append((session, future))
        self.asked.set()
        if self.ticker is None or self.ticker.done():
            self.ticker = asyncio.create_task(self._ticks())
        return await future

    async def _gather(self) -> None:
        """Wait, at most max_wait_s, until every session of the last tick that will ask again has asked (their
        steps are still going out on the event loop): full ticks, so no visitor's step waits a tick behind."""
        deadline = asyncio.get_running_loop().time() + self.max_wait_s
        while len(self.waiting) < self.max_batch and self.returning - {id(s) for s, _ in self.waiting}:
            self.asked.clear()
            try:
                async with asyncio.timeout_at(deadline):
                    await self.asked.wait()
            except TimeoutError:
                return

    async def _ticks(self) -> None:
        while self.waiting:
            await self._gather()
            batch = [(s, f) for s, f in self.waiting[:self.max_batch] if not f.done()]
            del self.waiting[:self.max_batch]
            if not batch:
                continue
            try:
                results = await self.run(partial(step_all, [s for s, _ in batch]))
            except asyncio.CancelledError:
                for _, future in batch + self.waiting:
                    future.cancel()
                raise
            except Exception as exc:  # the tick itself failed: every session in it hears
                results = [exc] * len(batch)
            finally:
                self.ticks, self.stepped = self.ticks + 1, self.stepped + len(batch)
            self.returning = {id(s) for (s, _), r in zip(batch, results) if isinstance(r, dict) and not r.get("stop_reason")}
            for (_, future), result in zip(batch, results):
                if future.done():
                    continue
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)

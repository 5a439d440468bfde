"""Continuous batching across visitor sessions: one decode forward pass for every session waiting for a step.

Each tick the scheduler takes the sessions that asked for a step (up to max_batch, oldest first), runs
their decode forwards as ONE batched pass, and hands each session its own row: logits, attention rows
over its own cache, hidden states; each then samples from its row with its own parameters and seed, as a
lone step would. Sessions join and leave between ticks: the prefills waiting at a tick run first, as one
batched pass of their own (inference/batched_prefill.py). No Django here: the caller gives the device
runner and the limits.

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

from .batched_prefill import prefill_all, same_weights
from .capture import residual_stream
from .discovery import is_attention
from .forward import ForwardRow, one_thread, own_cache, plain_cache, read_lens, synchronize
from .stacked_cache import KeptStack, row_view, stacked_cache


def can_batch(session) -> bool:
    """A decode step (not step 1, which samples from the prefill) on a plain dynamic cache."""
    return session.adapter.has_cache and session.step_index > 0 and not session.finished and plain_cache(session.cache)


def decode_inputs(sessions, lengths: list[int], device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each session's last token, the mask over its left-padded cache plus that token, and its own position."""
    longest = max(lengths)
    mask = torch.zeros(len(sessions), longest + 1, dtype=torch.long, device=device)  # (batch, keys + the new one)
    for i, length in enumerate(lengths):
        mask[i, longest - length:] = 1
    input_ids = torch.tensor([[s.ids[-1]] for s in sessions], device=device)  # (batch, 1)
    positions = torch.tensor([[length] for length in lengths], device=device)  # (batch, 1) each its own position
    return input_ids, mask, positions


@torch.no_grad()
def batched_decode(sessions, kept: KeptStack | None = None) -> list[ForwardRow]:
    """One forward pass feeding each session its last token on top of its own cache; one row each (in the
    order of `sessions`). `kept`: the last tick's stack, fed again while it holds exactly these sessions."""
    model, adapter = sessions[0].model, sessions[0].adapter
    reuse = kept is not None and kept.holds_all(sessions)
    order = kept.order if reuse else list(sessions)  # rows in the stack's order
    lengths = [s.cache.get_seq_length() for s in order]
    input_ids, mask, positions = decode_inputs(order, lengths, model.device)
    longest = max(lengths)
    with one_thread():  # small per-row copies
        cache = kept.cache if reuse else stacked_cache(order, lengths, longest)
    try:
        with residual_stream(model, adapter) as residuals:
            t0 = time.perf_counter()
            out = model(input_ids=input_ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True,
                        output_attentions=True, logits_to_keep=1)
            synchronize(model.device)
            t1 = time.perf_counter()
        with one_thread():  # small per-row copies
            rows, caches = own_rows(order, out, residuals, lengths, (t1 - t0) * 1e3, t1, views=kept is not None)
        rows = read_lens(rows, order)  # every thread: a top-k over rows x vocabulary is one large op
    except Exception:
        if reuse:  # the model may have appended to the kept stack already
            kept.forget()
        raise
    for session, own in zip(order, caches):  # only once every row is out: a failure above changes no session
        session.cache = own
    if kept is not None:
        kept.keep(order, out.cache)
    by_session = {id(s): row for s, row in zip(order, rows)}
    return [by_session[id(s)] for s in sessions]


def own_rows(sessions, out, residuals, lengths: list[int], forward_ms: float, ended_at: float,
             views: bool = False) -> tuple[list[ForwardRow], list]:
    """Each session's row of the batched pass, and its own cache without the left padding (a copy, or with
    `views` a view of the stack that KeptStack keeps). A decode row keeps only its last position's attention
    (what the step sends), cut from one stack of every layer's weights."""
    longest, batch = max(lengths), len(sessions)
    layers = sessions[0].description.layers
    weights = [a for a in (getattr(out, "attentions", None) or ()) if is_attention(a, 1, longest + 1)][-layers:]
    attention = torch.stack(weights)[:, :, :, 0] if weights else None  # (layers, batch, heads, keys)
    hidden = torch.stack(residuals)[:, :, -1]  # (layers + 1, batch, hidden)
    rows, caches = [], []
    for i, session in enumerate(sessions):
        pad = longest - lengths[i]
        caches.append(row_view(out.cache, i, pad) if views else own_cache(out.cache, i, pad))
        last_attn = attention[:, i, :, pad:] if attention is not None else torch.zeros(0, 0, 1)  # (layers, heads, keys)
        rows.append(ForwardRow(logits=out.logits[i, -1].float(), hidden=hidden[:, i, None], last_attn=last_attn,
                               forward_ms=forward_ms, ended_at=ended_at, batch_size=batch))
    return rows, caches


def step_all(sessions, kept: KeptStack | None = None) -> list:
    """One tick on the device thread: the batched forward, then each session's own step (a payload, or the
    exception that session raised: one visitor's failure is not another's)."""
    forwards: dict[int, ForwardRow] = {}
    for n, group in enumerate(same_weights([s for s in sessions if can_batch(s)])):
        if len(group) < 2:
            continue
        try:  # the largest group may reuse the last tick's stack; another model's rows are stacked afresh
            forwards.update({id(s): f for s, f in zip(group, batched_decode(group, kept if n == 0 else None))})
        except Exception:  # noqa: BLE001 - e.g. out of memory for the stacked cache: each steps alone instead
            pass
    results = []
    for session in sessions:
        try:
            results.append(session.step(forward=forwards.get(id(session))))
        except Exception as exc:  # noqa: BLE001 - handed to that session's driver
            results.append(exc)
    if kept is not None:  # a finished run keeps its cache (the page asks about it), not the batch's
        kept.let_go([s for s in sessions if s.finished])
    return results


FIRST_STEP_WAIT_S = 0.5  # how long a tick waits for the sessions of the last prefill pass to ask for step 1


def _nothing() -> None:
    """A device call that only waits for its turn."""


class StepScheduler:
    """One per device: sessions await prefill() and step(); ticks run them in batches on the device's thread."""

    def __init__(self, run, max_batch: int, max_wait_s: float, prefill_tokens: int = 4096, run_prefill=None):
        self.run = run  # async callable: run(fn) -> fn() on the device's thread (decode ticks)
        self.run_prefill = run_prefill or run  # the same for prefill passes, which queue in turn with other calls
        self.max_batch, self.max_wait_s = max(1, max_batch), max(0.0, max_wait_s)
        self.prefill_tokens = max(1, prefill_tokens)  # padded positions per batched prefill pass (its memory)
        self.waiting: list[tuple[object, asyncio.Future]] = []
        self.prefilling: list[tuple[object, asyncio.Future]] = []
        self.ticker: asyncio.Task | None = None
        self.ticks = self.stepped = 0  # figures: mean batch size = stepped / ticks
        self.prefill_passes = self.prefilled = 0  # and of prefills: prefilled / prefill_passes
        self.returning: set[int] = set()  # sessions of the last tick that did not finish: they will ask again
        self.kept = KeptStack()  # the last tick's stacked cache (device thread only)
        self.asked = asyncio.Event()  # set whenever a session asks for a step
        self.ticked_at = 0.0  # time.monotonic() when the last tick's results were handed out
        self.in_flight = False  # a tick or prefill pass runs, or its results are not handed out yet
        self.first_steps: set[int] = set()  # sessions of the last prefill pass, not yet in a tick

    def tick_due(self, within: float | None = None) -> bool:
        """A tick is coming: sessions wait for one or for a prefill pass, a tick or prefill pass is in flight (its
        sessions ask next), or the last one's sessions will ask again within `within` seconds (max_wait_s unless
        given). Read from the device's thread: the executor lets one other call run between two ticks, not a string
        of them, and a run's checks wait while ticks come within a longer horizon."""
        within = self.max_wait_s if within is None else within
        return (self._asking(self.waiting) or self._asking(self.prefilling) or self.in_flight
                or (bool(self.returning) and time.monotonic() - self.ticked_at < within))

    @staticmethod
    def _asking(queue: list) -> bool:
        """Some request in the queue is still awaited (a run that ended while it waited cancelled its own)."""
        return any(not future.done() for _, future in queue)

    def leave(self, session) -> None:
        """This session asks for no step soon (paused, held, stopped or closed): the next tick stops waiting for it,
        and a prefill waiting behind that tick goes now (a restart's prefill waited FIRST_STEP_WAIT_S for a paused
        run's step 1 that never came)."""
        key = id(session)
        if key in self.returning or key in self.first_steps:
            self.returning.discard(key)
            self.first_steps.discard(key)
            self.asked.set()  # _gather looks again

    async def step(self, session) -> dict:
        """This session's next step payload, computed in the next tick."""
        return await self._ask(self.waiting, session)

    async def prefill(self, session) -> dict:
        """This session's prefill payload, computed between two ticks with every other prefill waiting then."""
        return await self._ask(self.prefilling, session)

    async def _ask(self, queue: list, session) -> dict:
        future = asyncio.get_running_loop().create_future()
        queue.append((session, future))
        self.asked.set()
        if self.ticker is None or self.ticker.done():
            self.ticker = asyncio.create_task(self._ticks())
        return await future

    async def _gather(self) -> None:
        """Wait, at most max_wait_s (FIRST_STEP_WAIT_S after a prefill pass), until every session of the last tick or
        pass that will ask again has asked (their payloads are still going out on the event loop): full ticks, so no
        visitor's step waits a tick behind."""
        deadline = asyncio.get_running_loop().time() + max(self.max_wait_s, FIRST_STEP_WAIT_S if self.first_steps else 0)
        while len(self.waiting) < self.max_batch and self.returning - {id(s) for s, _ in self.waiting}:
            self.asked.clear()
            try:
                async with asyncio.timeout_at(deadline):
                    await self.asked.wait()
            except TimeoutError:
                return

    def _joining(self) -> list[tuple[object, asyncio.Future]]:
        """The prefills of the next pass, oldest first: as many as fit max_batch and prefill_tokens (at least one)."""
        if not self.prefilling:
            return []
        taken, rows, longest = 0, 0, 0
        for session, _ in self.prefilling:
            more_rows, more_longest = rows + 1, max(longest, len(session.ids))
            if taken and (taken == self.max_batch or more_rows * more_longest > self.prefill_tokens):
                break
            taken, rows, longest = taken + 1, more_rows, more_longest
        batch = [(s, f) for s, f in self.prefilling[:taken] if not f.done()]
        del self.prefilling[:taken]
        return batch

    async def _ticks(self) -> None:
        while self.waiting or self.prefilling:
            if self.prefilling:  # wait for the device's turn, then take every newcomer that arrived meanwhile
                await self.run_prefill(_nothing)
            joining = self._joining()  # newcomers join between two decode ticks, one pass of them per tick
            if joining:
                await self._run_batch(prefill_all, joining, self.run_prefill)
                self.prefill_passes, self.prefilled = self.prefill_passes + 1, self.prefilled + len(joining)
                self._expect(joining)
            if not self.waiting and not self._returning_soon():
                continue
            await self._gather()
            self.first_steps = set()
            batch = [(s, f) for s, f in self.waiting[:self.max_batch] if not f.done()]
            del self.waiting[:self.max_batch]
            if not batch:
                continue
            results = await self._run_batch(partial(step_all, kept=self.kept), batch)
            self.ticks, self.stepped = self.ticks + 1, self.stepped + len(batch)
            self.returning = {id(s) for (s, f), r in zip(batch, results)  # not a run that ended during the tick
                              if not f.cancelled() and isinstance(r, dict) and not r.get("stop_reason")}
            self.ticked_at = time.monotonic()

    def _expect(self, joined: list[tuple[object, asyncio.Future]]) -> None:
        """Sessions just prefilled ask for step 1 next (sampled from their prefill, no forward pass): the next tick
        gathers them (up to FIRST_STEP_WAIT_S: their prefills are still going out) before another prefill pass
        runs, so a class's first tokens do not wait for its latecomers' prefill."""
        self.first_steps = {id(s) for s, f in joined if not f.cancelled() and f.exception() is None}
        self.returning |= self.first_steps
        self.ticked_at = time.monotonic()

    def _returning_soon(self) -> bool:
        """Some session of the last tick or prefill pass will ask for a step within max_wait_s."""
        return bool(self.returning) and time.monotonic() - self.ticked_at < self.max_wait_s

    async def _run_batch(self, fn, batch: list[tuple[object, asyncio.Future]], run=None) -> list:
        """fn(sessions) on the device's thread; each future gets its session's result or exception."""
        self.in_flight = True
        try:
            results = await (run or self.run)(partial(fn, [s for s, _ in batch]))
        except asyncio.CancelledError:
            for _, future in batch + self.waiting + self.prefilling:
                future.cancel()
            raise
        except Exception as exc:  # the pass itself failed: every session in it hears
            results = [exc] * len(batch)
        finally:
            self.ticked_at, self.in_flight = time.monotonic(), False
        for (_, future), result in zip(batch, results):
            if future.done():
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)
        return results

"""Continuous batching across visitor sessions: one decode forward pass for every session waiting for a step.

Each tick the scheduler takes the sessions that asked for a step (up to max_batch, oldest first), runs
their decode forwards as ONE batched pass (inference/batched_decode.py), and hands each session its own row;
each then samples from its row with its own parameters and seed, as a lone step would. Right after a tick,
the next forward of the sessions that will step again runs while their steps go out (forward_ahead). Sessions
join and leave between ticks: the prefills waiting at a tick run first, as one batched pass of their own
(inference/batched_prefill.py), which waits briefly for the starts already on their way (Arrivals). No Django
here: the caller gives the device runner and the limits.
"""
from __future__ import annotations

import asyncio
import time
from functools import partial

from .batched_decode import batched_decode, can_batch, forward_ahead, step_all
from .batched_prefill import prefill_all
from .stacked_cache import KeptStack

__all__ = ["Arrivals", "StepScheduler", "batched_decode", "can_batch", "forward_ahead", "step_all"]


FIRST_STEP_WAIT_S = 0.5  # how long a tick waits for the sessions of the last prefill pass to ask for step 1
JOIN_WAIT_S = 0.1  # how long a prefill pass waits for starts already being read (Arrivals) to join it


class Arrivals:
    """Starts being read on one event loop (checked, tokenized) that have not asked for their prefill yet. A prefill
    pass that begins while some are on their way waits for them (at most JOIN_WAIT_S): a class pressing Enter
    together shares one pass instead of a first pass of the few read so far and a second one of everyone else."""

    def __init__(self):
        self.count = 0
        self.changed = asyncio.Event()

    def coming(self) -> "Arrival":
        self.count += 1
        return Arrival(self)


class Arrival:
    """One start on its way; here() (once, any number of calls) when it asks for its prefill or gives up."""

    def __init__(self, arrivals: Arrivals):
        self.arrivals: Arrivals | None = arrivals

    def here(self) -> None:
        if self.arrivals is not None:
            self.arrivals.count -= 1
            self.arrivals.changed.set()
            self.arrivals = None


def encoded_tick(sessions, kept: KeptStack, encode=None) -> list:
    """step_all, then each payload through `encode` (the web side's frame text), on the device's thread too: there it
    runs between two forward passes. On the event loop it ran beside the next one (forward_ahead), and a forward on
    two threads that loses a core waits at every operation (32 visitors on SmolLM2, 2 cores: that forward ~20 ms
    longer than the encoding itself)."""
    results = step_all(sessions, kept)
    return results if encode is None else [r if isinstance(r, BaseException) else encode(r) for r in results]


def _nothing() -> None:
    """A device call that only waits for its turn."""


def _quietly(call: asyncio.Future) -> None:
    """forward_ahead raises nothing; a cancelled call (the loop closing) is not an error either."""
    if not call.cancelled():
        call.exception()


class StepScheduler:
    """One per device: sessions await prefill() and step(); ticks run them in batches on the device's thread."""

    def __init__(self, run, max_batch: int, max_wait_s: float, prefill_tokens: int = 4096, run_prefill=None,
                 arrivals: Arrivals | None = None, encode=None):
        self.run = run  # async callable: run(fn) -> fn() on the device's thread (decode ticks)
        self.encode = encode  # payload -> payload, for each step of a tick on the device's thread (see encoded_tick)
        self.run_prefill = run_prefill or run  # the same for prefill passes, which queue in turn with other calls
        self.max_batch, self.max_wait_s = max(1, max_batch), max(0.0, max_wait_s)
        self.prefill_tokens = max(1, prefill_tokens)  # padded positions computed per batched prefill pass
        self.waiting: list[tuple[object, asyncio.Future]] = []
        self.prefilling: list[tuple[object, asyncio.Future]] = []
        self.ticker: asyncio.Task | None = None
        self.ticks = self.stepped = 0  # figures: mean batch size = stepped / ticks
        self.prefill_passes = self.prefilled = 0  # and of prefills: prefilled / prefill_passes
        self.returning: set[int] = set()  # sessions of the last tick that did not finish: they will ask again
        self.kept = KeptStack()  # the last tick's stacked cache (device thread only)
        self.ahead: asyncio.Future | None = None  # the last tick's forward_ahead call
        self.asked = asyncio.Event()  # set whenever a session asks for a step
        self.ticked_at = 0.0  # time.monotonic() when the last tick's results were handed out
        self.in_flight = False  # a tick or prefill pass runs, or its results are not handed out yet
        self.first_steps: set[int] = set()  # sessions of the last prefill pass, not yet in a tick
        self.arrivals = arrivals or Arrivals()  # starts on their way to a prefill (the caller counts them)

    def tick_due(self, within: float | None = None) -> bool:
        """A tick is coming: sessions wait for one or for a prefill pass, a tick or prefill pass is in flight (its
        sessions ask next), or the last one's sessions will ask again within `within` seconds (max_wait_s unless
        given). Read from the device's thread: the executor lets one other call run between two ticks, not a string
        of them, and a run's checks wait while ticks come within a longer horizon."""
        within = self.max_wait_s if within is None else within
        return (self._asking(self.waiting) or self._asking(self.prefilling) or self.in_flight
                or (bool(self.returning) and time.monotonic() - self.ticked_at < within))

    def tick_rows(self) -> int:
        """The sessions that will step in the next tick (the last tick's, with those just prefilled)."""
        return len(self.returning)

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

    async def _let_arrivals_join(self) -> None:
        """Wait, at most JOIN_WAIT_S, while starts being read will ask for a prefill and the pass has room for them (a
        lone visitor's prefill waits for nobody)."""
        deadline = asyncio.get_running_loop().time() + JOIN_WAIT_S
        while self.arrivals.count > 0 and len(self.prefilling) < self.max_batch:
            self.arrivals.changed.clear()
            try:
                async with asyncio.timeout_at(deadline):
                    await self.arrivals.changed.wait()
            except TimeoutError:
                return

    def _joining(self) -> list[tuple[object, asyncio.Future]]:
        """The prefills of the next pass, oldest first: as many as fit max_batch and prefill_tokens (at least one),
        counted as the pass computes them: rows x the longest prompt part left after each one's cached prefix."""
        if not self.prefilling:
            return []
        taken, rows, longest = 0, 0, 0
        for session, _ in self.prefilling:
            more_rows, more_longest = rows + 1, max(longest, session.prompt_left())
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
                await self._let_arrivals_join()
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
            if self.ahead is not None:  # its rows are this tick's forwards (a runner of several threads: not at once)
                await asyncio.wait([self.ahead])
            tick = partial(encoded_tick, kept=self.kept, encode=self.encode)
            await self._run_batch(tick, batch, then=self._ahead)
            self.ticks, self.stepped = self.ticks + 1, self.stepped + len(batch)
            self.ticked_at = time.monotonic()

    def _ahead(self, batch: list[tuple[object, asyncio.Future]], results: list) -> None:
        """After a tick, before its steps are handed out: the sessions that will ask again are `returning`, and their
        next forward is queued on the device now, so it runs while their steps go out (forward_ahead); unless
        newcomers wait for a prefill pass, which then runs first (their first token is the longer wait)."""
        going = [s for (s, f), r in zip(batch, results)  # not a run that ended during the tick
                 if not f.cancelled() and isinstance(r, dict) and not r.get("stop_reason")]
        self.returning = {id(s) for s in going}
        if going and not self._asking(self.prefilling):  # a waiting prefill pass goes first: the next tick runs these
            self.ahead = asyncio.ensure_future(self.run(partial(forward_ahead, going, kept=self.kept)))
            self.ahead.add_done_callback(_quietly)

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

    async def _run_batch(self, fn, batch: list[tuple[object, asyncio.Future]], run=None, then=None) -> list:
        """fn(sessions) on the device's thread; each future gets its session's result or exception (after
        then(batch, results), when given)."""
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
        if then is not None:
            then(batch, results)
        for (_, future), result in zip(batch, results):
            if future.done():
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)
        return results

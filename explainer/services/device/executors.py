"""One model thread per device: model calls run off the event loop, one at a time per device, visitors'
work before their runs' checks, both before background work (measurements), and background work in slices:
between two of its forward passes it runs every visitor call that is waiting (slices()).

Among visitors' calls, the decode tick (every decoding visitor's next step, inference/scheduler.py) goes first.
While ticks are due, the other calls (prefill chunks, forks, checks) get at most OTHER_SHARE of the device's
recent time and each is cut to about one tick's time (chunk_tokens), so a decoding visitor waits at most about
one tick for them. They carry their client address as `owner`: the address that used the least device time
recently (decayed) goes next, so one address's flood waits behind the others. A run's checks (CHECK: the
causal-mask check, the weights checksum) run only when no visitor's call waits and, while ticks are due, take at
most CHECK_SHARE of one decoding visitor's part of the ticks' time (CHECK_SHARE over the rows of a tick): a lone
visitor's check lands within its first ~20 steps, a class's checks come between and after its decode ticks instead
of slowing every token (at 32 visitors a share of 0.15 cost the class 14% of its tokens per second).
"""
import asyncio
import atexit
import contextlib
import heapq
import itertools
import threading
import time
import weakref
from concurrent.futures import Executor, Future
from functools import partial

import torch
from django.conf import settings

from explainer.services.run.provenance import with_canonical_text
from inference.cores import ThreadFit
from inference.scheduler import Arrivals, StepScheduler

STEP, CHECK, BACKGROUND = 0, 1, 2  # priorities: lower runs first; equal ones in the order they came
QUIET_S = 0.05  # background work starts only once visitors' work has paused this long (not in a gap between ticks)
TICK = "tick"  # the owner of decode ticks: every decoding visitor's step in one call
JOINING = "joining"  # the owner of the scheduler's batched prefills: the ticker waits on them, so they never wait for a tick
# The owner of a start's own short calls before its first token (copying the prompt's embedding rows for the after-run
# check, a millisecond): behind the other calls they held a class's late joiners ~11 s from step 1.
FIRST_TOKEN = "first-token"
UNPACED = (TICK, JOINING, FIRST_TOKEN)  # owners whose calls never wait for a tick's turn
USAGE_HALF_LIFE_S = 10.0  # an address's recent device time halves in this long
PACE_HALF_LIFE_S = 2.0  # the recent tick and other time that OTHER_SHARE compares
OTHER_SHARE = 0.5  # while ticks are due, other calls take at most this much of the time ticks take
CHECK_SHARE = 0.15  # ...and checks this much of one decoding visitor's part (a lone visitor's check lands within ~20 steps)
CHECK_HORIZON_S = 1.0  # checks yield to ticks whose sessions will ask within this long (a class's sends take a while)
SHARES = {STEP: ("other", OTHER_SHARE), CHECK: ("check", CHECK_SHARE)}  # priority -> its pace's name and share
MIN_CHUNK_TOKENS = 8
# torch's intra-op threads for a device's model thread; the loader's thread runs on one. libgomp keeps a team of
# helper threads for every thread that ran a parallel region; with more of them alive than cores, idle helpers
# sleep instead of spinning and each operation of a forward waits for its helper to wake: beside the loader's
# idle team, a class's decode forward on SmolLM2 (2 cores) took 155 ms instead of 120.
DEVICE_THREADS = torch.get_num_threads()

_lock = threading.Lock()
_executors: dict[str, "DeviceExecutor"] = {}


def serial_torch_here() -> None:
    """The calling thread (the server's event loop, explainer/asgi.py) runs torch on one thread. An operation run there
    on two gives that thread a helper team of its own for good, beside the device's: measured in-process on 2 cores,
    a class of 32's decode forward on SmolLM2 then took 152 ms instead of 126. A check's torch.cat did that on the
    event loop (after_run_checks.chunked_calls); model work belongs on the device's thread."""
    torch.set_num_threads(1)


class DeviceExecutor(Executor):
    """A single worker thread with a priority queue: a measurement waits while any visitor's call waits."""

    def __init__(self, name: str, threads: int = DEVICE_THREADS, fit: ThreadFit | None = None):
        self._cv = threading.Condition()
        self.threads = threads  # torch's intra-op threads on this executor's thread (DEVICE_THREADS) at most
        self.fit = fit  # the count for each call: fewer while other processes keep cores busy (inference/cores.py)
        self._queue: list[tuple[int, int, Future, object, object]] = []  # (priority, order, future, fn, owner)
        self.usage = DecayedUsage(USAGE_HALF_LIFE_S)  # owner -> recent device seconds
        self.pace = DecayedUsage(PACE_HALF_LIFE_S)  # TICK, "other" and "check" -> recent device seconds
        self.tick_s = self.token_s = None  # one tick's and one prefill token's recent time (decayed means)
        self.tick_due = lambda within=None: False  # set by the device's scheduler: a tick's sessions will ask again soon
        self.tick_rows = lambda: 1  # set by the device's scheduler: the sessions of the last tick (checks' share)
        self._order = itertools.count()
        self._step_ended = 0.0  # when the last visitor call (STEP or CHECK) finished
        self._slicing = False  # background work is running visitor calls between its forward passes
        self._stopping = False  # shutdown(): the thread ends after the call it runs
        self.between_slices = 0  # visitor calls run inside background work (figures and tests)
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn, /, *args, **kwargs) -> Future:
        return self.submit_at(STEP, partial(fn, *args, **kwargs))

    def submit_at(self, priority: int, fn, owner=None, tokens: int = 0) -> Future:
        """Queue fn() at a priority for `owner` (a client address, TICK, or None); `tokens`: the prompt tokens it
        feeds (a prefill chunk: its time per token paces the next chunks). Its Future resolves with what it
        returns or raises."""
        future = Future()
        with self._cv:
            heapq.heappush(self._queue, (priority, next(self._order), future, fn, (owner, tokens)))
            self._cv.notify()
        return future

    def chunk_tokens(self, most: int) -> int:
        """Prompt tokens for the next prefill chunk: `most`, or about one tick's time while ticks are due."""
        if not self.tick_due() or not self.tick_s or not self.token_s:
            return most
        return max(MIN_CHUNK_TOKENS, min(most, int(self.tick_s / self.token_s)))

    def waiting(self, priority: int | None = None) -> int:
        """Calls queued (not the one running), at one priority or all."""
        with self._cv:
            return sum(1 for item in self._queue if priority is None or item[0] == priority)

    def shutdown(self, wait: bool = True) -> None:
        """End the thread after the call it runs; the calls still queued are cancelled (none could run after it)."""
        with self._cv:
            self._stopping = True
            queued, self._queue = self._queue, []
            self._cv.notify_all()
        for _, _, future, _, _ in queued:
            future.cancel()
        if wait:
            self.join()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread to end (after shutdown)."""
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _next(self) -> tuple | None:
        with self._cv:
            while not self._stopping:
                now = time.monotonic()
                wait = None
                if self._queue and self._queue[0][0] in SHARES:
                    priority = self._queue[0][0]
                    index = self._fairest(priority)
                    if self._queue[index][4][0] in UNPACED or not self._ticks_first(priority):
                        return self._pop(index)
                    wait = 0.005  # the tick is due: look again when it comes (submit notifies) or soon
                elif self._queue and now - self._step_ended >= QUIET_S:
                    return self._pop(0)
                elif self._queue:
                    wait = QUIET_S - (now - self._step_ended)
                self._cv.wait(wait)
            return None

    def _ticks_first(self, priority: int = STEP) -> bool:
        """A tick is due (for checks: within CHECK_HORIZON_S) and the calls of this priority have had their share of
        the recent time: they wait for it."""
        if not self.tick_due(CHECK_HORIZON_S if priority == CHECK else None):
            return False
        pace, (name, share) = self.pace.now(), SHARES[priority]
        if priority == CHECK:  # one decoding visitor's part of the ticks: a class's tokens before its checks
            share /= max(1, self.tick_rows())
        return pace.get(name, 0.0) > share * pace.get(TICK, 0.0)

    def _fairest(self, priority: int = STEP) -> int:
        """Index of the next call of this priority: a tick first, then a batched prefill or a start's call before
        its first token, else the earliest call of the owner with least recent use."""
        steps = [(n, item) for n, item in enumerate(self._queue) if item[0] == priority]
        for owners in ((TICK,), UNPACED):
            if first := [(item[1], n) for n, item in steps if item[4][0] in owners]:
                return min(first)[1]
        usage = self.usage.now()
        return min((usage.get(item[4][0], 0.0), item[1], n) for n, item in steps)[2]

    def _pop(self, index: int) -> tuple:
        item = self._queue[index]
        self._queue[index] = self._queue[-1]
        self._queue.pop()
        heapq.heapify(self._queue)
        priority, _, future, fn, meta = item
        return priority, future, fn, meta

    def _work(self) -> None:
        torch.get_num_threads()  # torch sets a thread's count from the last one set anywhere at its first call...
        torch.set_num_threads(self.threads)  # ...so this thread's own count comes after it
        threads = self.threads
        while (call := self._next()) is not None:
            if self.fit is not None and (fitted := self.fit.threads_now()) != threads:
                torch.set_num_threads(threads := fitted)
            self._run(*call)

    def _run(self, priority: int, future: Future, fn, meta=(None, 0)) -> None:
        if not future.set_running_or_notify_cancel():
            return
        started = time.monotonic()
        try:
            future.set_result(fn())
        except BaseException as exc:  # handed to the awaiting coroutine, as ThreadPoolExecutor does
            future.set_exception(exc)
        ended = time.monotonic()
        if priority in SHARES:
            self._step_ended = ended
            self._paced(meta, ended - started, priority)

    def _paced(self, meta: tuple, seconds: float, priority: int = STEP) -> None:
        """Count a visitor call's time: its owner's use, the ticks', others' or checks' share, the pace of ticks
        and tokens."""
        owner, tokens = meta
        self.pace.add(TICK if owner == TICK else SHARES[priority][0], seconds)
        if owner == TICK:
            self.tick_s = seconds if self.tick_s is None else 0.8 * self.tick_s + 0.2 * seconds
        elif owner not in (None, JOINING, FIRST_TOKEN):
            self.usage.add(owner, seconds)
        if tokens:
            per_token = seconds / tokens
            self.token_s = per_token if self.token_s is None else 0.8 * self.token_s + 0.2 * per_token

    def run_waiting_steps(self) -> int:
        """From background work on this executor's thread, between two of its forward passes: run every
        visitor call waiting now (and those they queue meanwhile) and the checks whose turn it is, then let the
        background work go on."""
        if threading.current_thread() is not self._thread or self._slicing:
            return 0  # a visitor call's own forward passes, or another thread: nothing to interleave
        self._slicing, ran = True, 0
        try:
            with torch.inference_mode(False), torch.no_grad():  # visitors' tensors stay ordinary tensors
                while True:
                    with self._cv:
                        priority = self._queue[0][0] if self._queue else BACKGROUND
                        if priority not in SHARES or (priority == CHECK and self._ticks_first(CHECK)):
                            return ran
                        _, future, fn, meta = self._pop(self._fairest(priority))
                    self._run(priority, future, fn, meta)
                    ran += 1
                    self.between_slices += 1
        finally:
            self._slicing = False

    @contextlib.contextmanager
    def slices(self, *models):
        """Background work in slices: each forward pass of `models` first runs the visitor calls waiting."""
        def between(*_):  # a pre-hook that returns nothing leaves the forward's inputs as they are
            self.run_waiting_steps()
        hooks = [m.register_forward_pre_hook(between) for m in models if m is not None]
        try:
            yield
        finally:
            for hook in hooks:
                hook.remove()


@atexit.register
def _stop_at_exit(timeout_s: float = 30.0) -> None:
    """At the interpreter's exit, let each device thread finish the call it runs: a daemon thread still inside a
    forward pass when torch's static destructors run aborts the process ("terminate called without an active
    exception", exit status 134), a test process that ends right after a run included."""
    with _lock:
        executors = list(_executors.values())
    for executor in executors:
        executor.shutdown(wait=False)
    deadline = time.monotonic() + timeout_s
    for executor in executors:
        executor.join(max(0.0, deadline - time.monotonic()))


def executor_for(device: str) -> DeviceExecutor:
    """A single worker per device: visitors' steps interleave step by step instead of fighting for cores."""
    with _lock:
        if device not in _executors:
            threads = 1 if device == "loader" else DEVICE_THREADS
            fit = ThreadFit(threads) if device == "cpu" else None  # on a GPU the CPU threads feed it, nothing more
            _executors[device] = DeviceExecutor(f"model-{device}", threads, fit)
        return _executors[device]


async def run_on(device: str, fn, *args, priority: int = STEP, owner=None, tokens: int = 0):
    """Run fn(*args) on the device's thread (after every waiting call of a lower priority number); `owner`: the
    client address it is for (shares device time fairly between addresses), or TICK; `tokens`: prompt tokens
    it feeds (a prefill chunk)."""
    return await asyncio.wrap_future(executor_for(device).submit_at(priority, partial(fn, *args), owner, tokens))


_schedulers: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # event loop -> {device: StepScheduler}
_arrivals: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # event loop -> Arrivals


def arrivals() -> Arrivals:
    """The starts being read on this event loop (a start's device is not known until its model is): every device's
    prefill pass waits for them briefly (inference/scheduler.py, Arrivals)."""
    return _arrivals.setdefault(asyncio.get_running_loop(), Arrivals())


def prefill_pass_tokens(device: str) -> int:
    """EXPLAINER_PREFILL_BATCH_TOKENS, or the device's default (settings.py): a CPU computes far fewer per second."""
    return settings.EXPLAINER_PREFILL_BATCH_TOKENS or (4096 if device.startswith("cuda") else 256)


def scheduler_for(device: str) -> StepScheduler:
    """The device's step scheduler on this event loop: visitors' decode steps batched into one forward pass."""
    per_device = _schedulers.setdefault(asyncio.get_running_loop(), {})
    if device not in per_device:
        scheduler = StepScheduler(partial(run_on, device, owner=TICK), settings.EXPLAINER_MAX_BATCH,
                                  settings.EXPLAINER_BATCH_WAIT_MS / 1e3, prefill_pass_tokens(device),
                                  run_prefill=partial(run_on, device, owner=JOINING), arrivals=arrivals(),
                                  encode=with_canonical_text)
        executor_for(device).tick_due = scheduler.tick_due
        executor_for(device).tick_rows = scheduler.tick_rows
        per_device[device] = scheduler
    return per_device[device]


class DecayedUsage:
    """Device seconds per owner, halving every `half_life` seconds (the device thread only)."""

    def __init__(self, half_life: float):
        self.half_life, self.seconds, self.at = half_life, {}, time.monotonic()

    def now(self) -> dict:
        now = time.monotonic()
        factor = 0.5 ** ((now - self.at) / self.half_life)
        self.seconds = {owner: s * factor for owner, s in self.seconds.items() if s * factor > 1e-4}
        self.at = now
        return self.seconds

    def add(self, owner, seconds: float) -> None:
        usage = self.now()
        usage[owner] = usage.get(owner, 0.0) + seconds


def queue_depth(device: str) -> int:
    """Model calls waiting for the device (not the one running): the host page's queue."""
    with _lock:
        executor = _executors.get(device)
    return executor.waiting() if executor is not None else 0

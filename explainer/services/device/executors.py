"""One model thread per device: model calls run off the event loop, one at a time per device, visitors'
work before background work (measurements), and background work in slices: between two of its forward
passes it runs every visitor call that is waiting (slices())."""
import asyncio
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

from inference.scheduler import StepScheduler

STEP, BACKGROUND = 0, 1  # priorities: lower runs first; equal ones in the order they came
QUIET_S = 0.05  # background work starts only once visitors' work has paused this long (not in a gap between ticks)

_lock = threading.Lock()
_executors: dict[str, "DeviceExecutor"] = {}


class DeviceExecutor(Executor):
    """A single worker thread with a priority queue: a measurement waits while any visitor's call waits."""

    def __init__(self, name: str):
        self._cv = threading.Condition()
        self._queue: list[tuple[int, int, Future, object]] = []  # (priority, order, future, fn)
        self._order = itertools.count()
        self._step_ended = 0.0  # when the last visitor (STEP) call finished
        self._slicing = False  # background work is running visitor calls between its forward passes
        self.between_slices = 0  # visitor calls run inside background work (figures and tests)
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def submit(self, fn, /, *args, **kwargs) -> Future:
        return self.submit_at(STEP, partial(fn, *args, **kwargs))

    def submit_at(self, priority: int, fn) -> Future:
        """Queue fn() at a priority; its Future resolves with what it returns or raises."""
        future = Future()
        with self._cv:
            heapq.heappush(self._queue, (priority, next(self._order), future, fn))
            self._cv.notify()
        return future

    def waiting(self, priority: int | None = None) -> int:
        """Calls queued (not the one running), at one priority or all."""
        with self._cv:
            return sum(1 for item in self._queue if priority is None or item[0] == priority)

    def _next(self) -> tuple[int, Future, object]:
        with self._cv:
            while True:
                quiet_for = time.monotonic() - self._step_ended
                if self._queue and (self._queue[0][0] == STEP or quiet_for >= QUIET_S):
                    priority, _, future, fn = heapq.heappop(self._queue)
                    return priority, future, fn
                self._cv.wait(QUIET_S - quiet_for if self._queue else None)

    def _work(self) -> None:
        while True:
            self._run(*self._next())

    def _run(self, priority: int, future: Future, fn) -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn())
        except BaseException as exc:  # handed to the awaiting coroutine, as ThreadPoolExecutor does
            future.set_exception(exc)
        if priority == STEP:
            self._step_ended = time.monotonic()

    def run_waiting_steps(self) -> int:
        """From background work on this executor's thread, between two of its forward passes: run every
        visitor call waiting now (and those they queue meanwhile), then let the background work go on."""
        if threading.current_thread() is not self._thread or self._slicing:
            return 0  # a visitor call's own forward passes, or another thread: nothing to interleave
        self._slicing, ran = True, 0
        try:
            with torch.inference_mode(False), torch.no_grad():  # visitors' tensors stay ordinary tensors
                while True:
                    with self._cv:
                        if not self._queue or self._queue[0][0] != STEP:
                            return ran
                        _, _, future, fn = heapq.heappop(self._queue)
                    self._run(STEP, future, fn)
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


def executor_for(device: str) -> DeviceExecutor:
    """A single worker per device: visitors' steps interleave step by step instead of fighting for cores."""
    with _lock:
        if device not in _executors:
            _executors[device] = DeviceExecutor(f"model-{device}")
        return _executors[device]


async def run_on(device: str, fn, *args, priority: int = STEP):
    """Run fn(*args) on the device's thread (after every waiting call of a lower priority number)."""
    return await asyncio.wrap_future(executor_for(device).submit_at(priority, partial(fn, *args)))


_schedulers: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # event loop -> {device: StepScheduler}


def scheduler_for(device: str) -> StepScheduler:
    """The device's step scheduler on this event loop: visitors' decode steps batched into one forward pass."""
    per_device = _schedulers.setdefault(asyncio.get_running_loop(), {})
    if device not in per_device:
        per_device[device] = StepScheduler(partial(run_on, device), settings.EXPLAINER_MAX_BATCH,
                                           settings.EXPLAINER_BATCH_WAIT_MS / 1e3, settings.EXPLAINER_PREFILL_BATCH_TOKENS)
    return per_device[device]


def queue_depth(device: str) -> int:
    """Model calls waiting for the device (not the one running): the host page's queue."""
    with _lock:
        executor = _executors.get(device)
    return executor.waiting() if executor is not None else 0

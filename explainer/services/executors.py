"""One model thread per device: model calls run off the event loop, one at a time per device, visitors'
work before background work (measurements)."""
import asyncio
import heapq
import itertools
import threading
import time
import weakref
from concurrent.futures import Executor, Future
from functools import partial

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
            priority, future, fn = self._next()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to the awaiting coroutine, as ThreadPoolExecutor does
                future.set_exception(exc)
            if priority == STEP:
                self._step_ended = time.monotonic()


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
                                           settings.EXPLAINER_BATCH_WAIT_MS / 1e3)
    return per_device[device]


def queue_depth(device: str) -> int:
    """Model calls waiting for the device (not the one running): the host page's queue."""
    with _lock:
        executor = _executors.get(device)
    return executor.waiting() if executor is not None else 0

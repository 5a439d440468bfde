"""How many CPU threads the model's forward passes get: the cores this process may use, less those that other
processes keep busy.

A forward pass on two OpenMP threads waits at each of its ~300 parallel operations for its partner. Where nobody else
needs the cores, a partner that spins a moment before it sleeps (GOMP_SPINCOUNT, explainer/settings.py) is much faster
than one that sleeps at once; where another process keeps a core busy, a spinning partner takes turns with it and one
thread alone does better than two. Measured in-process on 2 cores, a class of 32's decode tick on SmolLM2 (ms):

    other processes        two threads, spinning   two threads, sleeping   one thread
    none                   152                     187                     172
    30% of a core          247                     232                     207
    50% of a core          267                     223                     218
    a whole core           447                     225                     231

So the server's model thread runs on every core while other processes leave them alone (a bench's own client, at
2-5% of a core, does), and gives up a core whenever others use more than TAKE_SHARE of one. Others' use is the
machine's busy time on this process's CPUs (/proc/stat) less this process's own; off Linux nothing changes.
"""
from __future__ import annotations

import math
import os
import time
from typing import Callable

TAKE_SHARE = 0.15  # a core counts as taken once other processes use more than this share of it...
GIVE_SHARE = 0.08  # ...and as free again only below this one (in between the count stays: no flapping)
WINDOW_S = 1.0  # others' use is read over at least this long


def fitted(most: int, current: int, others: float) -> int:
    """Threads for the next forward passes: `most`, less each core that other processes use (`others` cores' worth)
    more than TAKE_SHARE of, or still more than GIVE_SHARE of when it was taken already; at least 1."""
    others = max(0.0, others)
    taken = math.floor(others + 1 - TAKE_SHARE)  # cores others have taken by the stricter measure...
    held = math.floor(others + 1 - GIVE_SHARE)  # ...and those they have not yet given back
    fewest, most_now = max(1, most - held), max(1, most - taken)
    return min(max(current, fewest), most_now)


def read_cpu_times(cpus: set[int] | None = None, stat: str = "/proc/stat") -> tuple[float, float] | None:
    """(seconds `cpus` (default: this process's) have been busy since boot, this process's CPU seconds so far);
    None where /proc/stat is not there to read."""
    cpus = os.sched_getaffinity(0) if cpus is None and hasattr(os, "sched_getaffinity") else cpus
    try:
        with open(stat) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    ticks = 0
    for line in lines:
        name, *fields = line.split()
        if not name.startswith("cpu") or name == "cpu" or (cpus is not None and int(name[3:]) not in cpus):
            continue
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
        ticks += user + nice + system + irq + softirq + steal  # steal: the host ran someone else on this CPU
    own = os.times()
    return ticks / os.sysconf("SC_CLK_TCK"), own.user + own.system


class ThreadFit:
    """The model thread's count of CPU threads, refitted at most once a window to what other processes leave."""

    def __init__(self, most: int, read: Callable[[], tuple[float, float] | None] = read_cpu_times,
                 clock: Callable[[], float] = time.monotonic):
        self.most = self.threads = max(1, most)
        self.read, self.clock = read, clock
        self._start: tuple[float, float, float] | None = None  # (time, busy seconds, own seconds) the window began at

    def threads_now(self) -> int:
        """The count for the next call: refitted when a window has passed since the last reading."""
        if self.most == 1:
            return 1
        now = self.clock()
        if self._start is not None and now - self._start[0] < WINDOW_S:
            return self.threads
        sample = self.read()
        if sample is None:
            return self.threads
        if self._start is not None:
            at, busy, own = self._start
            others = max(0.0, (sample[0] - busy) - (sample[1] - own)) / (now - at)  # cores' worth, over the window
            self.threads = fitted(self.most, self.threads, others)
        self._start = (now, *sample)
        return self.threads

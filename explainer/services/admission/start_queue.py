"""Starts that find no free generation slot wait in line, first come first served, instead of hearing `busy`.

One line per process: the visitors' own runs in `make run`, and in REDIS_URL mode the Daphne process's line
in front of every worker (remote.py) and each worker's own (a start that reaches a full worker, rare). At most
EXPLAINER_START_QUEUE starts wait; past that a start hears `busy`. Only the head of the line takes a slot,
so a later start never overtakes an earlier one (a workshop host's broadcast takes a free slot ahead of the line).
"""
from __future__ import annotations

import asyncio
import math
import threading

from django.conf import settings

from explainer.messages import status_payload
from explainer.services.run.control import QUEUED  # the `status` state of a start waiting in line
from inference.wire.said import said

LEFT_QUEUE = "left_queue"  # the `reason` of the idle status a stop in line gets
LEFT_MESSAGE = said("You left the queue. Press Play to join it again.")
HOLD_WEIGHT = 0.3  # how much one finished run moves the mean time a run holds its slot (an EWMA)


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th … 11th, 12th, 13th, 21st; said, so each language writes its own (1er, 2e; 1.º; 第 1 位)
    as the page's queue line does (static/js/article/chrome.js)."""
    # The templates are the English suffixes: French writes 1er, 21e; Spanish 1.º; Chinese the number alone.
    if n == 1:  # its own template: French writes 1er but 21e
        return said("1st")
    if 10 <= n % 100 <= 20 or n % 10 not in (1, 2, 3):
        return said("%(n)sth", n=n)
    return {1: said("%(n)sst", n=n), 2: said("%(n)snd", n=n), 3: said("%(n)srd", n=n)}[n % 10]


class RunLengths:
    """How long runs have held a generation slot here lately: what a wait in line is estimated from."""

    def __init__(self):
        self.mean_s: float | None = None
        self._lock = threading.Lock()

    def saw(self, held_s: float) -> None:
        with self._lock:
            self.mean_s = held_s if self.mean_s is None else self.mean_s + HOLD_WEIGHT * (held_s - self.mean_s)


run_lengths = RunLengths()


def queued_status(position: int, slots: int, mean_run_s: float | None) -> dict:
    """"You are 3rd in line; about 10 s": the wait is the runs ahead, `slots` at a time, each as long as runs
    have lately been here (no estimate before one run has finished)."""
    eta = None if mean_run_s is None else max(1, math.ceil(math.ceil(position / max(1, slots)) * mean_run_s))
    place = ordinal(position)
    if eta is None:
        message = said("Every generation slot is taken. You are %(place)s in line. Stop leaves the line.", place=place)
    else:
        message = said("Every generation slot is taken. You are %(place)s in line; about %(seconds)s s. Stop leaves "
                       "the line.", place=place, seconds=eta)
    return status_payload(QUEUED, message, run_state=QUEUED, position=position, eta_s=eta)


class Ticket:
    def __init__(self):
        self.moved = asyncio.Event()  # set when the line moved or a slot came back: look again
        self.loop = asyncio.get_running_loop()

    def wake(self) -> None:
        self.loop.call_soon_threadsafe(self.moved.set)  # a slot may be released from an executor's thread


class StartQueue:
    """The line of starts waiting for a slot; `take` is how the head tries for one (True: it has it)."""

    def __init__(self):
        self.waiting: list[Ticket] = []
        self._lock = threading.Lock()

    @property
    def bound(self) -> int:
        return settings.EXPLAINER_START_QUEUE

    def __len__(self) -> int:
        return len(self.waiting)

    def join(self) -> Ticket | None:
        """A place at the end of the line, or None when EXPLAINER_START_QUEUE are waiting already (then: `busy`)."""
        with self._lock:
            if len(self.waiting) >= self.bound:
                return None
            ticket = Ticket()
            self.waiting.append(ticket)
        self.wake_all()
        return ticket

    def leave(self, ticket: Ticket) -> None:
        with self._lock:
            if ticket in self.waiting:
                self.waiting.remove(ticket)
        self.wake_all()

    def position(self, ticket: Ticket) -> int:
        """1 for the head of the line."""
        with self._lock:
            return self.waiting.index(ticket) + 1

    def wake_all(self) -> None:
        """Every waiting start looks again (a slot came back, or the line moved)."""
        with self._lock:
            waiting = list(self.waiting)
        for ticket in waiting:
            ticket.wake()

    async def wait_turn(self, ticket: Ticket, take, tell, stopped, poll_s: float | None = None) -> bool:
        """Wait until this ticket is the head and `take()` gets it a slot (True), or `stopped()` (False). `tell`
        gets each new position; a head whose slot comes from elsewhere (other processes' workers) polls."""
        told = None
        while not stopped():
            ticket.moved.clear()
            position = self.position(ticket)
            if position == 1 and await take():
                return True
            if position != told:
                told = position
                await tell(position)
            timeout = poll_s if position == 1 else None
            try:
                async with asyncio.timeout(timeout):
                    await ticket.moved.wait()
            except TimeoutError:
                pass
        return False


local_queue = StartQueue()  # this process's line for its own generation slots (capacity.generating)


def slot_came_back(held_s: float | None = None) -> None:
    """A generation slot was released: the head of the line tries for it."""
    if held_s is not None:
        run_lengths.saw(held_s)
    local_queue.wake_all()

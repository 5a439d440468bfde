"""REDIS_URL mode: one line in this Daphne process in front of every worker, first come first served.

A start goes to the least loaded worker with room; when none has room (its pong's runs generating, starts in its
own line and starts sent to it that it has not answered yet fill its slots), or others are waiting already, the
start waits in this process's line (start_queue.py) and its head asks the workers again every POLL_S. A worker
that still turns out full (another Daphne's start got there first) queues it in its own line: nothing is refused.
Mixed into RemoteRun (remote.py).
"""
from __future__ import annotations

import random
from collections import Counter

from explainer.messages import busy_payload
from explainer.services.admission.start_queue import StartQueue, queued_status
from explainer.services.run.in_line import left_line_status, line_full_reason

POLL_S = 0.5  # how often the head of the line asks the workers for a free slot
remote_queue = StartQueue()  # this process's line for every worker's slots
unanswered = Counter()  # worker -> starts sent from this process that it has not answered yet


def claimed(pong: dict) -> int:
    """A worker's slots spoken for: runs generating, starts in its own line, and starts its last pong cannot know."""
    return pong["active"] + pong.get("queued", 0) + unanswered[pong["worker"]]


def room(pong: dict) -> int:
    """Free slots on a worker."""
    return pong["limit"] - claimed(pong)


def load(pong: dict) -> tuple[int, int]:
    """Slots spoken for first, then sessions held: a paused session holds no slot but keeps its KV cache there."""
    return claimed(pong), pong.get("sessions", 0)


def least_loaded(pongs: list[dict]) -> str:
    least = min(load(p) for p in pongs)
    return random.choice([p["worker"] for p in pongs if load(p) == least])


def slots_and_mean(pongs: list[dict]) -> tuple[int, float | None]:
    """Every answering worker's slots, and how long their runs have held one lately (for the line's estimate)."""
    means = [p["mean_run_s"] for p in pongs if p.get("mean_run_s") is not None]
    return sum(p["limit"] for p in pongs), (sum(means) / len(means) if means else None)


class RemoteLine:
    """The start's wait for a worker (RemoteRun's state: pongs, send, _ping_workers, keep_while_connected)."""

    line_ticket = None  # this socket's place in remote_queue while its start waits
    stopped_in_line = False  # a stop came while it waited
    sent_to: str | None = None  # the worker a start went to, until its first answer (counted in `unanswered`)

    async def _worker_with_room(self, worker: str) -> str | None:
        """`worker` (the least loaded that answered) when it has room and no one waits; else the worker whose slot
        came free at this start's turn in line. None: the visitor stopped in line, or the line was full (`busy`).
        A host's broadcast never waits in line (as in_line.py's): it goes to the worker with the most room, whose
        VisitorRun takes a free slot ahead of the line or says `busy`, to the host alone (the room never queues)."""
        if self.keep_while_connected or (not len(remote_queue) and room(self.pongs[worker]) > 0):
            return worker
        ticket = remote_queue.join()
        if ticket is None:
            slots, _ = slots_and_mean(list(self.pongs.values()))
            await self.send(busy_payload(line_full_reason(slots), 5))
            return None
        self.line_ticket, self.stopped_in_line, chosen = ticket, False, None

        async def take() -> bool:
            nonlocal chosen
            await self._ping_workers()
            free = [p for p in self.pongs.values() if room(p) > 0]
            chosen = least_loaded(free) if free else None
            return chosen is not None

        async def tell(position: int) -> None:
            await self.send(queued_status(position, *slots_and_mean(list(self.pongs.values()))))

        try:
            turn = await remote_queue.wait_turn(ticket, take, tell, lambda: self.stopped_in_line, POLL_S)
        finally:
            remote_queue.leave(ticket)
            self.line_ticket = None
        if self.stopped_in_line or not turn:  # a stop as its turn came still leaves
            self.stopped_in_line = False
            await self.send(left_line_status())
            return None
        return chosen

    def _leave_line(self) -> bool:
        """A stop read while the start waits in line: it leaves now (True), not after the start it would stop."""
        if self.line_ticket is None:
            return False
        self.stopped_in_line = True
        self.line_ticket.wake()
        return True

    def _sent_start(self, worker: str) -> None:
        self._answered()
        self.sent_to = worker
        unanswered[worker] += 1

    def _answered(self) -> None:
        """The worker answered the start (or the run ended first): its pongs count the run from now on."""
        if self.sent_to is not None:
            unanswered[self.sent_to] -= 1
            if unanswered[self.sent_to] <= 0:
                del unanswered[self.sent_to]
            self.sent_to = None

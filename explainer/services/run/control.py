"""A run's control plane: one explicit state, and every client verb a transition (docs/protocol.md, "Run states").

The state lives here and nowhere else. Verbs only change it and never wait for model work, so the
socket's consumer stays free to read the next frame (a `stop`, an `ack`) while a step computes; the run's
driver (explainer/services/run/visitor_run.py) does the model work and reads the state between steps.

    idle ──start──▶ (queued ──a slot──▶) prefilling ──▶ running ◀──resume── paused
                        │            │  ▲ ──pause──▶   │  ▲ step (one step, stays paused)
                        │            ▼  │ ack         │  │
                        │           held (window full) ┘ (pause)
                        └── stop, from any of these ──▶ stopping ──(≤1 step in flight)──▶ finished
    finished ──fork──▶ paused;  start (any state) ──▶ prefilling of a new run;  disconnect ──▶ idle
"""
from __future__ import annotations

import asyncio
import time

from explainer.protocol import ProtocolError
from explainer.messages import status_payload
from inference.wire.said import said

IDLE, QUEUED, PREFILLING, RUNNING, PAUSED, HELD, STOPPING, FINISHED = (
    "idle", "queued", "prefilling", "running", "paused", "held", "stopping", "finished")
LIVE = (QUEUED, PREFILLING, RUNNING, PAUSED, HELD)  # a stop is accepted from each of these
BEFORE_PREFILL = (QUEUED, PREFILLING)  # a pause or resume here says what the prefill turns into
READER_MESSAGE = said("waiting for the client to read (ack)")
IDLE_TIMEOUT = "idle_timeout"  # the closing status's `reason` when a paused or held run waited too long
PAUSED_MEMORY = "paused_memory"  # ... when the paused runs' memory budget ended it (the least recently active)
ENDED_BECAUSE = {
    IDLE_TIMEOUT: said("the run was paused too long; its generation slot was released"),
    PAUSED_MEMORY: said("the server's memory for paused runs was full, and this run had waited longest: fork or start again"),
}


def status(state: str, message: str = "") -> dict:
    """The `status` message for a run state (held reads as paused on the wire, with why, as it always has)."""
    if state == HELD:
        return status_payload("paused", message or READER_MESSAGE, run_state=HELD)
    return status_payload(state, message, run_state=state)


class RunControl:
    """The state of one run, its pending `step`, and whether model work is in flight."""

    def __init__(self):
        self.state = IDLE
        self.after_prefill = RUNNING  # what the prefill turns into (a pause while prefilling changes it)
        self.step_asked = False  # a `step` accepted and not yet sent
        self.keep_steps: int | None = None  # a stop's limit: the client's last step + the one computing
        self.computing = False  # the prefill or a step is in flight: verbs' replies wait behind it
        self.changed = asyncio.Event()  # the driver looks again when set
        self.quiet = asyncio.Event()  # set whenever nothing is in flight and no step is asked for
        self.quiet.set()
        self.active_at = time.monotonic()  # the last progress (prefill, step, fork): what the idle timeout counts from
        self.ended_because: str | None = None  # IDLE_TIMEOUT when the idle timeout stopped the run

    # ---- what the driver does ---------------------------------------------------------------
    def begin(self, paused: bool, queued: bool = False) -> None:
        """A start: prefilling, or waiting in line for a generation slot first."""
        self.state, self.after_prefill, self.step_asked = QUEUED if queued else PREFILLING, PAUSED if paused else RUNNING, False
        self.keep_steps, self.ended_because = None, None
        self.touch()
        self.wake()

    def dequeued(self) -> bool:
        """The start's turn came (it holds a slot now): prefilling, unless a stop came while it waited."""
        if self.state == QUEUED:
            self.state = PREFILLING
        return self.state == PREFILLING

    def prefilled(self) -> str:
        """The prefill is out: running or paused as asked, unless a stop came meanwhile."""
        if self.state == PREFILLING:
            self.state = self.after_prefill
        self.touch()
        return self.state

    def hold(self) -> None:
        self.state = HELD

    def unhold(self) -> None:
        self.state = RUNNING

    def idle_for(self) -> float:
        """Seconds since the run last made progress (a paused or held run's wait)."""
        return time.monotonic() - self.active_at

    def touch(self) -> None:
        self.active_at = time.monotonic()

    def idle_out(self, reason: str = IDLE_TIMEOUT) -> None:
        """Ended by the server while it waited (paused past EXPLAINER_IDLE_RUN_S, or past the paused runs' memory):
        stopping, as a stop would (then `done`), with the reason named."""
        self.state, self.step_asked, self.keep_steps, self.ended_because = STOPPING, False, None, reason
        self.set_quiet()
        self.wake()

    def finished_status(self, stop_reason: str | None) -> dict:
        """The run's last word; a run the server ended says why with a named `reason`."""
        if self.ended_because not in ENDED_BECAUSE:
            return status(FINISHED, stop_reason or "")
        return {**status(FINISHED, ENDED_BECAUSE[self.ended_because]), "reason": self.ended_because}

    def finish(self) -> None:
        self.state, self.step_asked = FINISHED, False
        self.set_quiet()

    def reset(self) -> None:
        self.state, self.step_asked, self.computing, self.keep_steps = IDLE, False, False, None
        self.set_quiet()
        self.wake()

    def set_computing(self, on: bool) -> None:
        self.computing = on
        if on:
            self.quiet.clear()
        else:
            self.set_quiet()

    def step_sent(self) -> None:
        self.step_asked = False
        self.touch()
        self.set_quiet()

    def set_quiet(self) -> None:
        if not self.computing and not self.step_asked:
            self.quiet.set()

    def wake(self) -> None:
        self.changed.set()

    # ---- the client's verbs: each checks its state, then transitions ----------------------------
    def pause(self) -> dict:
        self._require(LIVE, "pause")
        if self.state in BEFORE_PREFILL:
            self.after_prefill = PAUSED
        else:
            self.state = PAUSED
        self.wake()
        return status(PAUSED)

    def resume(self) -> dict:
        self._require(LIVE, "resume")
        if self.state in BEFORE_PREFILL:
            self.after_prefill = RUNNING
        elif self.state == PAUSED:
            self.state = RUNNING
        self.wake()
        return status(RUNNING if self.state in BEFORE_PREFILL + (RUNNING,) else self.state)

    def step(self) -> None:
        """One step while paused; its answer is the `step` itself."""
        self._require(LIVE, "step")
        if self.state != PAUSED:
            raise ProtocolError("invalid_state", said("the run is %(state)s; step works on a paused run: send pause first",
                                                     state=self.state))
        if self.step_asked:
            raise ProtocolError("step_pending", said("the step asked for is still computing; step again once it arrives"))
        self.step_asked = True
        self.quiet.clear()
        self.wake()

    def stop(self, seen: int | None = None) -> None:
        """Stop wins from every live state: at most the step in flight, then `done`.

        `seen` is the last step the client had when it asked: the run keeps at most one step more, so the
        steps already on their way when the stop was read are dropped from the run (and `done` says so)."""
        self._require(LIVE, "stop")
        self.state, self.step_asked, self.keep_steps = STOPPING, False, None if seen is None else seen + 1
        self.set_quiet()
        self.wake()

    def check_stop(self) -> None:
        """A stop's state is checked before its fields (no run: `no_run`, whatever the frame holds)."""
        self._require(LIVE, "stop")

    def check_fork(self) -> None:
        self._require(LIVE + (FINISHED,), "fork")
        if self.state in BEFORE_PREFILL:
            raise ProtocolError("invalid_state", said("the run is still %(state)s; fork once it has a step",
                                                      state=self.state), "type")

    def fork(self) -> None:
        """A fork continues paused (from a finished run too)."""
        self.check_fork()
        self.state = PAUSED
        self.touch()
        self.wake()

    def _require(self, allowed: tuple[str, ...], verb: str) -> None:
        if self.state in allowed:
            return
        if self.state == IDLE:
            raise ProtocolError("no_run", said("start a run first"))
        if self.state == STOPPING:
            raise ProtocolError("stopping", said("the run is stopping: %(verb)s is refused; wait for done, then fork or start "
                                                 "again", verb=verb))
        raise ProtocolError("finished", said("the run has finished: %(verb)s is refused; fork or start again", verb=verb))

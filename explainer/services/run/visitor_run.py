"""One visitor's run: validates and starts it, steps it off the event loop, honours pause/stop/fork."""
from __future__ import annotations

import asyncio
import logging

from django.conf import settings

from explainer.protocol import ProtocolError, integer
from explainer.services.run import after_run_checks
from explainer.services.run.provenance import RunDigest
from explainer.services.admission import limits
from explainer.services.device import model_registry
from explainer.services.admission.capacity import generating
from explainer.services.device.executors import run_on, scheduler_for
from explainer.services.run.on_demand import READER_PAUSED, OnDemandAnswers
from explainer.services.run.opening import COUNTS_BURST, COUNTS_PER_S, OPEN_RUNS, Opening, live_sessions
from explainer.services.run.errors import ENGINE_ERRORS, OUT_OF_MEMORY, as_error, refusal
from explainer.services.run import paused
from explainer.services.run.pair import ComparedRun
from explainer.services.run.control import FINISHED, HELD, PAUSED, PAUSED_MEMORY, RUNNING, STOPPING, RunControl, status
from inference.engine import GenerationSession
from inference.wire.framing import Encoded, split_message
from explainer.messages import busy_payload
from inference.wire.said import said

log = logging.getLogger(__name__)
MAX_ACK = 2**53  # the largest integer a browser's JSON numbers hold exactly
class VisitorRun(ComparedRun, Opening, OnDemandAnswers):
    """One socket's run: its session, the driver task that steps it, and its control state (control.py).

    `start` answers with the prefill; after it, control verbs change the state and return at once and only
    the driver task steps the model, so a `stop` or an `ack` is read while a step computes. A reply (or
    refusal) made while a step is in flight or asked for is sent after that step, in request order.
    """

    def __init__(self, send, address: str | None = None):
        self.deliver = send  # async callable taking one message dict
        self.address = address  # the client's: its generation slots are capped per address
        self.window = limits.OutboundWindow(settings.EXPLAINER_OUTBOUND_WINDOW, settings.EXPLAINER_UNACKED_MAX)
        self.session: GenerationSession | None = None
        self.task: asyncio.Task | None = None
        self.checking: asyncio.Task | None = None  # the causal-mask check, after the prefill (Opening._causal_check)
        self.control = RunControl()
        self.deferred: list[dict] = []  # replies waiting behind the frame in flight
        self.holds_slot = False
        self.slot_limit: int | None = None  # the workshop host's cap on generation slots, as of the start
        # A host's broadcast: the teacher's pause is the teacher's, so it never idles out while the host's socket
        # (which owns this run, and ends it on leaving) is connected.
        self.keep_while_connected = False
        self.device = "cpu"
        self.sending = asyncio.Lock()  # a split message's parts go out back to back
        self.forking = False  # a fork is between its check and its forced step
        self.counting = limits.TokenBucket(COUNTS_PER_S, COUNTS_BURST)  # `tokenize` answers (Opening.tokenize)
        self.opened = asyncio.Event()  # clear while a start's prefill is under way (Opening.after_opening)
        self.opened.set()
        self.measuring: set[asyncio.Future] = set()  # measurements (and their progress sends) under way
        self.digest = RunDigest()  # what the page records, so its save can be told apart from a forged one

    async def send(self, message: dict) -> None:
        """Every message of this run goes out here, cut under the send cap, each frame counted (with its
        encoded size) for the outbound window."""
        text, cap = self.digest.saw(message) or getattr(message, "text", None), settings.EXPLAINER_MAX_SEND_BYTES
        if text and len(text) <= cap:  # one frame: the text its digest read (a larger one is cut from json.dumps)
            message = message if isinstance(message, Encoded) else Encoded(message, text)
        elif isinstance(message, Encoded):
            message = dict(message)  # cut into parts from json.dumps: part sizes are json.dumps sizes
        async with self.sending:
            for frame in split_message(message, cap):
                self.window.count_sent(await self.deliver(frame) or 0)

    async def reply(self, message: dict) -> None:
        """A verb's answer (or a refusal): now, or right after the step in flight or asked for."""
        if self.control.computing or self.control.step_asked:
            self.deferred.append(message)
        else:
            await self.send(message)

    async def _flush(self) -> None:
        while self.deferred:
            await self.send(self.deferred.pop(0))

    # ---- the driver -------------------------------------------------------------------------------
    async def _drive(self) -> None:
        """Step while the state says so, and end with `done` and the after_run_checks."""
        try:
            while await self._next_step_allowed():
                await self._one_step()
            await self._finish()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # e.g. out of memory: this visitor gets an error, the server goes on
            if not isinstance(exc, ProtocolError):
                log.exception("run failed")
            self.control.reset()
            await self._flush()
            await self._close_session()  # its cache may be what filled the memory; freed before the visitor hears
            await self._release()
            await self.send(as_error(exc))

    async def _next_step_allowed(self) -> bool:
        """Wait until a step may go (running with room in the window, or a `step` asked); False to finish."""
        control = self.control
        while True:
            control.changed.clear()
            if self._idle_too_long():
                control.idle_out()  # a paused crowd must not keep the slots: this run ends, its slot comes back
            # A fork asked for may revive a finished session: wait for it (it wakes us), don't finish under it.
            if control.state == STOPPING or (self.all_finished() and not self.forking):
                return False
            if control.step_asked or (control.state == RUNNING and not self.window.full):
                for session in self.sessions():
                    session.unhold()
                return True
            if control.state == RUNNING:  # a slow reader: hold until its acks make room
                control.hold()
                await self.send(status(HELD))
                continue
            if control.state == HELD and not self.window.full:
                control.unhold()
                await self.send(status(RUNNING))
                continue
            self._asks_no_step()
            if control.state == PAUSED and not control.computing:
                await self._wait_paused()
            else:
                await self._wait_for_change()

    def _asks_no_step(self) -> None:
        """Paused or held: no step until a verb comes. Waiting is not generation time (the timing figures leave it
        out), and the scheduler's next tick must not wait for this run's sessions."""
        for session in self.sessions():
            session.hold()
            scheduler_for(self.device).leave(session)

    async def _wait_paused(self) -> None:
        """Paused: the generation slot goes back, only the cache stays (within the paused runs' memory budget,
        which may end the least recently active paused run, this one too); until a verb changes the state."""
        await self._release()
        for victim in paused.enter(self, paused.session_bytes(self.session)):
            victim.control.idle_out(PAUSED_MEMORY)
        try:
            await self._wait_for_change()
        finally:
            paused.leave(self)

    def _idle_limit(self) -> float:
        """EXPLAINER_IDLE_RUN_S, or 0 (never) for a host's broadcast."""
        return 0.0 if self.keep_while_connected else settings.EXPLAINER_IDLE_RUN_S

    def _idle_too_long(self) -> bool:
        """Paused or held, nothing asked or in flight, and no progress for the idle limit (0: never)."""
        limit, control = self._idle_limit(), self.control
        return (limit > 0 and control.state in (PAUSED, HELD) and not control.step_asked
                and not control.computing and control.idle_for() >= limit)

    async def _wait_for_change(self) -> None:
        """Until a verb changes the state, or until the idle timeout is due (then the caller looks again)."""
        control, limit = self.control, self._idle_limit()  # a broadcast waits without a timer (no 10 ms spin)
        # A fork in flight is progress (it is never idled out): look again every half second until it is out.
        least = 0.5 if control.computing else 0.01
        try:  # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow end()'s cancel when the event is set too
            async with asyncio.timeout(None if limit <= 0 else max(limit - control.idle_for(), least)):
                await control.changed.wait()
        except TimeoutError:
            pass

    async def _one_step(self) -> None:
        self.control.set_computing(True)
        try:
            await self._step_runs()  # batched with others' steps; compare mode: both runs, then what parts them
        finally:
            self.control.set_computing(False)
        self.control.step_sent()
        await self._flush()

    async def _finish(self) -> None:
        keep = self.control.keep_steps
        if self.control.state == STOPPING:
            for session in self.sessions():
                if keep is not None and keep < session.step_index:
                    await run_on(self.device, session.truncate, keep)
                session.stop()  # here, between steps: no step in flight can overwrite it
        self.control.finish()
        await self._flush()
        await self._checked()  # the prefill's check, if still computing, goes out before `done`
        await self._flush()
        for session in self.sessions():
            await self.send(self._as_run(session, session.done_payload()))
        weights_before = model_registry.initial_checksum()
        weights_after = await after_run_checks.weights_after_run(self.device, self.session.model)
        for check in await run_on(self.device, after_run_checks.after_run, self.session, self.rows_before, weights_before, weights_after):
            await self.send(check)
        await self._release()  # free before the run's last word: a client may start again at once
        await self.send(self.control.finished_status(self.session.finished))

    async def _release(self) -> None:
        self._release_b()
        if self.holds_slot:
            self.holds_slot = False
            generating.release(self.address, held_s=self._held_s())

    def _require_session(self) -> GenerationSession:
        if self.session is None:
            raise ProtocolError("no_run", said("start a run first"))
        return self.session

    # ---- the control verbs: transitions of self.control --------------------------------------------
    async def pause(self, _message: dict) -> None:
        await self.reply(self.control.pause())

    async def resume(self, _message: dict) -> None:
        """A finished run has nothing to resume: a named error, never a `running` that never ends. A paused run
        holds no slot: it takes one again here, or hears `busy` (stepping still works)."""
        if self.control.state == PAUSED and not self.holds_slot:
            if (refused := generating.refusal(self.slot_limit, self.address)) is not None:
                await self.reply(busy_payload(said("no free generation slot to resume (%(refused)s); Step still works",
                                                  refused=refused), 5))
                return
            self._took_slot()
            if (refused := self._retake_b_slot()) is not None:
                self._give_back_a_slot()
                await self.reply(busy_payload(refused, 5))
                return
        await self.reply(self.control.resume())

    async def step(self, _message: dict) -> None:
        """One step while paused (a step while running is refused: it is already stepping)."""
        await self.after_opening()
        if self.control.state == PAUSED and not self.control.step_asked and await self._busy():
            return
        self.control.step()

    async def stop(self, message: dict) -> None:
        """Answered by `done` (stop_reason "stopped") once the step in flight, if any, is out.

        An optional `step` (the last step the client has) cuts the run at that step plus one."""
        self.control.check_stop()
        self.control.stop(integer(message, "step", 0, MAX_ACK, required=False))
        self._leave_line()  # a start waiting in line leaves it now

    async def fork(self, message: dict) -> None:
        """Force a token at a step; the run continues paused from there (a finished run too)."""
        await self.after_opening()
        session = self._require_session()
        step = integer(message, "step", 1, max(s.step_index for s in self.sessions()))
        token = integer(message, "token_id", 0, max(s.description.vocab_size for s in self.sessions()) - 1)
        plan = self._fork_plan(message, step, token)  # which runs go back (compare mode: one, or both)
        if await self._busy():
            return
        self.control.check_fork()
        if self.control.state == FINISHED and self.task is not None and not self.task.done():
            await asyncio.wait({self.task})  # the driver's tail (checks, `finished`) goes out first; then it restarts
        restart = self.task is None or self.task.done()
        self.control.fork()  # paused from here (a paused run holds no slot): the driver starts no new step
        self.forking = True  # from here until its step is out, the driver must not finish the run under it
        try:
            await self.control.quiet.wait()  # the step already in flight (at most one) goes out first
            self.control.set_computing(True)
            try:
                if self.b is not None:
                    await self._fork_pair(plan, step)
                else:  # a re-prefill (a fork at step 1) goes in chunks, like a start's
                    await run_on(self.device, session.rewind, step, token, owner=self.address)
                    await self.send(await self._chunked(session.forked_step, token))
            finally:
                self.control.set_computing(False)
            await self._flush()
        finally:
            self.forking = False
            self.control.wake()  # the driver looks again: the forked session may be finished (its last step forced)
        if restart:
            self.task = asyncio.create_task(self._drive())
        await self.send(status(PAUSED, said("forked: resume or step")))

    async def ack(self, message: dict) -> None:
        """The client has read `received` server messages on this socket; no reply (docs/protocol.md)."""
        self.window.ack(integer(message, "received", 0, MAX_ACK))
        self.control.wake()  # a held run looks at the window again

    async def end(self) -> None:
        """Cancel the driver and free the session's memory (on a new start or a disconnect): nothing more is sent."""
        try:
            self.control.reset()
            self.opened.set()
            if self.checking and not self.checking.done():
                self.checking.cancel()
            if self.task and not self.task.done():
                self.task.cancel()
                try:
                    await self.task
                except (asyncio.CancelledError, Exception):
                    pass
            await self._flush()  # answers to requests made before the end (a socket that closed ignores them)
            await self._close_session()
        finally:  # Daphne cancels a closing socket that takes too long: the slot must come back even then
            await self._release()

    async def _close_session(self) -> None:
        for session in self.sessions():  # a closed run's sessions ask for no step: no tick waits for them
            scheduler_for(self.device).leave(session)
        await self._close_b()
        if self.session is not None:
            session, self.session = self.session, None
            OPEN_RUNS.discard(self)
            await run_on(self.device, session.close)


__all__ = ["VisitorRun", "as_error", "refusal", "live_sessions", "READER_PAUSED", "MAX_ACK", "ENGINE_ERRORS", "OUT_OF_MEMORY"]

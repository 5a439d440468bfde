"""One visitor's run: validates and starts it, steps it off the event loop, honours pause/stop/fork."""
from __future__ import annotations

import asyncio
import logging
import weakref

import torch
from django.conf import settings

from explainer.protocol import DETAIL_WHATS, MEASURES, ProtocolError, choice, integer, number, prompt_fields
from explainer.services import checks, limits, measurements, model_registry, workshop_policy
from explainer.services.capacity import generating
from explainer.services.executors import queue_depth, run_on
from inference.engine import GenerationSession, SessionError
from inference.kept import NotKept
from inference.loading import ModelNotAvailable
from inference.ondemand import DetailError, detail, retemper
from inference.prompting import PromptError, build_prompt, validate_messages, validate_text
from inference.sampling import ParamError, SamplingParams
from inference.views import done_view, session_view

log = logging.getLogger(__name__)
ENGINE_ERRORS = (ParamError, PromptError, DetailError, SessionError, NotKept)
OUT_OF_MEMORY = (MemoryError, torch.OutOfMemoryError)
MAX_ACK = 2**53  # the largest integer a browser's JSON numbers hold exactly
READER_PAUSED = {"type": "status", "state": "paused", "message": "waiting for the client to read (ack)"}
_live: weakref.WeakSet = weakref.WeakSet()  # runs whose GenerationSession is open


def live_sessions() -> int:
    """How many runs in this process hold an open GenerationSession (the leak check's figure)."""
    return len(_live)


def as_error(exc: Exception) -> dict:
    """Engine exceptions carry a code and a field; everything else is a model error."""
    if isinstance(exc, NotKept):
        return {"type": "error", "code": "not_kept", "message": str(exc), "field": "step"}
    if isinstance(exc, ProtocolError):
        return exc.as_message()
    if isinstance(exc, ENGINE_ERRORS):
        return {"type": "error", "code": getattr(exc, "code", "invalid_value"), "message": str(exc),
                "field": getattr(exc, "field", None)}
    if isinstance(exc, OUT_OF_MEMORY):
        return {"type": "error", "code": "out_of_memory", "field": None,
                "message": "the server ran out of memory for this run; try a shorter prompt or fewer new tokens"}
    return {"type": "error", "code": "model_error", "message": f"the model failed: {exc.__class__.__name__}", "field": None}


def refusal(exc: Exception) -> dict:
    """The `error` for a refused client message; anything but a ProtocolError is logged too."""
    if not isinstance(exc, ProtocolError):
        log.info("refused message: %s", exc)
    return as_error(exc)


class VisitorRun:
    """The state of one socket: at most one generation session, its stepping task and its controls."""

    def __init__(self, send):
        self.deliver = send  # async callable taking one message dict
        self.window = limits.OutboundWindow(settings.EXPLAINER_OUTBOUND_WINDOW, settings.EXPLAINER_UNACKED_MAX)
        self.session: GenerationSession | None = None
        self.task: asyncio.Task | None = None
        self.running = asyncio.Event()  # set = keep stepping, clear = paused
        self.holds_slot = False
        self.device = "cpu"

    async def send(self, message: dict) -> None:
        """Every message of this run goes out here, counted for the outbound window."""
        self.window.count_sent()
        await self.deliver(message)

    async def start(self, message: dict) -> None:
        fields = prompt_fields(message)
        await self.end()
        fields, slots = await workshop_policy.apply_to_start(fields)  # the workshop host's pins and limits
        if not generating.try_acquire(slots):
            await self.send({"type": "busy", "reason": f"{min(slots, generating.limit)} visitors are generating already",
                             "retry_after_s": 5})
            return
        self.holds_slot = True
        try:
            await self._open(fields)
        except Exception as exc:  # a refused prompt or a model failure ends this run only
            await self._close_session()
            await self._release()
            raise _wrapped(exc) from exc

    async def _open(self, fields: dict) -> None:
        # Refuse bad parameters and messages before anything waits on the model.
        params = SamplingParams.from_dict(fields["params"], max_new_tokens_cap=settings.EXPLAINER_MAX_NEW_TOKENS)
        if fields["text"] is None:  # prompt_fields made sure exactly one of the two is there
            fields["messages"] = validate_messages(fields["messages"])
        else:
            fields["text"] = validate_text(fields["text"])
        if not model_registry.is_loaded():
            await self.send({"type": "status", "state": "loading", "message": "Loading the model…"})
        try:
            loaded = await run_on("loader", model_registry.get_model)
        except ModelNotAvailable as exc:
            raise ProtocolError("model_error", str(exc)) from None
        self.device = loaded.description.device
        prompt = await run_on(self.device, lambda: build_prompt(loaded.tokenizer, messages=fields["messages"], text=fields["text"]))
        if len(prompt.ids) > settings.EXPLAINER_MAX_PROMPT_TOKENS:
            raise ProtocolError("out_of_range", f"the prompt has {len(prompt.ids)} tokens; the limit is "
                                f"{settings.EXPLAINER_MAX_PROMPT_TOKENS}", "messages")
        self.session = GenerationSession(loaded, prompt, params)
        _live.add(self)
        await self.send(session_view(self.session))
        await self.send(await run_on(self.device, self.session.prefill))
        await self.send(await run_on(self.device, checks.causal_mask, self.session))
        self.rows_before = await run_on(self.device, checks.embedding_rows, self.session)
        self.running.clear() if fields["paused"] else self.running.set()
        if fields["paused"]:
            self.session.hold()  # paused time is not generation time (the timing figures)
        await self.send({"type": "status", "state": "paused" if fields["paused"] else "running", "message": ""})
        self.task = asyncio.create_task(self._step_loop())

    async def _step_loop(self) -> None:
        """Step while running; between steps honour pause and stop. Ends with `done` and the checks."""
        try:
            while not self.session.finished:
                await self.running.wait()
                if self.session.finished:
                    break
                if self.window.full:  # then look again: the visitor may have paused or stopped meanwhile
                    await self._wait_for_reader()
                    continue
                await self.send(await run_on(self.device, self.session.step))
            await self._finish()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # e.g. out of memory: this visitor gets an error, the server goes on
            log.exception("run failed")
            await self._close_session()  # its cache may be what filled the memory; freed before the visitor hears
            await self._release()
            await self.send(as_error(exc))

    async def _wait_for_reader(self) -> None:
        """A slow client: pause (saying so once) until its acks bring the unread messages back within the window."""
        await self.send(READER_PAUSED)
        await self.window.wait_for_room(lambda: self.session.finished)
        if self.running.is_set() and not self.session.finished:
            await self.send({"type": "status", "state": "running", "message": ""})

    async def _finish(self) -> None:
        await self.send(done_view(self.session))
        weights_before = model_registry.initial_checksum()
        for check in await run_on(self.device, checks.after_run, self.session, self.rows_before, weights_before):
            await self.send(check)
        await self.send({"type": "status", "state": "finished", "message": self.session.finished})
        await self._release()

    async def _release(self) -> None:
        if self.holds_slot:
            self.holds_slot = False
            generating.release()

    def _require_session(self) -> GenerationSession:
        if self.session is None:
            raise ProtocolError("no_run", "start a run first")
        return self.session

    def _require_unfinished(self) -> GenerationSession:
        session = self._require_session()
        if session.finished:
            raise ProtocolError("finished", f"the run has finished ({session.finished}); fork or start again")
        return session

    async def pause(self, _message: dict) -> None:
        self._require_unfinished().hold()
        self.running.clear()
        await self.send({"type": "status", "state": "paused", "message": ""})

    async def resume(self, _message: dict) -> None:
        self._require_unfinished().unhold()  # a finished run has nothing to resume: no `running` that never ends
        self.running.set()
        await self.send({"type": "status", "state": "running", "message": ""})

    async def step(self, _message: dict) -> None:
        """One step while paused (a step while running is refused: it is already stepping)."""
        session = self._require_unfinished()
        if self.running.is_set():
            raise ProtocolError("invalid_state", "the run is not paused; send pause first")
        if await self._busy():
            return
        session.unhold()
        payload = await run_on(self.device, session.step)
        session.hold()  # still paused: only the step itself counts
        await self.send(payload)
        if session.finished:
            await self._wait_for_loop()

    async def stop(self, _message: dict) -> None:
        session = self._require_unfinished()
        session.stop()
        session.unhold()
        self.running.set()  # wake a paused loop so it reaches done
        self.window.wake()
        await self._wait_for_loop()

    async def _wait_for_loop(self) -> None:
        self.running.set()
        if self.task:
            await asyncio.shield(self.task)

    async def fork(self, message: dict) -> None:
        session = self._require_session()
        step = integer(message, "step", 1, session.step_index)
        token = integer(message, "token_id", 0, session.description.vocab_size - 1)
        if await self._busy():
            return
        self.running.clear()  # a fork continues paused: the visitor resumes or steps
        session.unhold()
        payload = await run_on(self.device, session.fork, step, token)
        session.hold()
        await self.send(payload)
        if self.task is None or self.task.done():
            if not self.holds_slot and not generating.try_acquire():
                await self.send({"type": "busy", "reason": "no free generation slot to continue the fork", "retry_after_s": 5})
                return
            self.holds_slot = True
            self.task = asyncio.create_task(self._step_loop())
        await self.send({"type": "status", "state": "paused", "message": "forked: resume or step"})

    async def ack(self, message: dict) -> None:
        """The client has read `received` server messages on this socket; no reply (docs/protocol.md)."""
        self.window.ack(integer(message, "received", 0, MAX_ACK))

    async def _busy(self, device: str | None = None) -> bool:
        """Refuse a request for a payload with `busy` while the client is behind on reading, or (given a
        device) while more than EXPLAINER_MAX_DEVICE_QUEUE model calls wait for it: nothing is queued."""
        if self.window.full:
            reason = READER_PAUSED["message"]
        elif device is not None and (waiting := queue_depth(device)) > settings.EXPLAINER_MAX_DEVICE_QUEUE:
            reason = f"{waiting} model calls are waiting for the device"
        else:
            return False
        await self.send({"type": "busy", "reason": reason, "retry_after_s": 1})
        return True

    async def detail(self, message: dict) -> None:
        session = self._require_session()
        what = choice(message, "what", DETAIL_WHATS)
        args = {k: integer(message, k, 0, required=False) for k in ("step", "layer", "head", "position")}
        if await self._busy(self.device):
            return
        await self.send(await run_on(self.device, lambda: detail(session, what, **args)))

    async def retemper(self, message: dict) -> None:
        session = self._require_session()
        step = integer(message, "step", 1, session.step_index)
        changes = {k: number(message, k) for k in ("temperature", "top_p", "min_p")}
        changes["top_k"] = integer(message, "top_k", 0, required=False)
        if await self._busy(self.device):
            return
        await self.send(await run_on(self.device, lambda: retemper(session, step, **changes)))

    async def measure(self, message: dict) -> None:
        """A serving-view measurement on this server's model (the visitor's prompt when there is a run)."""
        what = choice(message, "what", MEASURES)
        if not model_registry.is_loaded():
            await self.send({"type": "status", "state": "loading", "message": "Loading the model…"})
        device = self.device if self.session else (await run_on("loader", model_registry.get_model)).description.device
        if await self._busy(device):
            return
        await self.send(await run_on(device, measurements.measure, what, message, self.session))

    async def end(self) -> None:
        """Cancel the stepping task and free the session's memory (on a new start or a disconnect)."""
        try:
            if self.task and not self.task.done():
                if self.session:
                    self.session.stop()
                self.running.set()
                self.window.wake()
                self.task.cancel()
                try:
                    await self.task
                except (asyncio.CancelledError, Exception):
                    pass
            await self._close_session()
        finally:  # Daphne cancels a closing socket that takes too long: the slot must come back even then
            await self._release()

    async def _close_session(self) -> None:
        if self.session is not None:
            session, self.session = self.session, None
            _live.discard(self)
            await run_on(self.device, session.close)


def _wrapped(exc: Exception) -> ProtocolError:
    """The same error fields as as_error, raised as a ProtocolError; model failures are logged."""
    error = as_error(exc)
    if error["code"] == "model_error":
        log.exception("start failed")
    return ProtocolError(error["code"], error["message"], error["field"])

"""A run's start: checked before it takes a slot, then prefilled (batched with others joining now, or alone in
chunks) and checked, all while the socket can still read a stop. Mixed into VisitorRun (visitor_run.py)."""
from __future__ import annotations

import asyncio
import logging
import weakref

from django.conf import settings

from explainer.messages import busy_payload, tokenized_payload
from explainer.protocol import ProtocolError, integer, prompt_fields
from explainer.services.device import model_registry
from explainer.services.device.executors import FIRST_TOKEN, arrivals, executor_for, run_on, scheduler_for
from explainer.services.run import after_run_checks
from explainer.services.run.control import PREFILLING, STOPPING, status
from explainer.services.admission.limits import RateLimited
from explainer.services.run.errors import as_error, wrapped
from explainer.services.run.in_line import InLine
from explainer.services.run.on_demand import LOADING
from explainer.services.workshop import policy
from inference.batched_prefill import MOST_PROMPT_TOKENS
from inference.engine import GenerationSession
from inference.loading import ModelNotAvailable
from inference.prompting import PromptError, build_prompt, typed_tokens, validate_messages, validate_text
from inference.sampling import SamplingParams, with_fresh_seed
from inference.wire.said import said, told

COUNTS_PER_S, COUNTS_BURST = 4, 8  # `tokenize` answers a socket may have (the page asks once typing pauses)
CHARS_PER_TOKEN = 64  # more characters than this per allowed token cannot fit: refused before tokenizing
log = logging.getLogger(__name__)
OPEN_RUNS: weakref.WeakSet = weakref.WeakSet()  # runs whose GenerationSession is open


def too_long(prompt, loaded) -> str:
    """The refusal of a prompt past the server's cap, which is not the model's context window."""
    added = len(prompt.ids) - typed_tokens(prompt)
    return said("the prompt has %(tokens)s tokens (%(added)s of them added by the chat template); this server takes at "
                "most %(most)s prompt tokens a run, to keep every visitor's wait short (the model's own context window "
                "is %(window)s tokens)", tokens=len(prompt.ids), added=added, most=settings.EXPLAINER_MAX_PROMPT_TOKENS,
                window=f"{loaded.description.context_window:,}")


def validated(fields: dict) -> dict:
    """The fields with their messages or text checked (prompt_fields made sure exactly one of the two is there)."""
    if fields["text"] is None:
        return {**fields, "messages": validate_messages(fields["messages"])}
    return {**fields, "text": validate_text(fields["text"])}


def live_sessions() -> int:
    """How many runs in this process hold an open GenerationSession (the leak check's figure)."""
    return len(OPEN_RUNS)


class Opening(InLine):
    """`start` and what it runs before the driver takes over (VisitorRun's state, send and end)."""

    async def start(self, message: dict) -> None:
        arrival = arrivals().coming()  # a class's starts read together share one prefill pass
        try:
            await self._start(message, arrival)
        except BaseException:
            arrival.here()
            raise

    async def _start(self, message: dict, arrival) -> None:
        fields = prompt_fields(message)
        await self.end()
        fields, slots = await policy.apply_to_start(fields)  # the workshop host's pins and limits
        # Refuse bad parameters, messages and prompt lengths before taking a slot or touching the model.
        # No seed: a fresh one, sent back in the session payload's params so the visitor can reproduce the run.
        params = SamplingParams.from_dict(with_fresh_seed(fields["params"]), max_new_tokens_cap=settings.EXPLAINER_MAX_NEW_TOKENS)
        fields = validated(fields)
        loaded, prompt = await self._tokenized(fields)  # refused here, before a slot is taken
        await self._asked_b(message, fields, params, loaded)  # compare mode: run B's parameters and model, checked
        if (refused := self._admit(slots) or self._refused_b_slot()) is not None:  # slots now, a place in line, or `busy`
            arrival.here()
            await self.send(busy_payload(refused, 5))
            return
        self.control.begin(fields["paused"], queued=self.ticket is not None)
        # The prefill runs in the driver's task, so the socket reads a stop or a pause while it computes; until the
        # start's own answers are out, later answers wait (reply()), as they did when start was awaited.
        self.control.set_computing(True)
        self.opened.clear()
        self.task = asyncio.create_task(self._open_and_drive(loaded, prompt, params, arrival))
        self.task.add_done_callback(lambda _: arrival.here())  # also a task cancelled before it ever ran

    async def after_opening(self) -> None:
        """Verbs that need the prefill (step, fork, detail, retemper, measure) wait for the start's answers, as when
        start held the socket; stop, pause, resume and ack act at once."""
        await self.opened.wait()

    async def _open_and_drive(self, loaded, prompt, params: SamplingParams, arrival) -> None:
        """prefilling, then the driver; a failed start ends this run only, with a named error. `arrival`: this start
        on its way to the prefill (here() when it asks for it, waits in line, or fails)."""
        try:  # prefilling: the start's answers (session, prefill, check, status) come before any later message's
            if self.ticket is not None:
                arrival.here()  # a place in line: no pass waits for it
                if not await self._wait_in_line():
                    await self._left_line()
                    return
            prefilled = await self._open(loaded, prompt, params, arrival)
        except BaseException as exc:  # a model failure, or the socket cancelled mid-prefill
            arrival.here()
            self.control.reset()
            await self._release()  # first: no await inside, so a second cancellation cannot skip it
            self.opened.set()
            await self._close_session()
            if not isinstance(exc, Exception):
                raise
            await self.send(wrapped(exc).as_message())
            await self._flush()
            return
        self.opened.set()
        if prefilled:
            await self._drive()
        else:
            await self._stopped_in_prefill()

    async def _tokenized(self, fields: dict):
        """The loaded model and the prompt as it reads it, within EXPLAINER_MAX_PROMPT_TOKENS."""
        loaded, prompt = await self._read(fields)
        if len(prompt.ids) > settings.EXPLAINER_MAX_PROMPT_TOKENS:
            raise ProtocolError("out_of_range", too_long(prompt, loaded), "messages")
        return loaded, prompt

    async def _read(self, fields: dict):
        """The loaded model and the prompt as its tokenizer reads it (refused unread when far too long)."""
        typed = sum(len(m["content"]) for m in fields["messages"]) if fields["text"] is None else len(fields["text"])
        if typed > settings.EXPLAINER_MAX_PROMPT_TOKENS * CHARS_PER_TOKEN:  # too long for any tokenizer: no device call
            raise ProtocolError("out_of_range", said("the prompt has %(typed)s characters, far past the limit of "
                                                     "%(most)s tokens", typed=typed,
                                                     most=settings.EXPLAINER_MAX_PROMPT_TOKENS), "messages")
        if not model_registry.is_loaded():
            await self.send(LOADING)
        try:
            loaded = await run_on("loader", model_registry.get_model)
        except ModelNotAvailable as exc:
            raise ProtocolError("model_error", told(exc)) from None
        self.device = loaded.description.device
        # Off the model thread: the tokenizer alone, bounded by CHARS_PER_TOKEN, never waits behind forward passes
        prompt = await asyncio.to_thread(build_prompt, loaded.tokenizer, messages=fields["messages"], text=fields["text"])
        return loaded, prompt

    async def tokenize(self, message: dict) -> None:
        """The prompt's token count while the visitor types (`tokenized`): the tokenizer alone, no slot, no run. A
        prompt it cannot count is answered in `tokenized.error` (the page's count line shows it, not its banner)."""
        seq = None  # echoed only when it is valid
        try:
            seq = integer(message, "seq", 0, 2**53, required=False)
            if (wait := self.counting.take()) > 0:
                raise RateLimited(round(wait, 2))
            loaded, prompt = await self._read(validated(prompt_fields({**message, "params": {}})))
        except (ProtocolError, PromptError) as exc:
            await self.reply({**tokenized_payload(seq), "error": as_error(exc)})
            return
        await self.reply(tokenized_payload(seq, len(prompt.ids), typed_tokens(prompt), settings.EXPLAINER_MAX_PROMPT_TOKENS,
                                           loaded.description.context_window))

    async def _open(self, loaded, prompt, params: SamplingParams, arrival) -> bool:
        """prefilling (computing since start): the prefill, then the causal-mask check started off the first
        token's path; then running or paused as asked (or stopping). False when a stop came between the prompt's
        chunks: the prefill ended there."""
        self.session = GenerationSession(loaded, prompt, params, prefill_chunk=settings.EXPLAINER_PREFILL_CHUNK or None)
        OPEN_RUNS.add(self)
        try:
            await self.send(self.session.session_payload())
            await self.send(self._prefilling())
            # Before the prefill, so that nothing stands between it and step 1 (which a tick samples from it)
            self.rows_before = await run_on(self.device, after_run_checks.embedding_rows, self.session, owner=FIRST_TOKEN)
            prefill = await self._prefill(arrival)
            if prefill is None:
                return False
            await self.send(prefill)
            if self.control.state != STOPPING:  # off the first token's path: decode ticks run between its calls
                self.checking = asyncio.create_task(self._causal_check(self.session))
                await self._open_b()  # compare mode: run B's session and prefill
        finally:
            self.control.set_computing(False)
        self.control.prefilled()
        await self.send(status(self.control.after_prefill))  # the start's answer: what it asked for
        await self._flush()  # then what pause/resume said meanwhile
        return True

    async def _causal_check(self, session) -> None:
        """The causal-mask check of this prompt, sent as `check` when it is in (before the run's `done`)."""
        try:
            check = await after_run_checks.causal_mask_on(self.device, session, self.address)
        except Exception:  # noqa: BLE001 - the run goes on without this check; the log says why
            log.exception("causal-mask check failed")
            return
        await self.reply(check)

    async def _checked(self) -> None:
        """Wait for the run's causal-mask check to be out (the run's `done` comes after it)."""
        if self.checking is not None and not self.checking.done():
            await asyncio.wait({self.checking})

    def _prefilling(self) -> dict:
        """The prefill's progress: prompt tokens in the cache so far, of the prompt's (one status per chunk)."""
        fed, total = self.session.fed, len(self.session.ids)
        reading = said("reading the prompt: %(fed)s of %(total)s tokens", fed=fed, total=total)
        return {**status(PREFILLING, reading), "prefilled_tokens": fed, "prompt_tokens": total}

    async def _stopped_in_prefill(self) -> None:
        """A stop read between the prompt's chunks: no step, no checks; the run's `done` (stopped) and `finished`."""
        self.session.stop()
        self.control.finish()
        await self._flush()
        await self.send(self.session.done_payload())
        self.b_asked = None  # a stop read before run B opened: it never does
        await self._release()
        await self.send(self.control.finished_status(self.session.finished))

    async def _prefill(self, arrival) -> dict | None:
        """With the other visitors joining now (one batched pass), or a long prompt alone in chunks, each its
        own device call: decode ticks run between them, and a stop read between them ends the prefill (None)."""
        arrival.here()  # no await before its request: a pass waiting for it finds it queued
        if self.session.prefill_fits_one_pass(MOST_PROMPT_TOKENS):
            return await scheduler_for(self.device).prefill(self.session)
        return await self._chunked(self.session.prefill, opening=True)

    async def _chunked(self, last, *args, opening: bool = False):
        """The prompt's chunks, one device call each (other visitors' ticks run between; while they decode, each
        chunk is about one tick's time), then `last(*args)`. `opening`: a start's prefill, which says its
        progress after each chunk and ends (None) at a stop."""
        executor, most = executor_for(self.device), settings.EXPLAINER_PREFILL_CHUNK
        while True:
            tokens = executor.chunk_tokens(most)
            if not await run_on(self.device, self.session.prefill_part, tokens, owner=self.address, tokens=tokens):
                break
            if opening:
                if self.control.state == STOPPING:
                    return None
                await self.send(self._prefilling())
        left = len(self.session.ids) - self.session.fed
        return await run_on(self.device, last, *args, owner=self.address, tokens=left if self.session.pending is None else 0)

"""A run's start: checked before it takes a slot, then prefilled (batched with others joining now, or alone in
chunks) and checked, all while the socket can still read a stop. Mixed into VisitorRun (visitor_run.py)."""
from __future__ import annotations

import asyncio
import weakref

from django.conf import settings

from explainer.messages import busy_payload
from explainer.protocol import ProtocolError, prompt_fields
from explainer.services.admission.capacity import generating
from explainer.services.device import model_registry
from explainer.services.device.executors import executor_for, run_on, scheduler_for
from explainer.services.run import after_run_checks
from explainer.services.run.control import status
from explainer.services.run.errors import wrapped
from explainer.services.run.on_demand import LOADING
from explainer.services.workshop import policy
from inference.batched_prefill import MOST_PROMPT_TOKENS
from inference.engine import GenerationSession
from inference.loading import ModelNotAvailable
from inference.prompting import build_prompt, validate_messages, validate_text
from inference.sampling import SamplingParams, with_fresh_seed

CHARS_PER_TOKEN = 64  # more characters than this per allowed token cannot fit: refused before tokenizing
OPEN_RUNS: weakref.WeakSet = weakref.WeakSet()  # runs whose GenerationSession is open


def live_sessions() -> int:
    """How many runs in this process hold an open GenerationSession (the leak check's figure)."""
    return len(OPEN_RUNS)


class Opening:
    """`start` and what it runs before the driver takes over (VisitorRun's state, send and end)."""

    async def start(self, message: dict) -> None:
        fields = prompt_fields(message)
        await self.end()
        fields, slots = await policy.apply_to_start(fields)  # the workshop host's pins and limits
        # Refuse bad parameters, messages and prompt lengths before taking a slot or touching the model.
        # No seed: a fresh one, sent back in the session payload's params so the visitor can reproduce the run.
        params = SamplingParams.from_dict(with_fresh_seed(fields["params"]), max_new_tokens_cap=settings.EXPLAINER_MAX_NEW_TOKENS)
        if fields["text"] is None:  # prompt_fields made sure exactly one of the two is there
            fields["messages"] = validate_messages(fields["messages"])
        else:
            fields["text"] = validate_text(fields["text"])
        loaded, prompt = await self._tokenized(fields)  # refused here, before a slot is taken
        if (refused := generating.refusal(slots, self.address)) is not None:
            await self.send(busy_payload(refused, 5))
            return
        self.holds_slot, self.slot_limit = True, slots
        self.control.begin(fields["paused"])
        try:  # prefilling: the start's reply (session, prefill, status) comes before any later message's
            await self._open(loaded, prompt, params)
        except BaseException as exc:  # a model failure, or the socket cancelled mid-prefill
            self.control.reset()
            await self._release()  # first: no await inside, so a second cancellation cannot skip it
            await self._close_session()
            if isinstance(exc, Exception):  # ends this run only, with a named error
                raise wrapped(exc) from exc
            raise
        self.task = asyncio.create_task(self._drive())

    async def _tokenized(self, fields: dict):
        """The loaded model and the prompt as it reads it, within EXPLAINER_MAX_PROMPT_TOKENS."""
        typed = sum(len(m["content"]) for m in fields["messages"]) if fields["text"] is None else len(fields["text"])
        if typed > settings.EXPLAINER_MAX_PROMPT_TOKENS * CHARS_PER_TOKEN:  # too long for any tokenizer: no device call
            raise ProtocolError("out_of_range", f"the prompt has {typed} characters, far past the limit of "
                                f"{settings.EXPLAINER_MAX_PROMPT_TOKENS} tokens", "messages")
        if not model_registry.is_loaded():
            await self.send(LOADING)
        try:
            loaded = await run_on("loader", model_registry.get_model)
        except ModelNotAvailable as exc:
            raise ProtocolError("model_error", str(exc)) from None
        self.device = loaded.description.device
        # Off the model thread: the tokenizer alone, bounded by CHARS_PER_TOKEN, never waits behind forward passes
        prompt = await asyncio.to_thread(build_prompt, loaded.tokenizer, messages=fields["messages"], text=fields["text"])
        if len(prompt.ids) > settings.EXPLAINER_MAX_PROMPT_TOKENS:
            raise ProtocolError("out_of_range", f"the prompt has {len(prompt.ids)} tokens; the limit is "
                                f"{settings.EXPLAINER_MAX_PROMPT_TOKENS}", "messages")
        return loaded, prompt

    async def _open(self, loaded, prompt, params: SamplingParams) -> None:
        """prefilling: prefill and the causal-mask check; then running or paused as asked (or stopping)."""
        self.session = GenerationSession(loaded, prompt, params, prefill_chunk=settings.EXPLAINER_PREFILL_CHUNK or None)
        OPEN_RUNS.add(self)
        self.control.set_computing(True)
        try:
            await self.send(self.session.session_payload())
            await self.send(await self._prefill())
            await self.send(await after_run_checks.causal_mask_on(self.device, self.session, self.address))
            self.rows_before = await run_on(self.device, after_run_checks.embedding_rows, self.session, owner=self.address)
        finally:
            self.control.set_computing(False)
        self.control.prefilled()
        await self.send(status(self.control.after_prefill))  # the start's answer: what it asked for
        await self._flush()  # then what pause/resume said meanwhile

    async def _prefill(self) -> dict:
        """With the other visitors joining now (one batched pass), or a long prompt alone in chunks, each its
        own device call: decode ticks run between them."""
        if self.session.prefill_fits_one_pass(MOST_PROMPT_TOKENS):
            return await scheduler_for(self.device).prefill(self.session)
        return await self._chunked(self.session.prefill)

    async def _chunked(self, last, *args):
        """The prompt's chunks, one device call each (other visitors' ticks run between; while they decode, each
        chunk is about one tick's time), then `last(*args)`."""
        executor, most = executor_for(self.device), settings.EXPLAINER_PREFILL_CHUNK
        while True:
            tokens = executor.chunk_tokens(most)
            if not await run_on(self.device, self.session.prefill_part, tokens, owner=self.address, tokens=tokens):
                break
        left = len(self.session.ids) - self.session.fed
        return await run_on(self.device, last, *args, owner=self.address, tokens=left if self.session.pending is None else 0)

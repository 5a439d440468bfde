"""The step engine: one generation session = prompt, prefill, then one token at a time with the KV cache.

    session = GenerationSession(loaded, build_prompt(tok, messages=[...]), SamplingParams(...))
    session.prefill()          # -> prefill payload
    while not session.finished:
        session.step()         # -> step payload (sampled from the previous forward's logits)

Step n samples from the logits of the forward pass before it: step 1 from the prefill's last
position, step n > 1 from a decode forward on step n-1's token. Pausing is simply not calling step().
"""
from __future__ import annotations

import time
from dataclasses import replace

import torch
from transformers.cache_utils import DynamicLayer

from . import capture_records
from .capture import lens_layers, residual_stream, top_tokens
from .forward import ForwardRow, aligned_attentions, joined_parts, last_rows, one_thread, plain_cache, synchronize
from .kept_steps import KeptSteps
from .kvstats import cache_stats
from .loading import LoadedModel
from .prefix_cache import PrefixStart
from .prompting import Prompt
from .sampling import ParamError, SamplingParams, sample_token
from .wire import builders
from .wire.said import said


class ContextWindowError(ParamError):
    """Prompt + max_new_tokens do not fit the model's context window."""


class SessionError(RuntimeError):
    """An operation the session's state does not allow (e.g. step after the run finished)."""

    def __init__(self, message: str, code: str = "invalid_state"):
        super().__init__(message)
        self.code = code


class GenerationSession:
    def __init__(self, loaded: LoadedModel, prompt: Prompt, params: SamplingParams,
                 lens: str = "auto", keep_budget_bytes: int | None = None, prefill_chunk: int | None = None):
        self.loaded, self.model, self.tokenizer = loaded, loaded.model, loaded.tokenizer
        self.adapter, self.description = loaded.adapter, loaded.description
        self.prompt, self.params = prompt, params
        window = self.description.context_window
        if len(prompt.ids) + params.max_new_tokens > window:
            raise ContextWindowError("max_new_tokens", said(
                "prompt (%(prompt)s tokens) + max_new_tokens (%(new)s) exceeds the context window (%(window)s)",
                prompt=len(prompt.ids), new=params.max_new_tokens, window=window), "context_window")
        d = self.description
        self.lens_layers = lens_layers(d.layers, d.vocab_size, lens, d.parameters, d.hidden_size)
        if not self.adapter.lens_ok:
            self.lens_layers = [d.layers - 1]  # read from the model's own logits
        self.kept = KeptSteps(keep_budget_bytes) if keep_budget_bytes else KeptSteps()
        self.prefill_chunk = prefill_chunk  # tokens per prefill_part(); None: the prompt in one pass
        self.eos_ids = eos_token_ids(loaded)
        self.special_ids = set(self.tokenizer.all_special_ids)
        self._reset()

    def _reset(self) -> None:
        self.ids = list(self.prompt.ids)  # every token so far: prompt, then generated
        self.cache = None  # the model makes the cache it needs (dynamic, sliding, recurrent) on the first forward
        self.step_index = 0
        self.pending = None  # the last forward's capture: what the next step samples from
        self.ahead: ForwardRow | None = None  # the next step's forward, run ahead of its step (forward_ahead)
        self.last_draw: tuple[torch.Tensor, torch.Tensor] | None = None  # (raw logits, final probs), (vocab,) each
        self.finished: str | None = None
        self.emitted_text = ""
        self.started = self.first_token_at = None
        self.parts: list[ForwardRow] = []  # the prompt's chunks fed so far (prefill_part)
        self.prefill_hidden: torch.Tensor | None = None  # until the causal-mask check takes it
        self.prefill_batched = False  # the prefill was a row of a batched pass (its residuals may differ in the last bit)
        self.prefill_chunked: list[int] | None = None  # the chunks' sizes when the prompt went in chunks (prefill_part)
        self.fed = 0  # prompt positions in the cache
        self.cached_tokens = 0  # prompt positions taken from the prefix cache, not computed (start_from_prefix)
        self.prefix: PrefixStart | None = None  # that prefix's keys, values and residuals, until the causal-mask check takes it
        self.looked_up = False  # the prefix cache was asked for this prefill
        self.held_at: float | None = None  # paused since (hold/unhold): left out of the timing figures
        self.kept.clear()

    @property
    def prompt_length(self) -> int:
        return len(self.prompt.ids)

    @property
    def generated(self) -> list[int]:
        return self.ids[self.prompt_length:]

    # -- forward passes ---------------------------------------------------------------------------
    @torch.no_grad()
    def _forward(self, new_ids: list[int]) -> ForwardRow:
        """Run new_ids through the model on top of the cache; capture attentions and residuals.

        A model without a cache (adapter.has_cache False) reads the whole sequence every time."""
        cached = self.adapter.has_cache
        input_ids = torch.tensor([new_ids if cached else self.ids], device=self.model.device)  # (1, new)
        with residual_stream(self.model, self.adapter) as residuals:
            t0 = time.perf_counter()
            out = self.model(input_ids=input_ids, cache=self.cache if cached else None, use_cache=cached,
                             output_attentions=True, logits_to_keep=1)
            synchronize(self.model.device)
            t1 = time.perf_counter()
        self.cache = out.cache if cached else None
        # layers x (heads, new, keys), stacked only where small; models without attention return none
        attentions = aligned_attentions(getattr(out, "attentions", None), input_ids.shape[1], len(self.ids), self.description.layers)
        return ForwardRow(logits=out.logits[0, -1].float(), hidden=torch.stack([r[0] for r in residuals]),
                          last_attn=last_rows(attentions, input_ids.shape[1]), forward_ms=(t1 - t0) * 1e3,
                          ended_at=t1, attentions=attentions, source="prefill" if self.pending is None else "decode")

    def prefill(self) -> dict:
        if self.pending is not None or self.step_index:
            raise SessionError(said("prefill already ran"))
        self.started = self.started or time.perf_counter()
        self.start_from_prefix()
        while self.prefill_part():
            pass
        row = self._forward(self.ids[self.fed:])
        # The causal-mask check feeds the changed prompt through the same pass or chunks and compares (float32)
        row = self._joined(row)
        # A prefix from the cache was computed in another pass: the check runs two lone passes instead (no twin
        # fed through chunks that could differ from it in the last bit, then two lone passes anyway)
        self.prefill_hidden = row.hidden if self.adapter.has_cache and not self.cached_tokens else None
        self.parts, self.fed = [], len(self.ids)
        with one_thread():
            return self._captured_prefill(row)

    def _joined(self, row: ForwardRow) -> ForwardRow:
        """The prompt's parts fed so far (chunks, or a cached prefix) and this last row as one prefill row."""
        self.prefill_chunked = [p.hidden.shape[1] for p in self.parts] + [row.hidden.shape[1]] if self.parts else None
        return joined_parts(self.parts + [row], len(self.ids)) if self.parts else row

    def prefill_fits_one_pass(self, most_tokens: int) -> bool:
        """Whether this prefill can be a row of a batched pass: not begun (or begun only from the prefix cache),
        cached, what is left of the prompt in one chunk."""
        limit = min(self.prefill_chunk or most_tokens, most_tokens)
        if self.pending is not None or self.step_index or not self.adapter.has_cache or self.fed != self.cached_tokens:
            return False
        return self.prompt_left() <= limit

    def prompt_left(self) -> int:
        """The prompt positions its prefill will compute: all but the longest prefix in the prefix cache (a count
        only, from any thread: the prefix is taken on the device thread)."""
        store = self.loaded.prefix_cache
        ahead = self.fed if self.looked_up or store is None else store.matched_length(self.ids, len(self.ids) - 1)
        return len(self.ids) - ahead

    def start_from_prefix(self) -> None:
        """Before the prefill's first pass: continue from the longest prefix of the prompt in the model's prefix
        cache (inference/prefix_cache.py), its positions' captured rows as the prefill's first part."""
        store = self.loaded.prefix_cache
        if self.looked_up or self.fed or self.parts or self.pending is not None or store is None or not self.adapter.has_cache:
            return
        self.looked_up = True
        hit = store.longest(self.ids, len(self.ids) - 1)  # the last prompt token is always computed: its logits
        if hit is None:
            return
        self.cache, self.fed, self.cached_tokens = hit.cache, hit.tokens, hit.tokens
        # The prefix's own tensors (the cache's updates concatenate into new ones, so these stay the prefix's)
        self.prefix = PrefixStart([(layer.keys, layer.values) for layer in hit.cache.layers], hit.hidden)
        self.parts.append(ForwardRow(logits=torch.empty(0), hidden=hit.hidden, last_attn=torch.empty(0), forward_ms=0.0,
                                     ended_at=time.perf_counter(), attentions=hit.attentions, source="prefill"))

    def prefilled_from(self, row: ForwardRow, cache, batch_size: int = 1) -> dict:
        """The prefill, from this session's row of a batched pass (inference/batched_prefill.py): its own cache.
        The causal-mask check may compare its residuals with a lone pass of the changed prompt (a batch of one
        has no padding), so they are kept for it."""
        if self.pending is not None or self.step_index:
            raise SessionError(said("prefill already ran"))
        row = self._joined(row)  # after the prefix from the prefix cache, if any
        self.cache, self.fed, self.parts = cache, len(self.ids), []
        self.prefill_hidden, self.prefill_batched = (row.hidden if batch_size == 1 and not self.cached_tokens else None), True
        with one_thread():
            return self._captured_prefill(row)

    def _captured_prefill(self, row: ForwardRow) -> dict:
        """Keep the prefill's tensors (detail on demand) and build its payload; step 1 samples from its end."""
        attention_bytes = sum(a.numel() for a in row.attentions) * 2
        full_attention = torch.stack(row.attentions).half() if 0 < attention_bytes <= self.kept.budget // 2 else None
        self.kept.put(0, attn=full_attention, hidden=row.hidden.half(), logits=row.logits)
        if self.loaded.prefix_cache is not None and self.adapter.has_cache:
            self.loaded.prefix_cache.insert(self.prompt.ids, self.cache, row.hidden, row.attentions)
        payload = builders.prefill_payload(capture_records.prefill_record(self, row))
        self.pending = row.last_position("prefill")
        return payload

    def prefill_part(self, tokens: int | None = None) -> bool:
        """Feed the prompt's next chunk (`tokens`, at most the session's prefill_chunk) into the cache; False,
        feeding nothing, once only the last chunk is left (prefill() runs it). A long prompt fed in parts lets
        other visitors' decode ticks run between the parts."""
        self.start_from_prefix()
        chunk = min(tokens or self.prefill_chunk or 0, self.prefill_chunk or 0)
        left = len(self.ids) - self.fed
        if not chunk or self.pending is not None or not self.adapter.has_cache or left <= chunk:
            return False
        self.started = self.started or time.perf_counter()
        self.parts.append(self._forward(self.ids[self.fed:self.fed + chunk]))
        self.fed += chunk
        if not plain_cache(self.cache):  # sliding-window or recurrent layers: the prompt in one pass instead
            self.cache, self.parts, self.fed, self.prefill_chunk = None, [], 0, None
            return False
        return True

    def step(self, forced_token: int | None = None, forward: ForwardRow | None = None) -> dict:
        """One decode step: forward the last token (except step 1), sample, append, detokenize.

        `forward`: this session's row of a batched decode pass (inference/scheduler.py), already run."""
        if self.finished:
            raise SessionError(said("the run has finished (%(reason)s)", reason=self.finished), "finished")
        if self.pending is None:
            self.prefill()
        if self.step_index > 0:
            forward, self.ahead = forward or self.ahead, None
            self.pending = (forward or self._forward([self.ids[-1]])).last_position("decode")
        self.step_index += 1
        with one_thread():
            return self._sampled_step(self.pending, forced_token)

    def forward_ahead(self) -> None:
        """Run the next step's forward now, while this step goes out (the scheduler does, on the device's thread): it
        feeds the last sampled token, which nothing a visitor does changes; a fork, a stop or a rewind drops it with
        the cache position it added (_truncate_cache)."""
        if self.ahead is None and self.step_index > 0 and not self.finished and self.adapter.has_cache:
            self.ahead = self._forward([self.ids[-1]])

    def _sampled_step(self, row: ForwardRow, forced_token: int | None) -> dict:
        """Sample from `row`, append the token, keep the step's tensors, build its payload."""
        t0 = time.perf_counter()
        if row.logits_top is None:  # the payload lists it: ranked once, here, the greedy step reads its stages from it
            row = replace(row, logits_top=top_tokens(row.logits[None])[0])
        draw = sample_token(torch.tensor([self.ids]), row.logits, self.params, self.prompt_length, self.step_index,
                            forced=forced_token, eos_ids=self.eos_ids, ranking=row.logits_top)
        sampling_ms = (time.perf_counter() - t0) * 1e3
        self.ids.append(draw.token_id)
        self.first_token_at = self.first_token_at or time.perf_counter()
        delta = self._text_delta()
        self.finished = self._stop_reason(draw.token_id)
        self.kept.put(self.step_index, attn=row.last_attn.half(), hidden=row.last_hidden.half(), logits=row.logits)
        self.last_draw = (row.logits, draw.final)  # this step's raw logits and final distribution (compare.py)
        capture_started = time.perf_counter()
        record = capture_records.step_record(self, row, draw, delta, forced_token is not None, sampling_ms)
        return builders.step_payload(record, capture_started)

    def session_payload(self) -> dict:
        """The `session` message: the model, the parameters, what is captured."""
        return builders.session_payload(capture_records.session_record(self))

    def done_payload(self) -> dict:
        """The `done` message: why and when the run ended, the whole reply."""
        return builders.done_payload(capture_records.done_record(self))

    def stop(self) -> None:
        self.finished = self.finished or "stopped"

    def truncate(self, steps: int) -> None:
        """Stop after step ``steps``: forget later steps (sent before a client's stop was read) and their cache."""
        if not 0 <= steps < self.step_index:
            return
        self.ids = self.ids[: self.prompt_length + steps]
        self._truncate_cache(self.prompt_length + max(steps - 1, 0))  # step k's own token is fed by step k+1
        self.step_index, self.finished = steps, "stopped"
        self.emitted_text = self._decoded_text()
        self.kept.drop_from(steps + 1)

    def hold(self) -> None:
        """The visitor paused: the time until unhold() is not generation time (tokens/s, total, elapsed)."""
        if self.held_at is None:
            self.held_at = time.perf_counter()

    def clock(self) -> float:
        """Now on the run's clock: stopped while the run is held."""
        return self.held_at if self.held_at is not None else time.perf_counter()

    def unhold(self) -> None:
        """Shift the run's clocks past the pause, so every figure derived from them leaves it out."""
        if self.held_at is None:
            return
        gap, self.held_at = time.perf_counter() - self.held_at, None
        if self.started is not None:
            self.started += gap
        if self.first_token_at is not None:
            self.first_token_at += gap

    def fork(self, step: int, token_id: int) -> dict:
        """Go back to step ``step`` and continue with ``token_id`` instead of the sampled token."""
        self.rewind(step, token_id)
        return self.forked_step(token_id)

    def rewind(self, step: int, token_id: int) -> None:
        """A fork's first half: forget step ``step`` and later. Step 1's logits come from the prefill, so the
        session is reset and the prompt prefilled again (by prefill_part's chunks, then forked_step)."""
        if not isinstance(step, int) or not 1 <= step <= self.step_index:
            raise SessionError(said("step must be in [1, %(high)s], got %(got)s", high=self.step_index, got=repr(step)),
                               "out_of_range")
        if not isinstance(token_id, int) or not 0 <= token_id < self.description.vocab_size:
            raise SessionError(said("token_id must be in [0, %(high)s]", high=self.description.vocab_size - 1), "out_of_range")
        if step == 1:
            self._reset()
        else:  # keep tokens and cache up to step-1's token, which step's forward will feed
            self.ids = self.ids[: self.prompt_length + step - 1]
            self._truncate_cache(len(self.ids) - 1)
            self.step_index, self.finished = step - 1, None
            self.emitted_text = self._decoded_text()
            self.kept.drop_from(step)

    def forked_step(self, token_id: int) -> dict:
        """A fork's second half: the forced step (after the prefill's last chunk, when rewind reset the session)."""
        payload = self.step(forced_token=token_id)
        self.prefill_hidden = self.prefix = None  # a fork runs no causal-mask check: nothing to keep for one
        return payload

    @torch.no_grad()
    def _truncate_cache(self, length: int) -> None:
        """Keep the first ``length`` positions; sliding-window or recurrent layers are rebuilt."""
        self.ahead = None  # its position goes (or the tokens it fed do)
        if not self.adapter.has_cache:
            return
        if all(type(layer) is DynamicLayer for layer in self.cache.layers):
            self.cache.crop(-(self.cache.get_seq_length() - length))
            return
        ids = torch.tensor([self.ids[:length]], device=self.model.device)
        self.cache = self.model(input_ids=ids, use_cache=True, logits_to_keep=1).cache

    # -- text and stopping ------------------------------------------------------------------------
    def _decoded_text(self) -> str:
        text = self.tokenizer.decode(self.generated, skip_special_tokens=True)
        return text[:-1] if text.endswith("\ufffd") else text  # an incomplete UTF-8 sequence waits

    def _text_delta(self) -> str:
        text = self._decoded_text()
        delta = text[len(self.emitted_text):] if text.startswith(self.emitted_text) else text
        self.emitted_text = text
        return delta

    def _stop_reason(self, token_id: int) -> str | None:
        if token_id in self.eos_ids:
            return "eos"
        if any(s in self.emitted_text for s in self.params.stop):
            return "stop_string"
        if len(self.generated) >= self.params.max_new_tokens:
            return "max_new_tokens"
        if len(self.ids) >= self.description.context_window:
            return "context_window"
        return None

    def reply_text(self) -> str:
        text = self.emitted_text
        for s in self.params.stop:
            text = text.split(s)[0]
        return text

    def kv(self) -> dict:
        return cache_stats(self.cache, self.description.context_window, 
                           seen=len(self.ids) - (self.step_index > 0))  # the last sampled token is not fed yet

    def close(self) -> None:
        """Free the cache and kept tensors (the session's only large state)."""
        self.cache, self.pending, self.prefill_hidden, self.prefix, self.ahead = None, None, None, None, None
        self.kept.clear()
        self.finished = self.finished or "stopped"


def eos_token_ids(loaded: LoadedModel) -> set[int]:
    ids = set()
    config = loaded.model.config
    for source in (loaded.model.generation_config.eos_token_id, getattr(config, "eos_token_id", None), loaded.tokenizer.eos_token_id):
        if source is not None:
            ids.update(source if isinstance(source, (list, tuple)) else [source])
    return ids

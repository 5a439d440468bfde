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

import torch
from transformers.cache_utils import DynamicLayer

from . import views
from .capture import lens_layers, residual_stream
from .discovery import is_attention
from .kept import KeptSteps
from .kvstats import cache_stats
from .loading import LoadedModel
from .prompting import Prompt
from .sampling import ParamError, SamplingParams, sample_token


class ContextWindowError(ParamError):
    """Prompt + max_new_tokens do not fit the model's context window."""


class SessionError(RuntimeError):
    """An operation the session's state does not allow (e.g. step after the run finished)."""

    def __init__(self, message: str, code: str = "invalid_state"):
        super().__init__(message)
        self.code = code


class GenerationSession:
    def __init__(self, loaded: LoadedModel, prompt: Prompt, params: SamplingParams,
                 lens: str = "auto", keep_budget_bytes: int | None = None):
        self.loaded, self.model, self.tokenizer = loaded, loaded.model, loaded.tokenizer
        self.adapter, self.description = loaded.adapter, loaded.description
        self.prompt, self.params = prompt, params
        window = self.description.context_window
        if len(prompt.ids) + params.max_new_tokens > window:
            raise ContextWindowError("max_new_tokens", f"prompt ({len(prompt.ids)} tokens) + max_new_tokens "
                                     f"({params.max_new_tokens}) exceeds the context window ({window})", "context_window")
        d = self.description
        self.lens_layers = lens_layers(d.layers, d.vocab_size, lens, d.parameters, d.hidden_size)
        if not self.adapter.lens_ok:
            self.lens_layers = [d.layers - 1]  # read from the model's own logits
        self.kept = KeptSteps(keep_budget_bytes) if keep_budget_bytes else KeptSteps()
        self.eos_ids = eos_token_ids(loaded)
        self.special_ids = set(self.tokenizer.all_special_ids)
        self._reset()

    def _reset(self) -> None:
        self.ids = list(self.prompt.ids)  # every token so far: prompt, then generated
        self.cache = None  # the model makes the cache it needs (dynamic, sliding, recurrent) on the first forward
        self.step_index = 0
        self.pending = None  # the last forward's capture: what the next step samples from
        self.finished: str | None = None
        self.emitted_text = ""
        self.started = self.first_token_at = None
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
    def _forward(self, new_ids: list[int]) -> dict:
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
        hidden = torch.stack([r[0] for r in residuals])  # (layers + 1, new, hidden): layer 0's input, each output
        # layers x (heads, new, keys), stacked only where small; models without attention return none
        attentions = aligned_attentions(getattr(out, "attentions", None), input_ids.shape[1], len(self.ids), self.description.layers)
        last_attn = torch.stack([a[:, -1] for a in attentions]) if attentions else torch.zeros(0, 0, input_ids.shape[1])
        return {"logits": out.logits[0, -1].float(), "attentions": attentions, "hidden": hidden,
                "last_attn": last_attn,  # (layers, heads, keys)
                "forward_ms": (t1 - t0) * 1e3, "ended_at": t1}

    def prefill(self) -> dict:
        if self.pending is not None or self.step_index:
            raise SessionError("prefill already ran")
        self.started = time.perf_counter()
        forward = self._forward(self.ids)
        payload = views.prefill_view(self, forward)
        attention_bytes = sum(a.numel() for a in forward["attentions"]) * 2
        full_attention = torch.stack(forward["attentions"]).half() if 0 < attention_bytes <= self.kept.budget // 2 else None
        self.kept.put(0, attn=full_attention, hidden=forward["hidden"].half(), logits=forward["logits"])
        payload["timing"]["capture_ms"] = round((time.perf_counter() - forward["ended_at"]) * 1e3, 3)
        self.pending = self._pending(forward, "prefill")
        return payload

    @staticmethod
    def _pending(forward: dict, source: str) -> dict:
        """What the next step samples from: the last position of a forward pass."""
        return {"logits": forward["logits"], "attn": forward["last_attn"], "hidden": forward["hidden"][:, -1],
                "forward_ms": forward["forward_ms"], "source": source, "batch_size": forward.get("batch_size", 1)}

    def step(self, forced_token: int | None = None, forward: dict | None = None) -> dict:
        """One decode step: forward the last token (except step 1), sample, append, detokenize.

        `forward`: this session's row of a batched decode pass (inference/scheduler.py), already run."""
        if self.finished:
            raise SessionError(f"the run has finished ({self.finished})", "finished")
        if self.pending is None:
            self.prefill()
        if self.step_index > 0:
            self.pending = self._pending(forward or self._forward([self.ids[-1]]), "decode")
        self.step_index += 1
        pending = self.pending
        t0 = time.perf_counter()
        ids = torch.tensor([self.ids])
        result = sample_token(ids, pending["logits"], self.params, self.prompt_length, self.step_index, forced=forced_token)
        t1 = time.perf_counter()
        self.ids.append(result.token_id)
        self.first_token_at = self.first_token_at or t1
        delta = self._text_delta()
        self.finished = self._stop_reason(result.token_id)
        payload = views.step_view(self, pending, result, delta, forced_token is not None)
        t2 = time.perf_counter()
        self.kept.put(self.step_index, attn=pending["attn"].half(), hidden=pending["hidden"].half(), logits=pending["logits"])
        payload["timing"].update(sampling_ms=round((t1 - t0) * 1e3, 3), capture_ms=round((t2 - t1) * 1e3, 3))
        return payload

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
        if not isinstance(step, int) or not 1 <= step <= self.step_index:
            raise SessionError(f"step must be in [1, {self.step_index}], got {step!r}", "out_of_range")
        if not isinstance(token_id, int) or not 0 <= token_id < self.description.vocab_size:
            raise SessionError(f"token_id must be in [0, {self.description.vocab_size - 1}]", "out_of_range")
        if step == 1:  # the logits of step 1 come from the prefill: run it again
            self._reset()
            self.prefill()
        else:  # keep tokens and cache up to step-1's token, which step's forward will feed
            self.ids = self.ids[: self.prompt_length + step - 1]
            self._truncate_cache(len(self.ids) - 1)
            self.step_index, self.finished = step - 1, None
            self.emitted_text = self._decoded_text()
            self.kept.drop_from(step)
        return self.step(forced_token=token_id)

    @torch.no_grad()
    def _truncate_cache(self, length: int) -> None:
        """Keep the first ``length`` positions; sliding-window or recurrent layers are rebuilt."""
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
        self.cache, self.pending = None, None
        self.kept.clear()
        self.finished = self.finished or "stopped"


def aligned_attentions(returned, new: int, seen: int, layers: int) -> list[torch.Tensor]:
    """Each attention layer's weights (heads, new, keys), left-padded with zeros to the most keys any layer
    read, so sliding-window layers line up with full ones on the same (most recent) positions."""
    weights = [a[0] for a in (returned or ()) if is_attention(a, new, seen)][-layers:]  # looped models: last pass
    keys = max((w.shape[-1] for w in weights), default=0)
    return [torch.nn.functional.pad(w, (keys - w.shape[-1], 0)) if w.shape[-1] < keys else w for w in weights]


def synchronize(device: torch.device) -> None:
    """Make forward timings honest on CUDA, where kernels run asynchronously."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def eos_token_ids(loaded: LoadedModel) -> set[int]:
    ids = set()
    config = loaded.model.config
    for source in (loaded.model.generation_config.eos_token_id, getattr(config, "eos_token_id", None), loaded.tokenizer.eos_token_id):
        if source is not None:
            ids.update(source if isinstance(source, (list, tuple)) else [source])
    return ids

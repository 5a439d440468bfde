"""Prefills of visitors who arrive together: one forward pass for all their prompts (continuous batching's
join step).

A room of 30 pressing Enter at once used to queue 30 prefills one after another (about 10 s of SmolLM2 on 2
cores before the last visitor saw a token). Here the prompts are left-padded into one batch with an attention
mask and their own positions, so padding changes nothing a visitor sees (a masked key's weight is exactly 0),
and each session gets its own row: logits, attention, residual stream and its own cache. Only the visitors'
own prompts are in the pass: the causal-mask check runs after the first token, off its path
(explainer/services/run/after_run_checks.py).

A prompt whose start is in the prefix cache (inference/prefix_cache.py) joins with only the rest: the cached
prefixes are the rows' past, left-padded to the longest, and each row's new tokens follow it, left-padded too
(row i reads [pad | its prefix | pad | its new tokens], the pads masked out), so 32 visitors who share the
template's system prompt compute it 0 times in their one pass.
"""
from __future__ import annotations

import time
import weakref

import torch

from .capture import residual_stream
from .forward import ForwardRow, aligned_attentions, cache_holding, last_rows, one_thread, plain_cache, read_lens, synchronize

MOST_PROMPT_TOKENS = 128  # longer prompts prefill alone, in chunks (engine.prefill_part): bounded memory
_alone: "weakref.WeakSet" = weakref.WeakSet()  # models found not batchable: their prefills run alone at once


def padded_batch(rows: list[list[int]], device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """input_ids, attention_mask and position_ids (rows, longest), each row left-padded to the longest."""
    longest = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), longest, dtype=torch.long)  # (rows, longest); pads are id 0, masked out
    mask = torch.zeros(len(rows), longest, dtype=torch.long)  # (rows, longest) 1 = a real token
    positions = torch.zeros(len(rows), longest, dtype=torch.long)  # (rows, longest) each row from 0
    for i, row in enumerate(rows):
        pad = longest - len(row)
        ids[i, pad:], mask[i, pad:] = torch.tensor(row), 1
        positions[i, pad:] = torch.arange(len(row))
    return ids.to(device), mask.to(device), positions.to(device)


class NotBatchable(RuntimeError):
    """The model's cache is not plain dynamic layers (sliding or recurrent): its prefills run alone."""


def stacked_past(sessions, device) -> tuple[object, torch.Tensor]:
    """The sessions' cached prefixes (session.fed positions each, 0 without a hit) left-padded into one cache,
    and its attention mask (rows, longest) with 1 on each row's prefix; (None, empty mask) when none has one."""
    pasts = [s.fed for s in sessions]
    longest = max(pasts)
    mask = torch.zeros(len(sessions), longest, dtype=torch.long)  # (rows, longest past)
    if not longest:
        return None, mask.to(device)
    donor = next(s for s in sessions if s.fed).cache
    layers = []
    for n, layer in enumerate(donor.layers):
        keys = layer.keys.new_zeros(len(sessions), layer.keys.shape[1], longest, layer.keys.shape[3])  # (rows, kv_heads, longest, head_dim)
        values = layer.values.new_zeros(len(sessions), layer.values.shape[1], longest, layer.values.shape[3])
        for i, s in enumerate(sessions):
            if s.fed:
                keys[i, :, longest - s.fed:], values[i, :, longest - s.fed:] = s.cache.layers[n].keys[0], s.cache.layers[n].values[0]
                mask[i, longest - s.fed:] = 1
        layers.append((keys, values))
    return cache_holding(layers), mask.to(device)


@torch.no_grad()
def batched_prefill(sessions) -> list[tuple[ForwardRow, object]]:
    """One pass over every session's prompt (after its cached prefix, if any); per session its row and its own cache."""
    model, adapter = sessions[0].model, sessions[0].adapter
    past, past_mask = stacked_past(sessions, model.device)
    ids, mask, positions = padded_batch([list(s.ids[s.fed:]) for s in sessions], model.device)
    positions = positions + torch.tensor([s.fed for s in sessions], device=model.device)[:, None]  # after each prefix
    with residual_stream(model, adapter) as residuals:
        t0 = time.perf_counter()
        for s in sessions:
            s.started = s.started or t0
        out = model(input_ids=ids, attention_mask=torch.cat([past_mask, mask], dim=1), position_ids=positions,
                    cache=past, use_cache=True, output_attentions=True, logits_to_keep=1)
        synchronize(model.device)
        t1 = time.perf_counter()
    if not plain_cache(out.cache):
        raise NotBatchable(type(out.cache).__name__)
    with one_thread():  # small per-row copies
        found = session_rows(sessions, out, residuals, (past_mask.shape[1], ids.shape[1]), ((t1 - t0) * 1e3, t1))
    lensed = read_lens([row for row, _ in found], sessions)  # every thread: one large top-k
    return [(row, cache) for row, (_, cache) in zip(lensed, found)]


def session_rows(sessions, out, residuals, longest: tuple[int, int], timing) -> list[tuple[ForwardRow, object]]:
    """Each session's own row of the pass (its new tokens, over its own keys: no padding) and its cache.
    `longest`: (past, new) lengths of the padded batch."""
    found = []
    for i, session in enumerate(sessions):
        new, p = len(session.ids) - session.fed, len(session.ids)
        pad = longest[1] - new
        keys = own_keys(longest[0], session.fed, pad, longest[0] + longest[1], out.logits.device)  # (p,) its columns
        hidden = torch.stack([r[i, pad:] for r in residuals])  # (layers + 1, new, hidden)
        returned = [a[i:i + 1, :, pad:][..., keys] for a in (getattr(out, "attentions", None) or ())]
        attentions = aligned_attentions(returned, new, p, session.description.layers)
        cache = cache_holding((layer.keys[i:i + 1, :, keys].clone(), layer.values[i:i + 1, :, keys].clone())
                              for layer in out.cache.layers)
        found.append((ForwardRow(
            logits=out.logits[i, -1].float(), hidden=hidden, last_attn=last_rows(attentions, new), forward_ms=timing[0],
            ended_at=timing[1], attentions=attentions, batch_size=len(sessions), source="prefill"), cache))
    return found


def own_keys(past: int, prefix: int, pad: int, total: int, device) -> torch.Tensor:
    """A row's key columns in the batch: its prefix (the end of the past), then its new tokens (after its padding)."""
    return torch.cat([torch.arange(past - prefix, past), torch.arange(past + pad, total)]).to(device)


def same_weights(sessions) -> list[list]:
    """The sessions grouped by the model they run (a compared run may run the int8 copy or another model: one
    pass feeds one model), the largest group first."""
    groups: dict[int, list] = {}
    for session in sessions:
        groups.setdefault(id(session.model), []).append(session)
    return sorted(groups.values(), key=len, reverse=True)


def prefill_all(sessions, most_tokens: int = MOST_PROMPT_TOKENS) -> list:
    """On the device thread: the prefills of `sessions`, batched where they can be; per session its prefill
    payload, or the exception it raised (one visitor's failure is not another's)."""
    for s in sessions:
        s.start_from_prefix()  # the longest cached prefix of each prompt, its rows and cache (when there is one)
    together = [s for s in sessions if s.prefill_fits_one_pass(most_tokens) and s.model not in _alone]
    results: dict[int, object] = {}
    for group in same_weights(together):  # one pass feeds one model
        try:
            for s, (row, cache) in zip(group, batched_prefill(group)):
                results[id(s)] = capture(lambda: s.prefilled_from(row, cache, len(group)))
        except NotBatchable:
            _alone.add(group[0].model)
        except Exception:  # noqa: BLE001 - e.g. out of memory for the batch: each prefills alone instead
            pass
    return [results[id(s)] if id(s) in results else capture(s.prefill) for s in sessions]


def capture(fn):
    """fn()'s value, or the exception it raised."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - handed to that session's driver
        return exc

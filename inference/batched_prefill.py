"""Prefills of visitors who arrive together: one forward pass for all their prompts (continuous batching's
join step), each next to its causal-mask twin.

A room of 30 pressing Enter at once used to queue 30 prefills plus 30 causal-mask passes one after another
(about 10 s of SmolLM2 on 2 cores before the last visitor saw a token). Here the prompts are left-padded
into one batch with an attention mask and their own positions, so padding changes nothing a visitor sees
(a masked key's weight is exactly 0), and each session gets its own row: logits, attention, residual
stream and its own cache. The causal-mask check's changed prompt rides in the same pass, in a row of the
same length as its original, so the two differ only where the change can reach (the check compares
them; explainer/services/run/after_run_checks.py falls back to two lone passes if rows of one batch ever disagree).
Visitors with the same prompt (a room on the article's default one) share one twin row.
"""
from __future__ import annotations

import time
import weakref
from dataclasses import dataclass

import torch

from .capture import residual_stream
from .article_checks import causal_change
from .forward import ForwardRow, aligned_attentions, last_rows, one_thread, own_cache, plain_cache, read_lens, synchronize

MOST_PROMPT_TOKENS = 128  # longer prompts prefill alone, in chunks (engine.prefill_part): bounded memory
_alone: "weakref.WeakSet" = weakref.WeakSet()  # models found not batchable: their prefills run alone at once


@dataclass
class PrefillRow:
    """One row of the batched pass: a session's prompt, or a causal-mask twin (shared by every session of
    the pass whose prompt is the same: identical rows of one pass compute the same numbers)."""
    sessions: list[int]  # indices into the pass's sessions
    ids: list[int]
    twin: bool = False


def prefill_rows(sessions) -> list[PrefillRow]:
    """Every session's prompt, and each distinct changed copy the causal-mask checks need."""
    rows, twins = [], {}
    for n, s in enumerate(sessions):
        rows.append(PrefillRow([n], list(s.ids)))
        change = causal_change(s.ids, s.special_ids, s.tokenizer.decode, s.description.vocab_size)
        if change is not None:
            position, replacement = change
            changed = (*s.ids[:position], replacement, *s.ids[position + 1:])
            if changed not in twins:
                twins[changed] = PrefillRow([], list(changed), twin=True)
                rows.append(twins[changed])
            twins[changed].sessions.append(n)
    return rows


def padded_batch(rows: list[PrefillRow], device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """input_ids, attention_mask and position_ids (rows, longest), each row left-padded to the longest."""
    longest = max(len(r.ids) for r in rows)
    ids = torch.zeros(len(rows), longest, dtype=torch.long)  # (rows, longest); pads are id 0, masked out
    mask = torch.zeros(len(rows), longest, dtype=torch.long)  # (rows, longest) 1 = a real token
    positions = torch.zeros(len(rows), longest, dtype=torch.long)  # (rows, longest) each row from 0
    for i, row in enumerate(rows):
        pad = longest - len(row.ids)
        ids[i, pad:], mask[i, pad:] = torch.tensor(row.ids), 1
        positions[i, pad:] = torch.arange(len(row.ids))
    return ids.to(device), mask.to(device), positions.to(device)


class NotBatchable(RuntimeError):
    """The model's cache is not plain dynamic layers (sliding or recurrent): its prefills run alone."""


@torch.no_grad()
def batched_prefill(sessions) -> list[tuple[ForwardRow, object, torch.Tensor | None]]:
    """One pass over every session's prompt (and twin); per session its row, its own cache and the twin's
    residual stream (layers + 1, P, hidden), or None."""
    model, adapter = sessions[0].model, sessions[0].adapter
    rows = prefill_rows(sessions)
    ids, mask, positions = padded_batch(rows, model.device)
    with residual_stream(model, adapter) as residuals:
        t0 = time.perf_counter()
        for s in sessions:
            s.started = s.started or t0
        out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True,
                    output_attentions=True, logits_to_keep=1)
        synchronize(model.device)
        t1 = time.perf_counter()
    if not plain_cache(out.cache):
        raise NotBatchable(type(out.cache).__name__)
    with one_thread():  # small per-row copies
        found = session_rows(sessions, rows, out, residuals, ids.shape[1], ((t1 - t0) * 1e3, t1))
    lensed = read_lens([row for row, _, _ in found], sessions)  # every thread: one large top-k
    return [(row, cache, twin) for row, (_, cache, twin) in zip(lensed, found)]


def session_rows(sessions, rows: list[PrefillRow], out, residuals, longest: int, timing) -> list:
    """Each session's own row of the pass (without its padding), its cache, and its twin's residuals."""
    found: list = [[None, None, None] for _ in sessions]
    for i, row in enumerate(rows):
        pad, p = longest - len(row.ids), len(row.ids)
        hidden = torch.stack([r[i, pad:] for r in residuals])  # (layers + 1, P, hidden)
        if row.twin:
            for n in row.sessions:
                found[n][2] = hidden
            continue
        n = row.sessions[0]
        returned = [a[i:i + 1, :, pad:, pad:] for a in (getattr(out, "attentions", None) or ())]
        attentions = aligned_attentions(returned, p, p, sessions[n].description.layers)
        found[n][:2] = ForwardRow(
            logits=out.logits[i, -1].float(), hidden=hidden, last_attn=last_rows(attentions, p), forward_ms=timing[0],
            ended_at=timing[1], attentions=attentions, batch_size=len(sessions), source="prefill"), own_cache(out.cache, i, pad)
    return [tuple(f) for f in found]


def prefill_all(sessions, most_tokens: int = MOST_PROMPT_TOKENS) -> list:
    """On the device thread: the prefills of `sessions`, batched where they can be; per session its prefill
    payload, or the exception it raised (one visitor's failure is not another's)."""
    together = [s for s in sessions if s.prefill_fits_one_pass(most_tokens) and s.model not in _alone]
    results: dict[int, object] = {}
    if together:
        try:
            for s, (row, cache, twin) in zip(together, batched_prefill(together)):
                results[id(s)] = capture(lambda: s.prefilled_from(row, cache, twin))
        except NotBatchable:
            _alone.add(together[0].model)
        except Exception:  # noqa: BLE001 - e.g. out of memory for the batch: each prefills alone instead
            results = {}
    return [results[id(s)] if id(s) in results else capture(s.prefill) for s in sessions]


def capture(fn):
    """fn()'s value, or the exception it raised."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - handed to that session's driver
        return exc

"""A decode tick on the device's thread: one forward pass feeding every waiting session its last token.

Caches of different lengths are stacked with left padding and an attention mask (transformers'
continuous-batching PagedAttentionCache does not hand back per-session eager attention weights, which
every step payload carries), and each session gets its own row: logits, attention rows over its own cache,
hidden states. Only plain DynamicLayer caches batch; sliding-window or recurrent caches, and models without
a cache, step alone. inference/scheduler.py decides when these run.
"""
from __future__ import annotations

import time

import torch

from .batched_prefill import same_weights
from .capture import residual_stream
from .discovery import is_attention
from .forward import ForwardRow, one_thread, own_cache, plain_cache, read_lens, synchronize
from .stacked_cache import KeptStack, row_view, stacked_cache


def can_batch(session) -> bool:
    """A decode step (not step 1, which samples from the prefill) on a plain dynamic cache."""
    return session.adapter.has_cache and session.step_index > 0 and not session.finished and plain_cache(session.cache)


def decode_inputs(sessions, lengths: list[int], device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each session's last token, the mask over its left-padded cache plus that token, and its own position."""
    longest = max(lengths)
    mask = torch.zeros(len(sessions), longest + 1, dtype=torch.long, device=device)  # (batch, keys + the new one)
    for i, length in enumerate(lengths):
        mask[i, longest - length:] = 1
    input_ids = torch.tensor([[s.ids[-1]] for s in sessions], device=device)  # (batch, 1)
    positions = torch.tensor([[length] for length in lengths], device=device)  # (batch, 1) each its own position
    return input_ids, mask, positions


@torch.no_grad()
def batched_decode(sessions, kept: KeptStack | None = None) -> list[ForwardRow]:
    """One forward pass feeding each session its last token on top of its own cache; one row each (in the
    order of `sessions`). `kept`: the last tick's stack, fed again while it holds exactly these sessions."""
    model, adapter = sessions[0].model, sessions[0].adapter
    reuse = kept is not None and kept.holds_all(sessions)
    order = kept.order if reuse else list(sessions)  # rows in the stack's order
    lengths = [s.cache.get_seq_length() for s in order]
    input_ids, mask, positions = decode_inputs(order, lengths, model.device)
    longest = max(lengths)
    with one_thread():  # small per-row copies
        cache = kept.cache if reuse else stacked_cache(order, lengths, longest)
    try:
        with residual_stream(model, adapter) as residuals:
            t0 = time.perf_counter()
            out = model(input_ids=input_ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True,
                        output_attentions=True, logits_to_keep=1)
            synchronize(model.device)
            t1 = time.perf_counter()
        with one_thread():  # small per-row copies
            rows, caches = own_rows(order, out, residuals, lengths, (t1 - t0) * 1e3, t1, views=kept is not None)
        rows = read_lens(rows, order, out.logits[:, -1])  # every thread: a top-k over rows x vocabulary is one large op
    except Exception:
        if reuse:  # the model may have appended to the kept stack already
            kept.forget()
        raise
    for session, own in zip(order, caches):  # only once every row is out: a failure above changes no session
        session.cache = own
    if kept is not None:
        kept.keep(order, out.cache)
    by_session = {id(s): row for s, row in zip(order, rows)}
    return [by_session[id(s)] for s in sessions]


def own_rows(sessions, out, residuals, lengths: list[int], forward_ms: float, ended_at: float,
             views: bool = False) -> tuple[list[ForwardRow], list]:
    """Each session's row of the batched pass, and its own cache without the left padding (a copy, or with
    `views` a view of the stack that KeptStack keeps). A decode row keeps only its last position's attention
    (what the step sends), cut from one stack of every layer's weights."""
    longest, batch = max(lengths), len(sessions)
    layers = sessions[0].description.layers
    weights = [a for a in (getattr(out, "attentions", None) or ()) if is_attention(a, 1, longest + 1)][-layers:]
    attention = torch.stack(weights)[:, :, :, 0] if weights else None  # (layers, batch, heads, keys)
    hidden = torch.stack(residuals)[:, :, -1]  # (layers + 1, batch, hidden)
    rows, caches = [], []
    for i, session in enumerate(sessions):
        pad = longest - lengths[i]
        caches.append(row_view(out.cache, i, pad) if views else own_cache(out.cache, i, pad))
        last_attn = attention[:, i, :, pad:] if attention is not None else torch.zeros(0, 0, 1)  # (layers, heads, keys)
        rows.append(ForwardRow(logits=out.logits[i, -1].float(), hidden=hidden[:, i, None], last_attn=last_attn,
                               forward_ms=forward_ms, ended_at=ended_at, batch_size=batch))
    return rows, caches


def step_all(sessions, kept: KeptStack | None = None) -> list:
    """One tick on the device thread: the batched forward, then each session's own step (a payload, or the
    exception that session raised: one visitor's failure is not another's)."""
    forwards: dict[int, ForwardRow] = {}
    for n, group in enumerate(same_weights([s for s in sessions if can_batch(s) and s.ahead is None])):
        if len(group) < 2:
            continue
        try:  # the largest group may reuse the last tick's stack; another model's rows are stacked afresh
            forwards.update({id(s): f for s, f in zip(group, batched_decode(group, kept if n == 0 else None))})
        except Exception:  # noqa: BLE001 - e.g. out of memory for the stacked cache: each steps alone instead
            pass
    results = []
    for session in sessions:
        try:
            results.append(session.step(forward=forwards.get(id(session))))
        except Exception as exc:  # noqa: BLE001 - handed to that session's driver
            results.append(exc)
    if kept is not None:  # a finished run keeps its cache (the page asks about it), not the batch's
        kept.let_go([s for s in sessions if s.finished])
    return results


def forward_ahead(sessions, kept: KeptStack | None = None) -> None:
    """On the device thread, right after a tick: the next step's forward of the sessions that will step again, while
    this tick's steps go out on the event loop (step n + 1 feeds step n's token, which nothing a visitor does changes;
    a fork or a stop drops it, engine._truncate_cache). One pass per model as in a tick, a lone session's own forward;
    a pass that fails leaves its sessions to the next tick's. Every pass runs on the thread's count, a lone one too:
    on SmolLM2's oneDNN linear layers (2 cores) a lone visitor's step came every 29 ms on two threads against 35 on
    one (the sends going out meanwhile need less than the second thread gives); with MKL's they were even (41 and 41)."""
    going = [s for s in sessions if can_batch(s) and s.ahead is None]
    for n, group in enumerate(same_weights(going)):
        try:
            if len(group) == 1:
                group[0].forward_ahead()
                continue
            for session, row in zip(group, batched_decode(group, kept if n == 0 else None)):
                session.ahead = row
        except Exception:  # noqa: BLE001 - e.g. out of memory: the tick runs these forwards again, or reports it
            pass

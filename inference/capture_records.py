"""From a session's state to the wire's typed records (inference/wire/records.py): the token texts a message
names, the prompt's embedding rows and position vectors, the logit lens where the batch did not read it.
Everything here may look at the model and the tokenizer; the builders that turn records into messages may not.
"""
from __future__ import annotations

import weakref

import torch

from .capture import logit_lens, top_tokens
from .model_config import rope_theta
from .wire.records import (DoneRecord, EmbeddingRows, PositionRows, PrefillRecord, PromptRecord, RotaryAngles,
                           SessionRecord, StepRecord, StepTiming)

EMBED_DIMS = 16  # embedding/position dims sent per token (full rows on demand)
ROTARY_FREQS = 8  # rotary frequency pairs sent per position (full angles on demand)

_pieces: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # tokenizer -> {token id: its text}


def piece(tokenizer, token_id: int) -> str:
    """The token decoded alone (remembered per tokenizer: a step names about 50 tokens, 32 visitors a tick)."""
    known = _pieces.get(tokenizer)
    if known is None:
        known = _pieces[tokenizer] = {}
    text = known.get(token_id)
    if text is None:
        text = known[token_id] = tokenizer.decode([token_id])
    return text


def texts_of(tokenizer, *groups) -> dict[int, str]:
    """id -> piece for every id in the groups (lists of ids, lens rows, (id, ...) tuples)."""
    ids = set()
    for group in groups:
        for item in group:
            if isinstance(item, dict):
                ids.update(item["ids"])
            elif isinstance(item, tuple):
                ids.add(item[0])
            else:
                ids.add(item)
    return {i: piece(tokenizer, i) for i in ids}


def lens_rows(session, hidden_last: torch.Tensor, final_logits: torch.Tensor | None = None,
              layers: list[int] | None = None, read: list[dict] | None = None, final_top: list | None = None) -> list[dict]:
    """hidden_last: (layers + 1, hidden); the lens at layer outputs (rows 1..layers), by default the session's
    layers. `read`: the lens already read with its batch (ForwardRow.lens); `final_top`: final_logits' top_tokens."""
    layers = session.lens_layers if layers is None else layers
    return read if read is not None else logit_lens(session.model, session.adapter, hidden_last[1:], layers,
                                                    final_logits, final_top)


def session_record(session) -> SessionRecord:
    eos = sorted(session.eos_ids)
    return SessionRecord(model=session.description.to_dict(), params=session.params.to_dict(),
                         prompt_kind=session.prompt.kind, lens_layers=session.lens_layers,
                         keep_budget_bytes=session.kept.budget, eos_ids=eos, texts=texts_of(session.tokenizer, eos))


def prompt_record(session) -> PromptRecord:
    prompt, description = session.prompt, session.description
    source = description.chat_template_source if prompt.kind == "messages" else prompt.kind
    return PromptRecord(text=prompt.text, source=source, spans=prompt.spans, ids=list(prompt.ids),
                        offsets=prompt.offsets, special_ids=frozenset(session.special_ids), tokenize_ms=prompt.tokenize_ms)


def embedding_rows(session) -> EmbeddingRows:
    model, adapter = session.model, session.adapter
    rows = adapter.embed(model, torch.tensor([session.prompt.ids], device=model.device))[0]  # (P, hidden)
    scale = float(session.description.hidden_size ** 0.5) if adapter.embedding_scale else 1.0
    return EmbeddingRows(table_shape=list(adapter.token_embeddings(model).weight.shape), rows=rows[:, :EMBED_DIMS],
                         norms=rows.float().norm(dim=-1), scale=scale)


def position_rows(session, count: int) -> PositionRows:
    model, adapter = session.model, session.adapter
    positions = torch.arange(count, device=model.device)
    learned = adapter.position_vectors(model, positions)  # (P, hidden) or None
    angles = adapter.rotary_angles(model, positions.cpu())  # (P, rotary_dim // 2) or None
    rotary = None
    if angles is not None:
        n = angles.shape[1]
        index = sorted(set(torch.linspace(0, n - 1, min(ROTARY_FREQS, n)).round().long().tolist()))
        rotary = RotaryAngles(theta=rope_theta(model.config), head_dim=session.description.head_dim, freq_index=index,
                              inv_freq=[round(float(angles[1, i]) if count > 1 else 0.0, 8) for i in index],
                              angles=angles[:, index])
    return PositionRows(scheme=adapter.position_scheme, rotary=rotary,
                        learned=learned[:, :EMBED_DIMS] if learned is not None else None)


def prefill_record(session, row) -> PrefillRecord:
    """The prefill's record, from its forward row (alone, joined chunks, or a batched pass's row)."""
    top = row.logits_top if row.logits_top is not None else top_tokens(row.logits[None])[0]
    lens = lens_rows(session, row.last_hidden, row.logits, read=row.lens, final_top=top)
    return PrefillRecord(prompt=prompt_record(session), embeddings=embedding_rows(session),
                         positions=position_rows(session, len(session.prompt.ids)),
                         sliding_window=session.description.sliding_window, row=row, lens=lens, top=top,
                         kv=session.kv(), texts=texts_of(session.tokenizer, session.prompt.ids, lens, top),
                         cached_tokens=session.cached_tokens, prefix_cache=prefix_stats(session))


def prefix_stats(session) -> dict | None:
    store = session.loaded.prefix_cache
    return store.stats().to_dict() if store is not None and store.enabled else None


def step_timing(session, sampling_ms: float) -> StepTiming:
    """The run's clock after this step (paused time left out: GenerationSession.hold)."""
    decode_s = session.clock() - session.first_token_at
    tokens = len(session.generated)
    return StepTiming(sampling_ms=round(sampling_ms, 3), ttft_ms=ms(session.first_token_at - session.started),
                      tokens_per_s=round((tokens - 1) / decode_s, 3) if tokens > 1 and decode_s > 0 else None,
                      elapsed_ms=ms(session.clock() - session.started))


def step_record(session, row, draw, delta: str, forced: bool, sampling_ms: float) -> StepRecord:
    """The step just taken (session.step_index), sampled from `row`."""
    position = session.prompt_length + session.step_index - 2
    input_id = session.ids[position]
    top = row.logits_top  # ranked before the draw (GenerationSession._sampled_step), which reads it too
    lens = lens_rows(session, row.last_hidden, row.logits, read=row.lens, final_top=top)
    texts = texts_of(session.tokenizer, [input_id, draw.token_id], lens, top, draw.probs_top)
    return StepRecord(step=session.step_index, input_id=input_id, position=position, row=row, lens=lens, top=top,
                      draw=draw, greedy=session.params.greedy, forced=forced, special_ids=frozenset(session.special_ids),
                      text_delta=delta, kv=session.kv(), timing=step_timing(session, sampling_ms),
                      stop_reason=session.finished, texts=texts)


def done_record(session) -> DoneRecord:
    total = session.clock() - session.started if session.started else 0.0
    ttft = session.first_token_at - session.started if session.first_token_at else None
    return DoneRecord(stop_reason=session.finished or "stopped", steps=session.step_index, text=session.reply_text(),
                      token_ids=session.generated, total_s=total, ttft_s=ttft)


def ms(seconds: float) -> float:
    return round(seconds * 1e3, 3)

"""Turn a forward pass's captured tensors into payloads (see payload.SCHEMA and docs/protocol.md)."""
from __future__ import annotations

import torch

from .adapters import rope_theta
from .capture import block_average, block_edges, head_top_keys, logit_lens
from .frames import encoded_size
from .packing import packed, rounded
from .payload import SCHEMA_VERSION

EMBED_DIMS = 16  # embedding/position dims sent per token (full rows on demand)
ROTARY_FREQS = 8  # rotary frequency pairs sent per position (full angles on demand)
LOGITS_TOP = 10
# What goes in is decided by encoded size (JSON bytes), the unit of the transport's cap; messages past the
# send cap still go out, split into parts (inference/frames.py), so these only keep messages reasonable.
FULL_PREFILL_ATTENTION_BYTES = 176_000  # every prefill matrix is sent while they encode to at most this (3 frames)
SUMMARY_BLOCKS = 16
STEP_FRAME_BYTES = 64_000  # a step adds every head's row only while it still encodes to one frame of this


def piece(tokenizer, token_id: int) -> str:
    return tokenizer.decode([token_id])


def token_info(session, token_id: int) -> dict:
    return {"id": token_id, "text": piece(session.tokenizer, token_id), "special": token_id in session.special_ids}


def logits_view(session, logits: torch.Tensor) -> dict:
    values, ids = logits.topk(LOGITS_TOP)
    probs = torch.exp(values - torch.logsumexp(logits, dim=-1))  # softmax of the raw logits, top entries only
    return {"vocab_size": logits.shape[-1], "top": [
        {"id": i, "text": piece(session.tokenizer, i), "logit": round(v, 4), "prob": round(p, 6)}
        for v, i, p in zip(values.tolist(), ids.tolist(), probs.tolist())]}


def lens_view(session, hidden_last: torch.Tensor, final_logits: torch.Tensor | None = None,
              layers: list[int] | None = None) -> list[dict]:
    """hidden_last: (layers + 1, hidden); the lens reads layer outputs (rows 1..layers), by default the session's."""
    layers = session.lens_layers if layers is None else layers
    rows = logit_lens(session.model, session.adapter, hidden_last[1:], layers, final_logits)
    for row in rows:
        row["texts"] = [piece(session.tokenizer, i) for i in row["ids"]]
    return rows


def positions_view(session, count: int) -> dict:
    model, adapter = session.model, session.adapter
    positions = torch.arange(count, device=model.device)
    learned = adapter.position_vectors(model, positions)
    angles = adapter.rotary_angles(model, positions.cpu())
    rotary = None
    if angles is not None:
        n = angles.shape[1]
        index = sorted(set(torch.linspace(0, n - 1, min(ROTARY_FREQS, n)).round().long().tolist()))
        rotary = {"theta": rope_theta(model.config), "head_dim": session.description.head_dim,
                  "freq_index": index, "inv_freq": [round(float(angles[1, i]) if count > 1 else 0.0, 8) for i in index],
                  "angles": packed(angles[:, index])}
    return {"scheme": adapter.position_scheme, "learned": packed(learned[:, :EMBED_DIMS]) if learned is not None else None,
            "rotary": rotary}


def packed_bytes(count: int) -> int:
    """Encoded size of ``count`` float16 values in a packed array: base64 of 2 bytes each."""
    return 4 * -(-2 * count // 3)


def session_view(session) -> dict:
    return {"type": "session", "schema_version": SCHEMA_VERSION, "model": session.description.to_dict(),
            "params": session.params.to_dict(), "prompt_kind": session.prompt.kind,
            "capture": {"lens_layers": session.lens_layers, "keep_budget_bytes": session.kept.budget},
            "eos": [{"id": i, "text": piece(session.tokenizer, i)} for i in sorted(session.eos_ids)]}


def prefill_view(session, forward: dict) -> dict:
    prompt = session.prompt
    attentions, hidden = forward["attentions"], forward["hidden"]  # layers x (heads, P, P), (layers + 1, P, hidden)
    rows = session.adapter.embed(session.model, torch.tensor([prompt.ids], device=session.model.device))[0]  # (P, hidden)
    p = len(prompt.ids)
    layers, heads = len(attentions), attentions[0].shape[0] if attentions else 0  # 0 layers: no attention
    full = packed_bytes(layers * heads * p * p) <= FULL_PREFILL_ATTENTION_BYTES
    last_row = forward["last_attn"]  # (layers, heads, P)
    keys, weights = head_top_keys(last_row)
    table = session.adapter.token_embeddings(session.model).weight
    return {
        "type": "prefill", "schema_version": SCHEMA_VERSION,
        "template": {"text": prompt.text, "source": session.description.chat_template_source if prompt.kind == "messages" else prompt.kind,
                     "spans": prompt.spans},
        "tokens": [{**token_info(session, i), "bytes": prompt.offsets[n] if n < len(prompt.offsets) else None}
                   for n, i in enumerate(prompt.ids)],
        "embeddings": {"shape": list(table.shape), "slice": packed(rows[:, :EMBED_DIMS]), "norms": packed(rows.float().norm(dim=-1)),
                       "scale": float(session.description.hidden_size ** 0.5) if session.adapter.embedding_scale else 1.0},
        "positions": positions_view(session, p),
        "mask": {"kind": "causal", "size": p, "sliding_window": session.description.sliding_window},
        "attention": {"mode": "full" if full else "summary", "layers": layers, "heads": heads,
                      "full": packed(torch.stack(attentions) if attentions else torch.zeros(0, 0, p, p)) if full else None,
                      "blocks": None if full else packed(torch.stack([block_average(a, SUMMARY_BLOCKS) for a in attentions])),
                      "block_edges": None if full else block_edges(p, SUMMARY_BLOCKS),
                      "last_row": packed(last_row.float().mean(dim=1)), "top_keys": keys, "top_weights": weights},
        "hidden_norms": packed(hidden.float().norm(dim=-1)),
        "lens": lens_view(session, hidden[:, -1], forward["logits"]),
        "logits": logits_view(session, forward["logits"]),
        "kv": session.kv(),
        "timing": {"forward_ms": round(forward["forward_ms"], 3), "capture_ms": 0.0, "tokenize_ms": prompt.tokenize_ms},
    }


def step_view(session, pending: dict, result, delta: str, forced: bool) -> dict:
    attn = pending["attn"]  # (layers, heads, keys)
    layers, heads, keys_count = attn.shape
    keys, weights = head_top_keys(attn)
    position = session.prompt_length + session.step_index - 2
    input_id = session.ids[position]
    elapsed = session.clock() - session.started  # paused time left out (GenerationSession.hold)
    decode_s = session.clock() - session.first_token_at
    tokens = len(session.generated)
    step = {
        "type": "step", "schema_version": SCHEMA_VERSION, "step": session.step_index,
        "input": {"id": input_id, "text": piece(session.tokenizer, input_id), "position": position},
        "forward": pending["source"],
        "batch_size": pending.get("batch_size", 1),
        "attention": {"mode": "mean", "keys": keys_count, "mean": packed(attn.float().mean(dim=1)), "heads": None,
                      "top_keys": keys, "top_weights": weights},
        "hidden_norms": rounded(pending["hidden"].float().norm(dim=-1)),
        "lens": lens_view(session, pending["hidden"], pending["logits"]),
        "logits": logits_view(session, pending["logits"]),
        "stages": result.stages,
        "probs": [{"id": i, "text": piece(session.tokenizer, i), "prob": p} for i, p in result.probs_top],
        "draw": result.draw, "greedy": session.params.greedy, "forced": forced,
        "token": {**token_info(session, result.token_id), "prob": round(result.prob, 6)},
        "text_delta": delta,
        "kv": session.kv(),
        "timing": {"forward_ms": round(pending["forward_ms"], 3) if pending["source"] == "decode" else 0.0,
                   "capture_ms": 0.0, "sampling_ms": 0.0,
                   "ttft_ms": round((session.first_token_at - session.started) * 1e3, 3),
                   "tokens_per_s": round((tokens - 1) / decode_s, 3) if tokens > 1 and decode_s > 0 else None,
                   "elapsed_ms": round(elapsed * 1e3, 3)},
        "stop_reason": session.finished,
    }
    if encoded_size(step) + packed_bytes(attn.numel()) + 64 <= STEP_FRAME_BYTES:  # 64: the packed dict's own keys
        step["attention"].update(mode="heads", heads=packed(attn))
    return step


def done_view(session) -> dict:
    total = session.clock() - session.started if session.started else 0.0
    ttft = session.first_token_at - session.started if session.first_token_at else None
    n = len(session.generated)
    tpot = (total - ttft) / (n - 1) if ttft is not None and n > 1 else None
    return {"type": "done", "schema_version": SCHEMA_VERSION, "stop_reason": session.finished or "stopped",
            "steps": session.step_index, "text": session.reply_text(), "token_ids": session.generated,
            "timing": {"ttft_ms": round(ttft * 1e3, 3) if ttft is not None else None, "total_ms": round(total * 1e3, 3),
                       "tokens_per_s": round(1 / tpot, 3) if tpot else None, "tpot_ms": round(tpot * 1e3, 3) if tpot else None}}

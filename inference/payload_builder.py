"""Every message the server sends, built here and only here (fields: payload.SCHEMA, docs/protocol.md).

The engine hands in typed records (a ForwardRow per session row, a SampleResult per draw) and the session
whose run it is; what the run's other modules send (checks, measurements, details, errors, busy, status)
is built here too, from the values they computed.
"""
from __future__ import annotations

import json
import time
import weakref

import torch

from .adapters import rope_theta
from .capture import block_average, block_edges, head_top_keys, logit_lens, top_tokens
from .packing import packed, rounded
from .forward import ForwardRow
from .payload import SCHEMA_VERSION
from .sampling import SampleResult

EMBED_DIMS = 16  # embedding/position dims sent per token (full rows on demand)
ROTARY_FREQS = 8  # rotary frequency pairs sent per position (full angles on demand)
# What goes in is decided by encoded size (JSON bytes), the unit of the transport's cap; messages past the
# send cap still go out, split into parts (inference/frames.py), so these only keep messages reasonable.
FULL_PREFILL_ATTENTION_BYTES = 176_000  # every prefill matrix is sent while they encode to at most this (3 frames)
SUMMARY_BLOCKS = 16
STEP_FRAME_BYTES = 64_000  # a step adds every head's row only while it still encodes to one frame of this


class Encoded(dict):
    """A message with the text frame it encodes to (strict json.dumps, as explainer/protocol.encode_frame
    sends it): made just before sending (frames.split_message), so the size and the socket share one
    encoding. Never changed after it is made."""
    __slots__ = ("text",)

    def __init__(self, message: dict, text: str):
        super().__init__(message)
        self.text = text


def encoded(message: dict) -> dict:
    """The message with its text; as it is when it is not strict JSON (the send path names that error)."""
    if isinstance(message, Encoded):
        return message
    try:
        return Encoded(message, json.dumps(message, allow_nan=False))
    except ValueError:
        return message


def encoded_size(message) -> int:
    """Bytes of the text frame: Channels' send_json is json.dumps with its defaults (ASCII-escaped)."""
    text = getattr(message, "text", None)
    return len(text) if text is not None else len(json.dumps(message).encode("utf-8"))


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


def token_info(session, token_id: int) -> dict:
    return {"id": token_id, "text": piece(session.tokenizer, token_id), "special": token_id in session.special_ids}


def logits_view(session, logits: torch.Tensor, read: list[tuple[int, float, float]] | None = None) -> dict:
    """The final distribution's top tokens (`read`: already taken with the batch, ForwardRow.logits_top)."""
    top = read if read is not None else top_tokens(logits[None])[0]
    return {"vocab_size": logits.shape[-1], "top": [
        {"id": i, "text": piece(session.tokenizer, i), "logit": round(v, 4), "prob": round(p, 6)} for i, v, p in top]}


def lens_view(session, hidden_last: torch.Tensor, final_logits: torch.Tensor | None = None,
              layers: list[int] | None = None, read: list[dict] | None = None) -> list[dict]:
    """hidden_last: (layers + 1, hidden); the lens reads layer outputs (rows 1..layers), by default the session's.
    `read`: the lens already read at the session's layers with its batch (ForwardRow.lens)."""
    layers = session.lens_layers if layers is None else layers
    rows = read if read is not None else logit_lens(session.model, session.adapter, hidden_last[1:], layers, final_logits)
    return [{**row, "texts": [piece(session.tokenizer, i) for i in row["ids"]]} for row in rows]


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


def ms(seconds: float) -> float:
    return round(seconds * 1e3, 3)


# ---- a run's payloads (GenerationSession) ---------------------------------------------------------
def session_payload(session) -> dict:
    return {"type": "session", "schema_version": SCHEMA_VERSION, "model": session.description.to_dict(),
            "params": session.params.to_dict(), "prompt_kind": session.prompt.kind,
            "capture": {"lens_layers": session.lens_layers, "keep_budget_bytes": session.kept.budget},
            "eos": [{"id": i, "text": piece(session.tokenizer, i)} for i in sorted(session.eos_ids)]}


def prefill_attention(row: ForwardRow, p: int) -> dict:
    """Every head's P x P matrix while small enough, else block averages; always the last row's top keys."""
    attentions = row.attentions  # layers x (heads, P, P)
    layers, heads = len(attentions), attentions[0].shape[0] if attentions else 0  # 0 layers: no attention
    full = packed_bytes(layers * heads * p * p) <= FULL_PREFILL_ATTENTION_BYTES
    keys, weights = head_top_keys(row.last_attn)  # last_attn: (layers, heads, P)
    return {"mode": "full" if full else "summary", "layers": layers, "heads": heads,
            "full": packed(torch.stack(attentions) if attentions else torch.zeros(0, 0, p, p)) if full else None,
            "blocks": None if full else packed(torch.stack([block_average(a, SUMMARY_BLOCKS) for a in attentions])),
            "block_edges": None if full else block_edges(p, SUMMARY_BLOCKS),
            "last_row": packed(row.last_attn.float().mean(dim=1)), "top_keys": keys, "top_weights": weights}


def prefill_payload(session, row: ForwardRow) -> dict:
    """capture_ms: from the end of the forward pass to this payload built (it counts what was kept, too)."""
    prompt, p = session.prompt, len(session.prompt.ids)
    rows = session.adapter.embed(session.model, torch.tensor([prompt.ids], device=session.model.device))[0]  # (P, hidden)
    table = session.adapter.token_embeddings(session.model).weight
    payload = {
        "type": "prefill", "schema_version": SCHEMA_VERSION,
        "template": {"text": prompt.text, "source": session.description.chat_template_source if prompt.kind == "messages" else prompt.kind,
                     "spans": prompt.spans},
        "tokens": [{**token_info(session, i), "bytes": prompt.offsets[n] if n < len(prompt.offsets) else None}
                   for n, i in enumerate(prompt.ids)],
        "embeddings": {"shape": list(table.shape), "slice": packed(rows[:, :EMBED_DIMS]), "norms": packed(rows.float().norm(dim=-1)),
                       "scale": float(session.description.hidden_size ** 0.5) if session.adapter.embedding_scale else 1.0},
        "positions": positions_view(session, p),
        "mask": {"kind": "causal", "size": p, "sliding_window": session.description.sliding_window},
        "attention": prefill_attention(row, p),
        "hidden_norms": packed(row.hidden.float().norm(dim=-1)),  # (layers + 1, P)
        "lens": lens_view(session, row.last_hidden, row.logits, read=row.lens),
        "logits": logits_view(session, row.logits, read=row.logits_top),
        "kv": session.kv(),
        "batch_size": row.batch_size,
    }
    payload["timing"] = {"forward_ms": round(row.forward_ms, 3), "capture_ms": ms(time.perf_counter() - row.ended_at),
                         "tokenize_ms": prompt.tokenize_ms}
    return payload


def step_timing(session, row: ForwardRow, sampling_ms: float, capture_started: float) -> dict:
    elapsed = session.clock() - session.started  # paused time left out (GenerationSession.hold)
    decode_s = session.clock() - session.first_token_at
    tokens = len(session.generated)
    return {"forward_ms": round(row.forward_ms, 3) if row.source == "decode" else 0.0,
            "capture_ms": ms(time.perf_counter() - capture_started), "sampling_ms": round(sampling_ms, 3),
            "ttft_ms": ms(session.first_token_at - session.started),
            "tokens_per_s": round((tokens - 1) / decode_s, 3) if tokens > 1 and decode_s > 0 else None,
            "elapsed_ms": ms(elapsed)}


def step_payload(session, row: ForwardRow, draw: SampleResult, delta: str, forced: bool, sampling_ms: float) -> dict:
    """The step just taken (session.step_index), sampled from `row`; capture_ms is this payload's building."""
    started = time.perf_counter()
    attn = row.last_attn  # (layers, heads, keys)
    keys, weights = head_top_keys(attn)
    position = session.prompt_length + session.step_index - 2
    input_id = session.ids[position]
    step = {
        "type": "step", "schema_version": SCHEMA_VERSION, "step": session.step_index,
        "input": {"id": input_id, "text": piece(session.tokenizer, input_id), "position": position},
        "forward": row.source, "batch_size": row.batch_size,
        "attention": {"mode": "mean", "keys": attn.shape[-1], "mean": packed(attn.float().mean(dim=1)), "heads": None,
                      "top_keys": keys, "top_weights": weights},
        "hidden_norms": rounded(row.last_hidden.float().norm(dim=-1)),
        "lens": lens_view(session, row.last_hidden, row.logits, read=row.lens),
        "logits": logits_view(session, row.logits, read=row.logits_top),
        "stages": draw.stages,
        "probs": [{"id": i, "text": piece(session.tokenizer, i), "prob": p} for i, p in draw.probs_top],
        "draw": draw.draw, "greedy": session.params.greedy, "forced": forced,
        "token": {**token_info(session, draw.token_id), "prob": round(draw.prob, 6)},
        "text_delta": delta,
        "kv": session.kv(),
    }
    step["timing"] = step_timing(session, row, sampling_ms, started)  # the heads choice below (one packing) is left out
    step["stop_reason"] = session.finished
    if encoded_size(step) + packed_bytes(attn.numel()) + 64 <= STEP_FRAME_BYTES:  # 64: the packed dict's own keys
        step["attention"].update(mode="heads", heads=packed(attn))
    return step


def done_payload(session) -> dict:
    total = session.clock() - session.started if session.started else 0.0
    ttft = session.first_token_at - session.started if session.first_token_at else None
    n = len(session.generated)
    tpot = (total - ttft) / (n - 1) if ttft is not None and n > 1 else None
    return {"type": "done", "schema_version": SCHEMA_VERSION, "stop_reason": session.finished or "stopped",
            "steps": session.step_index, "text": session.reply_text(), "token_ids": session.generated,
            "timing": {"ttft_ms": ms(ttft) if ttft is not None else None, "total_ms": ms(total),
                       "tokens_per_s": round(1 / tpot, 3) if tpot else None, "tpot_ms": ms(tpot) if tpot else None}}


# ---- answers on demand (inference/ondemand.py) -----------------------------------------------------
def detail_payload(what: str, data: dict, step=None, layer=None, head=None, position=None, lens=None) -> dict:
    """data: a packed array (the full matrix or vector); lens: every layer's rows (what=lens)."""
    return {"type": "detail", "schema_version": SCHEMA_VERSION, "what": what, "step": step, "layer": layer,
            "head": head, "position": position, "lens": lens, "data": data}


def retemper_payload(session, step: int, params, draw: SampleResult) -> dict:
    """Where step's own u lands under `params` (temperature, top_k, top_p, min_p)."""
    return {"type": "retemper", "schema_version": SCHEMA_VERSION, "step": step,
            "params": {k: getattr(params, k) for k in ("temperature", "top_k", "top_p", "min_p")},
            "stages": draw.stages,
            "probs": [{"id": i, "text": piece(session.tokenizer, i), "prob": p} for i, p in draw.probs_top],
            "token": {"id": draw.token_id, "text": piece(session.tokenizer, draw.token_id), "prob": round(draw.prob, 6)},
            "draw": draw.draw}


# ---- the server's other messages (explainer/services) ----------------------------------------------
def check_payload(name: str, passed: bool, data: dict) -> dict:
    return {"type": "check", "schema_version": SCHEMA_VERSION, "name": name, "passed": passed, "data": data}


def serving_payload(what: str, data: dict, prompt: str | None = None) -> dict:
    """A measurement's reply; `prompt` says whose prompt it ran on (article | yours | none)."""
    reply = {"type": "serving", "schema_version": SCHEMA_VERSION, "what": what, "data": data}
    return reply if prompt is None else {**reply, "prompt": prompt}


def serving_progress_payload(what: str, done: int, total: int, label: str) -> dict:
    """The `serving_progress` message: `done` of `total` parts finished, `label` runs now."""
    return {"type": "serving_progress", "schema_version": SCHEMA_VERSION, "what": what, "done": done, "total": total, "label": label}


def measured_payload(reply: dict, measured_at: str) -> dict:
    """A `serving` reply stamped with when it was measured (top level, and in data, which the diagram reads)."""
    return {**reply, "measured_at": measured_at, "data": {**reply["data"], "measured_at": measured_at}}


def error_payload(code: str, message: str, field: str | None = None) -> dict:
    return {"type": "error", "code": code, "message": message, "field": field}


def busy_payload(reason: str, retry_after_s: float, what: str | None = None) -> dict:
    """`what`: the measurement refused (its diagram shows the wait and asks again, not the page's banner)."""
    reply = {"type": "busy", "reason": reason, "retry_after_s": retry_after_s}
    return reply if what is None else {**reply, "what": what}


def status_payload(state: str, message: str = "", **extra) -> dict:
    """extra: run_state (the run's own state), reason (why a run ended)."""
    return {"type": "status", "state": state, "message": message, **extra}


def workshop_payload(following: bool, host_live: bool, pins: dict, limits: dict, broadcast: dict) -> dict:
    """A follower page's view of the workshop: the toggle, the banner, the pinned parameters."""
    return {"type": "workshop", "following": following, "host_live": host_live, "pins": pins, "limits": limits,
            "broadcast": broadcast}


def part_payload(of: str, index: int, count: int, pieces: list[dict]) -> dict:
    """One `part` of a message cut under the send cap (inference/frames.py cuts it)."""
    return {"type": "part", "schema_version": SCHEMA_VERSION, "of": of, "index": index, "count": count, "pieces": pieces}

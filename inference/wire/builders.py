"""The run's messages, built here and only here from typed records (fields: schema.SCHEMA, docs/protocol.md).

The engine hands in records (records.py); the builders never read a session, never call the model and never
decode a token: every text they name is in the record's ``texts``. Messages that only the web side sends
(status, busy, error, workshop) are built there (explainer/messages.py).
"""
from __future__ import annotations

import json
import time

import torch

from inference.capture import block_average, block_edges, head_top_keys, least_first_token_head
from .canonical import Canonical, canonical_text, with_first_member
from .packing import Packed, packed, rounded
from .records import DoneRecord, PrefillRecord, RetemperRecord, SessionRecord, StepRecord
from .schema import SCHEMA_VERSION

# What goes in is decided by encoded size (JSON bytes), the unit of the transport's cap; messages past the
# send cap still go out, split into parts (framing.py), so these only keep messages reasonable.
FULL_PREFILL_ATTENTION_BYTES = 176_000  # every prefill matrix is sent while they encode to at most this (3 frames)
SUMMARY_BLOCKS = 16
# A prompt this short is drawn as its full token-labelled matrix. Every head's matrix would be too much to send
# (SmolLM2's 30 layers x 9 heads x 64^2: 2.9 MB of JSON), so a summary prefill adds the default head's own.
FULL_MATRIX_TOKENS = 64
STEP_FRAME_BYTES = 64_000  # a step adds every head's row only while it still encodes to one frame of this


def packed_bytes(count: int) -> int:
    """Encoded size of ``count`` float16 values in a packed array: base64 of 2 bytes each."""
    return 4 * -(-2 * count // 3)


def ms(seconds: float) -> float:
    return round(seconds * 1e3, 3)


def token_view(texts: dict[int, str], special_ids, token_id: int) -> dict:
    return {"id": token_id, "text": texts[token_id], "special": token_id in special_ids}


def logits_view(texts: dict[int, str], vocab_size: int, top: list[tuple[int, float, float]]) -> dict:
    """The final distribution's top tokens, highest logit first."""
    return {"vocab_size": vocab_size, "top": [
        {"id": i, "text": texts[i], "logit": round(v, 4), "prob": round(p, 6)} for i, v, p in top]}


def lens_view(texts: dict[int, str], rows: list[dict]) -> list[dict]:
    """The logit lens rows {layer, ids, probs} with each id's text."""
    return [{**row, "texts": [texts[i] for i in row["ids"]]} for row in rows]


def probs_view(texts: dict[int, str], probs_top: list[tuple[int, float]]) -> list[dict]:
    return [{"id": i, "text": texts[i], "prob": p} for i, p in probs_top]


# ---- a run's payloads ------------------------------------------------------------------------------
def session_payload(record: SessionRecord) -> dict:
    return {"type": "session", "schema_version": SCHEMA_VERSION, "model": record.model, "params": record.params,
            "prompt_kind": record.prompt_kind,
            "capture": {"lens_layers": record.lens_layers, "keep_budget_bytes": record.keep_budget_bytes},
            "eos": [{"id": i, "text": record.texts[i]} for i in record.eos_ids]}


def prefill_attention(record: PrefillRecord) -> dict:
    """Every head's P x P matrix while small enough, else block averages; always the last row's top keys and the
    default head (with its own matrix for a short prompt)."""
    row, p = record.row, len(record.prompt.ids)
    attentions = row.attentions  # layers x (heads, P, P)
    layers, heads = len(attentions), attentions[0].shape[0] if attentions else 0  # 0 layers: no attention
    full = packed_bytes(layers * heads * p * p) <= FULL_PREFILL_ATTENTION_BYTES
    keys, weights = head_top_keys(row.last_attn)  # last_attn: (layers, heads, P)
    return {"mode": "full" if full else "summary", "layers": layers, "heads": heads,
            "full": packed(torch.stack(attentions) if attentions else torch.zeros(0, 0, p, p)) if full else None,
            "blocks": None if full else packed(torch.stack([block_average(a, SUMMARY_BLOCKS) for a in attentions])),
            "block_edges": None if full else block_edges(p, SUMMARY_BLOCKS),
            "last_row": packed(row.last_attn.float().mean(dim=1)), "top_keys": keys, "top_weights": weights,
            "default": default_head(attentions, full)}


def default_head(attentions, full: bool) -> dict | None:
    """The head drawn first, chosen from every head (capture.least_first_token_head), with its P x P matrix when
    the prompt is short enough to draw in full and the prefill does not already carry every matrix."""
    choice = least_first_token_head(attentions)
    if choice is None:
        return None
    p = attentions[0].shape[-1]
    short = not full and p <= FULL_MATRIX_TOKENS
    return {**choice, "full": packed(attentions[choice["layer"]][choice["head"]]) if short else None}


def positions_view(positions) -> dict:
    rotary = positions.rotary
    return {"scheme": positions.scheme, "learned": packed(positions.learned) if positions.learned is not None else None,
            "rotary": None if rotary is None else {"theta": rotary.theta, "head_dim": rotary.head_dim,
                                                   "freq_index": rotary.freq_index, "inv_freq": rotary.inv_freq,
                                                   "angles": packed(rotary.angles)}}


def prefill_payload(record: PrefillRecord) -> dict:
    """capture_ms: from the end of the forward pass to this payload built (it counts what was kept, too)."""
    prompt, row, texts, emb = record.prompt, record.row, record.texts, record.embeddings
    payload = {
        "type": "prefill", "schema_version": SCHEMA_VERSION,
        "template": {"text": prompt.text, "source": prompt.source, "spans": prompt.spans},
        "tokens": [{**token_view(texts, prompt.special_ids, i), "bytes": prompt.offsets[n] if n < len(prompt.offsets) else None}
                   for n, i in enumerate(prompt.ids)],
        "embeddings": {"shape": emb.table_shape, "slice": packed(emb.rows), "norms": packed(emb.norms), "scale": emb.scale},
        "positions": positions_view(record.positions),
        "mask": {"kind": "causal", "size": len(prompt.ids), "sliding_window": record.sliding_window},
        "attention": prefill_attention(record),
        "hidden_norms": packed(row.hidden.float().norm(dim=-1)),  # (layers + 1, P)
        "lens": lens_view(texts, record.lens),
        "logits": logits_view(texts, row.logits.shape[-1], record.top),
        "kv": record.kv,
        "batch_size": row.batch_size,
        "cached_tokens": record.cached_tokens,
        "prefix_cache": record.prefix_cache,
    }
    payload["timing"] = {"forward_ms": round(row.forward_ms, 3), "capture_ms": ms(time.perf_counter() - row.ended_at),
                         "tokenize_ms": prompt.tokenize_ms}
    return payload


def step_payload(record: StepRecord, capture_started: float) -> Canonical:
    """The step's message, with its canonical text (wire/canonical.py) written once; capture_ms counts from
    `capture_started` (the record's making) to this payload built."""
    row, texts, draw = record.row, record.texts, record.draw
    attn = row.last_attn  # (layers, heads, keys)
    step = {
        "type": "step", "schema_version": SCHEMA_VERSION, "step": record.step,
        "input": {"id": record.input_id, "text": texts[record.input_id], "position": record.position},
        "forward": row.source, "batch_size": row.batch_size,
        "hidden_norms": rounded(row.last_hidden.float().norm(dim=-1)),
        "lens": lens_view(texts, record.lens),
        "logits": logits_view(texts, row.logits.shape[-1], record.top),
        "stages": draw.stages,
        "probs": probs_view(texts, draw.probs_top),
        "draw": draw.draw, "greedy": record.greedy, "forced": record.forced,
        "token": {**token_view(texts, record.special_ids, draw.token_id), "prob": round(draw.prob, 6)},
        "text_delta": record.text_delta,
        "kv": record.kv,
    }
    timing = record.timing
    step["timing"] = {"forward_ms": round(row.forward_ms, 3) if row.source == "decode" else 0.0,
                      "capture_ms": ms(time.perf_counter() - capture_started), "sampling_ms": timing.sampling_ms,
                      "ttft_ms": timing.ttft_ms, "tokens_per_s": timing.tokens_per_s, "elapsed_ms": timing.elapsed_ms}
    step["stop_reason"] = record.stop_reason  # the attention choice below is left out of capture_ms
    try:
        rest = canonical_text(step)  # every member but the attention, which sorts first: its size decides the rows
    except ValueError:  # not strict JSON (a NaN from a broken model): as it is, and the send path names the error
        return {"attention": step_attention(attn, len(json.dumps(step))), **step}
    attention = step_attention(attn, len(rest))
    return Canonical({"attention": attention, **step}, with_first_member(rest, "attention", canonical_text(attention)))


def step_attention(attn: torch.Tensor, others: int) -> dict:
    """The mean over heads, and every head's row while the step (`others` bytes without its attention) still fits one
    frame; else each head's strongest keys are listed in place of the rows (the page lists them then). With every
    row sent they would be the rows' own top, 810 numbers a SmolLM2 step that the page never reads, and the slowest
    part of a step to write: 32 visitors' tick spent 53 ms of Python on the model's thread with them, 36 without
    (in-process), and a step at 60 keys is 49 KB instead of 58."""
    attention = {"mode": "mean", "keys": attn.shape[-1], "mean": packed(attn.float().mean(dim=1)), "heads": None,
                 "top_keys": None, "top_weights": None}
    rows = len(Packed(dtype="float16", shape=list(attn.shape), b64="").text()) + packed_bytes(attn.numel())
    size = others + len(',"attention":') + len(canonical_text(attention)) + len("heads") - len("mean") - len("null") + rows
    if size <= STEP_FRAME_BYTES:  # the step's text with every row, to the byte
        attention.update(mode="heads", heads=packed(attn))
        return attention
    top = head_top_keys(attn)
    attention.update(top_keys=top.keys, top_weights=top.weights)
    return attention


def done_payload(record: DoneRecord) -> dict:
    n, ttft = len(record.token_ids), record.ttft_s
    tpot = (record.total_s - ttft) / (n - 1) if ttft is not None and n > 1 else None
    return {"type": "done", "schema_version": SCHEMA_VERSION, "stop_reason": record.stop_reason,
            "steps": record.steps, "text": record.text, "token_ids": record.token_ids,
            "timing": {"ttft_ms": ms(ttft) if ttft is not None else None, "total_ms": ms(record.total_s),
                       "tokens_per_s": round(1 / tpot, 3) if tpot else None, "tpot_ms": ms(tpot) if tpot else None}}


# ---- answers on demand (inference/ondemand.py) -----------------------------------------------------
def detail_payload(what: str, data: dict, step=None, layer=None, head=None, position=None, lens=None) -> dict:
    """data: a packed array (the full matrix or vector); lens: every layer's rows with texts (what=lens)."""
    return {"type": "detail", "schema_version": SCHEMA_VERSION, "what": what, "step": step, "layer": layer,
            "head": head, "position": position, "lens": lens, "data": data}


def retemper_payload(record: RetemperRecord) -> dict:
    """Where the step's own u lands under the record's params (temperature, top_k, top_p, min_p)."""
    draw, texts = record.draw, record.texts
    return {"type": "retemper", "schema_version": SCHEMA_VERSION, "step": record.step, "params": record.params,
            "stages": draw.stages, "probs": probs_view(texts, draw.probs_top),
            "token": {"id": draw.token_id, "text": texts[draw.token_id], "prob": round(draw.prob, 6)},
            "draw": draw.draw}


def compare_payload(comparison, first_parting_step: int | None) -> dict:
    """What parts two runs at one step (inference/compare.py StepComparison) and where they first parted."""
    return {"type": "compare", "schema_version": SCHEMA_VERSION, **comparison.to_dict(),
            "first_parting_step": first_parting_step}


# ---- the run's other messages: checks and measurements ------------------------------------------------
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

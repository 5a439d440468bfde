"""Serving measurements for the article's second half, taken on the loaded model (never illustrative).

- ``prefill_decode``: time to first token against prompt length, one decode step's latency, and the
  arithmetic intensity of prefill vs decode computed from the model's size;
- ``kv_calculator``: bytes per token for the loaded model and the shipped real configs;
- ``capacity``: how many visitors' caches fit in a given memory at a given context length.
"""
from __future__ import annotations

import time

import torch
from transformers import DynamicCache

from .forward import synchronize
from .kvstats import DTYPE_BYTES, known_configs, kv_formula, kv_table
from .wire.said import said

TTFT_LENGTHS = (16, 64, 128, 256)


def weight_bytes(model) -> int:
    return sum(p.nbytes for p in model.parameters())


@torch.no_grad()
def time_prefill_and_step(loaded, length: int, seed: int = 0) -> dict:
    """One prefill over ``length`` random tokens, then one decode step, timed on the loaded model."""
    model = loaded.model
    generator = torch.Generator().manual_seed(seed + length)
    ids = torch.randint(0, loaded.description.vocab_size, (1, length), generator=generator).to(model.device)  # (1, P)
    cache = DynamicCache(config=model.config)
    t0 = time.perf_counter()
    out = model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
    synchronize(model.device)
    t1 = time.perf_counter()
    model(input_ids=out.logits[:, -1:].argmax(-1), cache=out.cache, use_cache=True)  # (1, 1): one decode step
    synchronize(model.device)
    t2 = time.perf_counter()
    return {"prompt_tokens": length, "prefill_ms": round((t1 - t0) * 1e3, 3), "decode_ms": round((t2 - t1) * 1e3, 3)}


def prefill_decode(loaded, lengths=TTFT_LENGTHS, progress=None) -> dict:
    """TTFT against prompt length, measured; and why decode is memory-bound, computed from the config.

    ``progress(done, total, label)``, if given, is called before each timed part (the page shows it)."""
    window = loaded.description.context_window
    lengths = [n for n in lengths if n < window]
    report = progress or (lambda done, total, label: None)
    report(0, len(lengths) + 1, said("a warm-up pass"))
    time_prefill_and_step(loaded, min(lengths))  # warm-up: first calls pay one-off costs
    rows = []
    for i, n in enumerate(lengths):
        report(i + 1, len(lengths) + 1, said("a prefill of %(tokens)s tokens, then one decode step", tokens=n))
        rows.append(time_prefill_and_step(loaded, n))
    params, wbytes = loaded.description.parameters, weight_bytes(loaded.model)
    kv_per_token = kv_formula(loaded.model.config, loaded.description.dtype if loaded.description.dtype in DTYPE_BYTES else "float32", 1)["bytes_per_token"]
    flops_per_token = 2 * params  # one multiply-add per weight per token (attention scores are small at these lengths)
    return {
        "rows": rows,
        "parameters": params, "weight_bytes": wbytes, "kv_bytes_per_token": kv_per_token,
        "flops_per_token": flops_per_token,
        # decode reads every weight (and the cache) for one token; prefill reads them once for P tokens
        "decode_intensity": round(flops_per_token / wbytes, 3),
        "prefill_intensity": {str(r["prompt_tokens"]): round(flops_per_token * r["prompt_tokens"] / wbytes, 3) for r in rows},
        "prefill_tokens_per_s": {str(r["prompt_tokens"]): round(r["prompt_tokens"] / (r["prefill_ms"] / 1e3), 1) for r in rows},
        "decode_tokens_per_s": round(1e3 / rows[-1]["decode_ms"], 1),
    }


def kv_calculator(loaded, tokens=(1, 2048, 32768, 1_000_000), dtype: str = "float16") -> dict:
    """The shipped configs and the loaded model, bytes per token and for N tokens (the formula shown)."""
    configs = {"loaded": {**loaded.model.config.to_dict(), "_name": f"{loaded.description.name} (this server)"},
               **known_configs()}
    return {"dtype": dtype, "tokens": list(tokens), "rows": kv_table(configs, list(tokens), dtype),
            "formula": "2 (K and V) x layers x KV heads x head dim x bytes per element"}


def capacity(loaded, memory_bytes: int, context_tokens: int, dtype: str | None = None) -> dict:
    """How many visitors' KV caches fit beside the weights in ``memory_bytes`` at ``context_tokens`` each."""
    dtype = dtype or (loaded.description.dtype if loaded.description.dtype in DTYPE_BYTES else "float32")
    per_visitor = kv_formula(loaded.model.config, dtype, context_tokens)["total_bytes"]
    free = memory_bytes - weight_bytes(loaded.model)
    return {"memory_bytes": memory_bytes, "context_tokens": context_tokens, "dtype": dtype,
            "weight_bytes": weight_bytes(loaded.model), "kv_bytes_per_visitor": per_visitor,
            "visitors": max(0, free // per_visitor) if per_visitor else None}

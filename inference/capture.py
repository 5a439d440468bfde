"""Instrumentation that lives outside the model: hooks on the decoder layers, attentions from
``output_attentions``, and summaries of both sized for the wire.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch

from .adapters import FamilyAdapter

LENS_TOP = 5  # tokens per layer in the logit lens
HEAD_TOP_KEYS = 3  # strongest keys kept per head in attention summaries
LENS_FULL_BUDGET = 2_000_000  # layers x vocab above which the lens reads a subset of layers by default


@contextmanager
def residual_stream(model, adapter: FamilyAdapter):
    """Record each decoder layer's output (the residual stream); hooks are always removed."""
    outputs: list[torch.Tensor] = []

    def record(_module, _inputs, output):
        outputs.append(output[0] if isinstance(output, tuple) else output)  # (batch, seq, hidden)

    handles = [layer.register_forward_hook(record) for layer in adapter.layers(model)]
    try:
        yield outputs
    finally:
        for handle in handles:
            handle.remove()


def lens_layers(num_layers: int, vocab_size: int, mode: str = "auto") -> list[int]:
    """Which layers the logit lens reads: all of them, or (large models, by default) about eight."""
    if mode == "all" or (mode == "auto" and num_layers * vocab_size <= LENS_FULL_BUDGET):
        return list(range(num_layers))
    stride = max(1, round(num_layers / 8))
    return sorted(set(range(stride - 1, num_layers, stride)) | {num_layers - 1})


@torch.no_grad()
def logit_lens(model, adapter: FamilyAdapter, residuals: torch.Tensor, layers: list[int]) -> list[dict]:
    """Top tokens each layer's residual would predict, read through the final norm and LM head."""
    picked = residuals[layers]  # (lens_layers, hidden)
    logits = model.get_output_embeddings()(adapter.final_norm(model)(picked)).float()  # (lens_layers, vocab)
    probs = torch.softmax(logits, dim=-1)
    top_p, top_i = probs.topk(LENS_TOP, dim=-1)  # (lens_layers, LENS_TOP)
    return [{"layer": layer, "ids": top_i[n].tolist(), "probs": [round(p, 4) for p in top_p[n].tolist()]}
            for n, layer in enumerate(layers)]


def head_top_keys(attn: torch.Tensor, k: int = HEAD_TOP_KEYS) -> tuple[list, list]:
    """For one query row per head: the strongest keys and their weights. attn: (layers, heads, keys)."""
    k = min(k, attn.shape[-1])
    weights, keys = attn.float().topk(k, dim=-1)  # (layers, heads, k)
    return keys.tolist(), [[[round(w, 4) for w in head] for head in layer] for layer in weights.tolist()]


def block_average(matrix: torch.Tensor, blocks: int) -> torch.Tensor:
    """Average a (..., q, k) matrix over a blocks x blocks grid (summary of a large attention map)."""
    q, k = matrix.shape[-2:]
    pooled = torch.nn.functional.adaptive_avg_pool2d(matrix.float().reshape(-1, 1, q, k), (min(blocks, q), min(blocks, k)))
    return pooled.reshape(*matrix.shape[:-2], *pooled.shape[-2:])

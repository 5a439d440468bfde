"""Instrumentation that lives outside the model: hooks on the decoder layers, attentions from
``output_attentions``, and summaries of both sized for the wire.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from functools import lru_cache
from typing import NamedTuple

import numpy as np
import torch

from .adapters import FamilyAdapter
from .wire.packing import PlainList

LENS_TOP = 5  # tokens per layer in the logit lens
LOGITS_TOP = 10  # tokens of the final distribution a payload lists
HEAD_TOP_KEYS = 3  # strongest keys kept per head in attention summaries
LENS_FULL_BUDGET = 400_000  # layers x vocab up to which every layer is read by default (small models)
LENS_COST_SHARE = 0.08  # otherwise: intermediate layers read so the lens costs about this share of a forward


@contextmanager
def residual_stream(model, adapter: FamilyAdapter):
    """Record what layer 0 receives, then each decoder layer's output (the residual stream); hooks are
    always removed. Models that loop over their layers (several passes) keep the last pass. Only this
    thread's forward passes are recorded: the hooks sit on the shared model, and a pass another thread runs
    meanwhile (a pass run ahead on the device thread while a test or a tool runs its own) is not this one's."""
    outputs: list[torch.Tensor] = []
    layers = adapter.layers(model)
    mine = threading.get_ident()

    def record_input(_module, args, kwargs):
        if not outputs and threading.get_ident() == mine:
            outputs.append(args[0] if args else kwargs.get("hidden_states", next(iter(kwargs.values()), None)))

    def record(_module, _inputs, output):
        if threading.get_ident() != mine:
            return
        outputs.append(output[0] if isinstance(output, (tuple, list)) else output)  # (batch, seq, hidden)
        if len(outputs) > len(layers) + 1:  # a second pass over the layers: keep the latest
            del outputs[1]

    handles = [layers[0].register_forward_pre_hook(record_input, with_kwargs=True)]
    handles += [layer.register_forward_hook(record) for layer in layers]
    try:
        yield outputs
    finally:
        for handle in handles:
            handle.remove()


def lens_layers(num_layers: int, vocab_size: int, mode: str = "auto", parameters: int = 0, hidden_size: int = 0) -> list[int]:
    """Which layers the logit lens reads by default: all of them on small models; on large ones the last
    (whose lens is the model's own logits, free) and as many evenly spaced layers as the cost share allows
    (none on a SmolLM2-135M shape, where one read costs ~20% of the forward pass).

    Each read costs one LM-head matmul over the whole vocabulary (2 x hidden x vocab FLOPs, against about
    2 x parameters for the forward pass): on a 30-layer, 49k-vocabulary model reading every layer would
    cost more than the forward itself. Every layer stays available on demand (detail what=lens).
    """
    if mode == "all" or (mode == "auto" and num_layers * vocab_size <= LENS_FULL_BUDGET):
        return list(range(num_layers))
    per_read = hidden_size * vocab_size
    reads = round(LENS_COST_SHARE * parameters / per_read) if per_read and parameters else 4
    reads = max(0, min(reads, num_layers - 1))
    stride = num_layers / (reads + 1)
    return sorted({round(stride * (i + 1)) - 1 for i in range(reads)} | {num_layers - 1})


@torch.no_grad()
def logit_lens(model, adapter: FamilyAdapter, residuals: torch.Tensor, layers: list[int],
               final_logits: torch.Tensor | None = None, final_top: list | None = None) -> list[dict]:
    """Top tokens each layer's residual would predict, read through the final norm and LM head.

    residuals: (layers, hidden). The last layer's lens is the model's own logits: pass them to reuse them (and their
    top_tokens, `final_top`, where read already).
    """
    final = None if final_logits is None else final_logits[None]
    return logit_lens_rows(model, adapter, residuals[None], layers, final, None if final_top is None else [final_top])[0]


@torch.no_grad()
def logit_lens_rows(model, adapter: FamilyAdapter, residuals: torch.Tensor, layers: list[int],
                    final_logits: torch.Tensor | None = None, final_top: list | None = None) -> list[list[dict]]:
    """logit_lens for a batch of rows read at the same layers, in one pass through the norm and LM head.

    residuals: (rows, layers, hidden); final_logits: (rows, vocab) or None. One list of layer dicts per row.
    final_top: each row's top_tokens of final_logits, where read already: the last layer's lens is their first
    LENS_TOP (the same ranking and probabilities, so the lens's last layer and the logits' top agree on ties).
    """
    last = residuals.shape[1] - 1
    if not adapter.lens_ok:  # intermediate layers cannot be read through this model's head
        layers = [layer for layer in layers if layer == last] if final_logits is not None else []
    if not layers:
        return [[] for _ in range(residuals.shape[0])]
    found = [{} for _ in range(residuals.shape[0])]
    if final_top is not None and last in layers and all(len(top) >= LENS_TOP for top in final_top):
        for row, top in zip(found, final_top):
            row[last] = {"layer": last, "ids": [t[0] for t in top[:LENS_TOP]],
                         "probs": [round(t[2], 4) for t in top[:LENS_TOP]]}
    read = [layer for layer in layers if layer not in found[0]]
    reuse = final_logits is not None and last in read
    computed = [layer for layer in read if not (reuse and layer == last)]
    if read:
        logits = None
        if computed:  # (rows, computed, vocab)
            logits = model.get_output_embeddings()(adapter.final_norm(model)(residuals[:, computed])).float()
        if reuse:
            final = final_logits.float()[:, None]  # (rows, 1, vocab)
            logits = final if logits is None else torch.cat([logits, final], dim=1)
            computed = computed + [last]
        top_logits, top_i = logits.topk(LENS_TOP, dim=-1)  # (rows, computed, LENS_TOP)
        top_p = torch.exp(top_logits - torch.logsumexp(logits, dim=-1, keepdim=True))
        for row, ids_row, probs_row in zip(found, top_i.tolist(), top_p.tolist()):
            row.update({layer: {"layer": layer, "ids": ids_row[n], "probs": [round(p, 4) for p in probs_row[n]]}
                        for n, layer in enumerate(computed)})
    return [[row[layer] for layer in layers] for row in found]


def ranked_topk(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """topk along the last dim with ties in id order, so the first is argmax's own pick: bf16 logits (CUDA) tie
    often, and topk there orders ties as it likes (the greedy token and the top row disagreed)."""
    values, ids = x.topk(min(k, x.shape[-1]), dim=-1)  # (..., k)
    ids, by_id = ids.sort(dim=-1)
    values, by_value = values.gather(-1, by_id).sort(dim=-1, descending=True, stable=True)
    return values, ids.gather(-1, by_value)


@torch.no_grad()
def top_tokens(logits: torch.Tensor, k: int = LOGITS_TOP) -> list[list[tuple[int, float, float]]]:
    """Per row of (rows, vocab) logits: the k highest as (id, logit, prob), prob the softmax over the whole row."""
    values, ids = ranked_topk(logits.float(), k)  # (rows, k)
    probs = torch.exp(values - torch.logsumexp(logits.float(), dim=-1, keepdim=True))  # softmax, top entries only
    return [list(zip(i, v, p)) for i, v, p in zip(ids.tolist(), values.tolist(), probs.tolist())]


class TopKeys(NamedTuple):
    """A query row's strongest keys per head, as the wire lists them."""
    keys: list  # (layers, heads, k) key positions
    weights: list  # (layers, heads, k) their weights, 4 decimals


def head_top_keys(attn: torch.Tensor, k: int = HEAD_TOP_KEYS) -> TopKeys:
    """For one query row per head: the strongest keys (ties: the earlier key) and their weights. attn: (layers,
    heads, keys). Read as k rounds of numpy's argmax, each striking out what it found: a topk over a visitor's
    30 x 9 rows took ~200 us on SmolLM2 (its partial sort branches on every weight), these ~40."""
    k = min(k, attn.shape[-1])
    work = np.array(attn.float().cpu().numpy(), copy=True).reshape(-1, attn.shape[-1])  # (layers * heads, keys)
    at = np.arange(work.shape[0])
    keys = np.empty((work.shape[0], k), dtype=np.int64)
    found = np.empty((work.shape[0], k), dtype=np.float64)
    for n in range(k):
        best = work.argmax(axis=1)  # (layers * heads,) the first of equal weights
        keys[:, n], found[:, n] = best, work[at, best]
        work[at, best] = -np.inf
    tenths = np.round(found * 1e4).reshape(*attn.shape[:-1], k)  # (layers, heads, k): 4 decimals, as round(w, 4)
    listed = (tenths / 1e4).tolist()
    for layer, head, n in np.argwhere(tenths % 1e4 == 0).tolist():  # 0 and 1 (any whole weight: a row's sums)
        listed[layer][head][n] = int(listed[layer][head][n])  # as a browser writes them (PlainList)
    return TopKeys(PlainList(keys.reshape(*attn.shape[:-1], k).tolist()), PlainList(listed))


def block_average(matrix: torch.Tensor, blocks: int) -> torch.Tensor:
    """Average a (..., q, k) matrix over disjoint blocks x blocks bins, those of block_edges (a large map's summary)."""
    q, k = matrix.shape[-2:]
    rows, cols = (bin_means(n, blocks).to(matrix.device) for n in (q, k))  # (B, q), (B, k)
    return rows @ matrix.float() @ cols.T


@lru_cache(maxsize=256)
def bin_means(size: int, blocks: int) -> torch.Tensor:
    """(B, size): row b averages the positions block_edges puts in block b (disjoint: each position in one block).
    Cached (a prefill summarises every layer with the same bins): read it, never write into it. Made outside
    inference mode, so a cached copy is an ordinary tensor wherever it is read."""
    edges = block_edges(size, blocks)
    with torch.inference_mode(False):
        out = torch.zeros(len(edges) - 1, size)
        for b, (start, end) in enumerate(zip(edges, edges[1:])):
            out[b, start:end] = 1 / (end - start)
    return out


def block_edges(size: int, blocks: int) -> list[int]:
    """Where each of min(blocks, size) disjoint blocks starts, then ``size``: block b is [edges[b], edges[b+1])."""
    blocks = min(blocks, size)
    return [(b * size) // blocks for b in range(blocks)] + [size]


FIRST_TOKEN_RULE = "the head that looks least at the first token"


def least_first_token_head(attentions) -> dict | None:
    """The (layer, head) whose queries after the first give the first token the least mean weight (FIRST_TOKEN_RULE).

    Most heads park their weight on the first token (an "attention sink") and draw as one dark column; the head
    that does so least shows what the prompt's tokens do read. attentions: per layer (heads, P, P). Ties: the first.
    """
    if not attentions:
        return None
    p = attentions[0].shape[-1]
    if p < 2:  # the only query can read only the first token
        return {"layer": 0, "head": 0, "rule": FIRST_TOKEN_RULE, "first_token_weight": 1.0}
    shares = torch.stack([a[:, 1:, 0].float().mean(dim=-1) for a in attentions])  # (layers, heads)
    best = int(torch.argmin(shares))
    layer, head = divmod(best, shares.shape[1])
    return {"layer": layer, "head": head, "rule": FIRST_TOKEN_RULE, "first_token_weight": round(float(shares[layer, head]), 4)}

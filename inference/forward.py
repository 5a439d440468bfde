"""What one session's row of a forward pass holds: a typed record, like TransformerLens' run_with_cache.

The engine (inference/engine.py, one session) and the scheduler (inference/scheduler.py, a batch) both
hand back one ForwardRow per session; the capture records (inference/capture_records.py) carry it to the builders.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace

import torch
from torch.nn.functional import pad
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

from .capture import logit_lens_rows, top_tokens
from .discovery import is_attention


@dataclass
class ForwardRow:
    """One session's row of a forward pass: its logits, attention rows over its own cache, hidden states."""
    logits: torch.Tensor  # (vocab,) float32 at the last position
    hidden: torch.Tensor  # (layers + 1, new, hidden): layer 0's input, then each layer's output
    last_attn: torch.Tensor  # (layers, heads, keys): the last position's attention rows, every head
    forward_ms: float  # the pass's own time (a batched pass: the whole batch's)
    ended_at: float  # time.perf_counter() when the pass ended: capture time counts from here
    attentions: list[torch.Tensor] = field(default_factory=list)  # layers x (heads, new, keys)
    batch_size: int = 1  # sessions whose decode shared this pass
    source: str = "decode"  # prefill | decode: the pass a step samples from
    lens: list[dict] | None = None  # the logit lens at the session's layers, when read with the batch (read_lens)
    logits_top: list | None = None  # [(id, logit, prob)] the final distribution's top, when read with the batch

    def last_position(self, source: str) -> "ForwardRow":
        """What the next step samples from: the last position only (the prefill's full capture is sent and kept)."""
        return replace(self, hidden=self.hidden[:, -1:], attentions=[], source=source)

    @property
    def last_hidden(self) -> torch.Tensor:
        """(layers + 1, hidden): the residual stream at the last position."""
        return self.hidden[:, -1]


def read_lens(rows: list[ForwardRow], sessions, logits: torch.Tensor | None = None) -> list[ForwardRow]:
    """Each row with its logit lens at its session's layers and its logits' top tokens, read for every row of a
    batch at once (one pass through the final norm and LM head, one top-k; not one per visitor). `logits`: the
    rows' logits as one (rows, vocab) tensor already (a batched pass's own), else stacked here."""
    groups: dict[tuple, list[int]] = {}
    for i, session in enumerate(sessions):
        groups.setdefault(tuple(session.lens_layers), []).append(i)
    logits = torch.stack([row.logits for row in rows]) if logits is None else logits  # (rows, vocab)
    tops = top_tokens(logits)  # in one top-k
    lenses: list[list | None] = [None] * len(rows)
    for layers, members in groups.items():
        first = sessions[members[0]]
        residuals = torch.stack([rows[i].last_hidden[1:] for i in members])  # (members, layers, hidden)
        finals = logits if len(members) == len(rows) else logits[members]  # (members, vocab)
        known = [tops[i] for i in members]
        for i, lens in zip(members, logit_lens_rows(first.model, first.adapter, residuals, list(layers), finals, known)):
            lenses[i] = lens
    return [replace(row, logits_top=top, lens=lens) for row, top, lens in zip(rows, tops, lenses)]


def plain_cache(cache) -> bool:
    """Only DynamicLayer caches: positions append, nothing slides or recurs (chunks and batches are exact)."""
    return cache is not None and all(type(layer) is DynamicLayer for layer in cache.layers)


def cache_holding(pairs) -> DynamicCache:
    """A DynamicCache of plain layers holding these (keys, values) as they are (its constructor copies them).
    Each layer is set as DynamicLayer.lazy_initialization sets it, less the two empty tensors it makes to be
    replaced at once (60 per SmolLM2 row, every row of every tick: most of a row's cache;
    tests/inference/test_stacked_cache.py holds the two ways equal)."""
    pairs = list(pairs)
    cache = DynamicCache(ddp_cache_data=[(None, None)] * len(pairs))  # empty DynamicLayers
    for layer, (keys, values) in zip(cache.layers, pairs):
        layer.device, layer.is_initialized = keys.device, True
        layer.keys, layer.values = keys, values
    return cache


def own_cache(batched: DynamicCache, row: int, pad: int) -> DynamicCache:
    """Row `row` of the batch's updated cache, without its left padding (a copy: the batch's tensors go)."""
    return cache_holding((layer.keys[row:row + 1, :, pad:].clone(), layer.values[row:row + 1, :, pad:].clone())
                         for layer in batched.layers)


def joined_parts(parts: list[ForwardRow], keys: int) -> ForwardRow:
    """A prompt fed in chunks as one prefill row: each chunk's attention rows padded on the right to all
    `keys` (a query never sees later keys: those weights are exactly 0), hidden states concatenated."""
    last = parts[-1]
    attentions = [torch.cat([pad(p.attentions[n], (0, keys - p.attentions[n].shape[-1])) for p in parts], dim=1)
                  for n in range(len(last.attentions))]  # layers x (heads, P, P)
    return replace(last, attentions=attentions, hidden=torch.cat([p.hidden for p in parts], dim=1),
                   forward_ms=sum(p.forward_ms for p in parts))


def aligned_attentions(returned, new: int, seen: int, layers: int) -> list[torch.Tensor]:
    """Each attention layer's weights (heads, new, keys), left-padded with zeros to the most keys any layer
    read, so sliding-window layers line up with full ones on the same (most recent) positions."""
    weights = [a[0] for a in (returned or ()) if is_attention(a, new, seen)][-layers:]  # looped models: last pass
    keys = max((w.shape[-1] for w in weights), default=0)
    return [torch.nn.functional.pad(w, (keys - w.shape[-1], 0)) if w.shape[-1] < keys else w for w in weights]


def last_rows(attentions: list[torch.Tensor], new: int) -> torch.Tensor:
    """(layers, heads, keys): the last position's row of every layer (empty for models without attention)."""
    return torch.stack([a[:, -1] for a in attentions]) if attentions else torch.zeros(0, 0, new)


def one_thread():
    """For per-row work after a forward pass (sampling, top-k and softmax over the vocabulary, summaries):
    many small ops, each of which, split over cores, waits for the slowest one (on a busy machine, a whole
    time slice: ~10x slower measured on the shared 2-core box). The forward passes keep every thread."""
    return torch_threads(1)


@contextlib.contextmanager
def torch_threads(count: int):
    """torch's intra-op threads on this thread are `count` inside the block, as before after it."""
    threads = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def synchronize(device: torch.device) -> None:
    """Make forward timings honest on CUDA, where kernels run asynchronously."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)

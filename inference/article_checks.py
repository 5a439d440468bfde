"""Live checks the article shows as data: measured on the running model, never asserted by prose."""
from __future__ import annotations

import torch

from .forward import cache_holding
from .prefix_cache import PrefixStart


@torch.no_grad()
def causal_mask_check(loaded, ids: list[int], change_at: int, replacement: int,
                      prefill_hidden: torch.Tensor | None = None, changed_hidden: torch.Tensor | None = None) -> dict:
    """Change the token at ``change_at`` and measure how much every position's residual stream moved.

    With a causal mask, positions before ``change_at`` cannot see it: their change is exactly 0.
    ``prefill_hidden``: the run's own prefill residuals (layers + 1, seq, hidden), float32, from one pass
    over ``ids``; the changed prompt then goes through the same pass (prefill_pass), so only one forward runs.
    ``changed_hidden``: the changed prompt's residuals from the same batched pass as ``prefill_hidden``
    (inference/batched_prefill.py): then no forward runs here.
    """
    if not 0 < change_at < len(ids):
        raise ValueError(f"change_at must be in [1, {len(ids) - 1}], got {change_at}")
    changed = list(ids)
    changed[change_at] = replacement
    # Two passes of the same shape (or two equal-length rows of one pass), not rows of different batches:
    # those may take a different summation order in the matmuls and differ in the last bit, which is not
    # what this check is about.
    original = prefill_hidden if prefill_hidden is not None else prefill_pass(loaded, ids)
    twin = changed_hidden if changed_hidden is not None and prefill_hidden is not None else prefill_pass(loaded, changed)
    runs = [original, twin]  # 2 x (layers + 1, seq, hidden): the residual stream
    moved = (runs[0] - runs[1]).abs().amax(dim=-1).amax(dim=0)  # (seq,)
    return {"change_at": change_at, "original": ids[change_at], "replacement": replacement,
            "max_abs_change": [float(x) for x in moved.tolist()],
            "earlier_unchanged": bool((moved[:change_at] == 0).all())}


@torch.no_grad()
def prefill_pass(loaded, ids: list[int]) -> torch.Tensor:
    """(layers + 1, seq, hidden): the residual stream of the same forward a session's prefill runs (engine._forward)."""
    from .capture import residual_stream
    with residual_stream(loaded.model, loaded.adapter) as residuals:
        loaded.model(input_ids=torch.tensor([ids], device=loaded.model.device), use_cache=loaded.adapter.has_cache,
                     output_attentions=True, logits_to_keep=1)
    return torch.stack([r[0] for r in residuals])


class ResidualPass:
    """prefill_pass in chunks on one cache, one chunk per call (feed()), so a long prompt's check never holds the
    device for a whole pass: other visitors' steps run between the chunks. The twin goes through the chunks the
    run's own prefill went through (`sizes`), so its positions before the change see exactly that computation.
    `start`: the prefix the run's prefill took from the prefix cache; the pass continues from its keys and values,
    and `sizes` cover the rest of `ids`."""

    def __init__(self, loaded, ids: list[int], sizes: list[int], start: PrefixStart | None = None):
        begin = start.tokens if start is not None else 0
        assert begin + sum(sizes) == len(ids), "the chunks must cover the prompt"
        self.loaded, self.ids, self.sizes = loaded, ids, list(sizes)
        self.fed, self.cache, self.parts = begin, None, []
        if start is not None:
            self.cache, self.parts = cache_holding(start.kv), [start.hidden]

    @torch.no_grad()
    def feed(self) -> bool:
        """Run the next chunk; True while more are left."""
        from .capture import residual_stream
        model = self.loaded.model
        ids = self.ids[self.fed:self.fed + self.sizes[0]]
        self.sizes = self.sizes[1:]
        with residual_stream(model, self.loaded.adapter) as residuals:
            out = model(input_ids=torch.tensor([ids], device=model.device), cache=self.cache,
                        use_cache=True, output_attentions=True, logits_to_keep=1)
        self.cache = out.cache
        self.parts.append(torch.stack([r[0] for r in residuals]))  # (layers + 1, chunk, hidden)
        self.fed += len(ids)
        return self.fed < len(self.ids)

    def result(self) -> torch.Tensor:
        """(layers + 1, seq, hidden), once every chunk is fed; the cache is let go."""
        self.cache = None
        return torch.cat(self.parts, dim=1)


@torch.no_grad()
def weights_checksum(model) -> dict:
    """A cheap fingerprint of every parameter: (sum, sum of absolute values) in float64."""
    return checksum_of(parameter_sums(list(model.parameters())), sum(p.numel() for p in model.parameters()))


@torch.no_grad()
def parameter_sums(parameters) -> list[tuple[float, float]]:
    """(sum, sum of absolute values) in float64 of each parameter, in order."""
    return [double_sums(p.to(torch.float64, copy=True)) for p in parameters]


def double_sums(wide: torch.Tensor) -> tuple[float, float]:
    """(sum, sum of absolute values) of a float64 copy, made absolute in place: one copy per parameter, not
    three (the same float64 sums, bit for bit). A copy always (copy=True): .double() of a float64 parameter is
    the parameter itself, which abs_() would change."""
    total = float(wide.sum())
    return total, float(wide.abs_().sum())


def checksum_of(sums: list[tuple[float, float]], count: int) -> dict:
    """weights_checksum from parameter_sums, added in the same order (so slices give the same bits)."""
    total = absolute = 0.0
    for s, a in sums:
        total += s
        absolute += a
    return {"sum": total, "abs_sum": absolute, "parameters": count}


def parameter_slices(model, max_elements: int) -> list[list]:
    """The model's parameters in order, in groups of about max_elements (one group per device call)."""
    groups, size = [[]], 0
    for p in model.parameters():
        if groups[-1] and size + p.numel() > max_elements:
            groups.append([])
            size = 0
        groups[-1].append(p)
        size += p.numel()
    return groups


def causal_position(prompt_ids: list[int], special_ids: set[int], decode) -> int | None:
    """The last word-like prompt token: the 'later token' the causal-mask check replaces."""
    words = [i for i, t in enumerate(prompt_ids) if i > 0 and t not in special_ids and decode([t]).strip().isalpha()]
    ordinary = [i for i, t in enumerate(prompt_ids) if i > 0 and t not in special_ids]
    return (words or ordinary or [None])[-1]


def causal_change(ids: list[int], special_ids: set[int], decode, vocab_size: int) -> tuple[int, int] | None:
    """(position, replacement) of the causal-mask check: its last word-like token and a different word-like
    one; None when the prompt has no later token to change."""
    position = causal_position(ids, special_ids, decode)
    if position is None:
        return None
    return position, replacement_token(ids[position], vocab_size, special_ids, decode)


def replacement_token(original: int, vocab_size: int, special_ids: set[int], decode) -> int:
    """A different, word-like token (so the page can show the swap legibly)."""
    for offset in range(1, vocab_size):
        candidate = (original + offset) % vocab_size
        if candidate not in special_ids and decode([candidate]).strip().isalpha():
            return candidate
    return (original + 1) % vocab_size

"""Live checks the article shows as data: measured on the running model, never asserted by prose."""
from __future__ import annotations

import torch


@torch.no_grad()
def causal_mask_check(loaded, ids: list[int], change_at: int, replacement: int) -> dict:
    """Change the token at ``change_at`` and measure how much every position's final hidden state moved.

    With a causal mask, positions before ``change_at`` cannot see it: their change is exactly 0.
    """
    if not 0 < change_at < len(ids):
        raise ValueError(f"change_at must be in [1, {len(ids) - 1}], got {change_at}")
    changed = list(ids)
    changed[change_at] = replacement
    batch = torch.tensor([ids, changed], device=loaded.model.device)  # (2, seq)
    hidden = loaded.model(input_ids=batch, output_hidden_states=True).hidden_states  # layers+1 x (2, seq, hidden)
    moved = torch.stack([(h[0] - h[1]).abs().amax(dim=-1) for h in hidden]).amax(dim=0)  # (seq,)
    return {"change_at": change_at, "original": ids[change_at], "replacement": replacement,
            "max_abs_change": [float(x) for x in moved.tolist()],
            "earlier_unchanged": bool((moved[:change_at] == 0).all())}


@torch.no_grad()
def weights_checksum(model) -> dict:
    """A cheap fingerprint of every parameter: (sum, sum of absolute values) in float64."""
    total = absolute = 0.0
    for p in model.parameters():
        total += float(p.double().sum())
        absolute += float(p.double().abs().sum())
    return {"sum": total, "abs_sum": absolute, "parameters": sum(p.numel() for p in model.parameters())}


def causal_position(prompt_ids: list[int], special_ids: set[int]) -> int | None:
    """The last ordinary (non-special) prompt token: the 'later token' the causal-mask check replaces."""
    ordinary = [i for i, t in enumerate(prompt_ids) if t not in special_ids and i > 0]
    return ordinary[-1] if ordinary else None


def replacement_token(original: int, vocab_size: int, special_ids: set[int]) -> int:
    candidate = (original + 1) % vocab_size
    while candidate in special_ids or candidate == original:
        candidate = (candidate + 1) % vocab_size
    return candidate

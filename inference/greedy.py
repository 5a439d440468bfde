"""A greedy step read from the logits' ranking, which every step has already (the payload lists it).

At temperature 0 without penalties the stages leave nothing to compute over the vocabulary: the first record is
the raw logits' top (less the EOS ids that min_new_tokens holds off, when none of them is in it), greedy's limit
keeps the first of that top alone (ZeroTemperatureLimit), and the softmax of one finite score is 1 there and 0
elsewhere. Running the processors for it passed over SmolLM2's 49,152 logits a dozen times: ~0.9 ms a visitor,
28 ms of a 32-visitor tick. Anything else (penalties, a held-off EOS in the top, a non-finite logit) runs them.
"""
from __future__ import annotations

import math

import torch



def greedy_records(stages: list[tuple[str, bool]], ranking: list[tuple[int, float, float]], logits: torch.Tensor,
                   held_off: set[int], top_n: int) -> tuple[int, list[dict]] | None:
    """(token, stage records) exactly as run_stages makes them at temperature 0 from `ranking` (the raw logits' top
    ties in id order, as capture.top_tokens ranks them), or None where the stages must run. `stages`: each stage's
    name and whether it applies, the only one applied being greedy's limit; `held_off`: the EOS ids masked now."""
    if len(ranking) < top_n or any(i in held_off for i, _, _ in ranking[:top_n]) or not math.isfinite(float(logits.sum())):
        return None
    top = [{"id": i, "value": round(v, 4)} for i, v, _ in ranking[:top_n]]
    first = {"survivors": logits.numel() - len(held_off), "top": top}
    others = [{"id": i, "value": None} for i in range(top_n) if i != ranking[0][0]][:top_n - 1]
    limited = {"survivors": 1, "top": [top[0]] + others}  # the limit's survivor, then the lowest other ids (dice.ranked)
    records, source = [], first
    for name, applied in stages:
        source = limited if applied else source
        records.append({"name": name, "applied": applied, **source})
    return ranking[0][0], records


def one_hot(token: int, like: torch.Tensor, top_n: int) -> tuple[torch.Tensor, list[tuple[int, float]]]:
    """The final distribution of a greedy step whose limit left `token` alone, (vocab,) like `like`, and its ranking:
    softmax gives the token 1 and every other id 0, ranked as ties are, in id order."""
    probs = torch.zeros_like(like).index_fill_(0, torch.tensor([token], device=like.device), 1.0)  # (vocab,)
    return probs, [(token, 1.0)] + [(i, 0.0) for i in range(top_n) if i != token][:top_n - 1]

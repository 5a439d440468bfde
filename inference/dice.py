"""The dice roll and the rankings a step shows: what the sampling stages leave, read without sorting the vocabulary.

The roll is the inverse of the cumulative distribution over the surviving tokens, most likely first (ties in id
order): the token where the running sum first passes u. Sorting all 49,152 of SmolLM2's probabilities for it took
4 ms a step, most of a visitor's step at temperature 0.7 and 170 ms of a 32-visitor tick. The most likely few
usually hold u: the roll reads the top 64 (then 1,024) in the same order and with the same sums a full sort gives,
and sorts everything only when u lies past them (or a tie straddles their edge, which leaves their set open).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .capture import ranked_topk

MAX_SEED = 2**63 - 1
FIRST_CANDIDATES = (64, 1024)  # the most likely tokens read before a full sort, in turn


@dataclass
class Roll:
    """Where u landed: the token, its rank among the survivors, the running sums either side, the ranking's top."""
    token: int
    rank: int
    before: float
    after: float
    top_probs: list[float]
    top_ids: list[int]


def dice_roll(seed: int, step: int) -> float:
    """u in [0, 1) for one step; depends only on (seed, step), so a fork re-rolls the same dice."""
    generator = torch.Generator().manual_seed((seed * 1_000_003 + step) % MAX_SEED)
    return torch.rand((), generator=generator, dtype=torch.float64).item()


def roll(probs: torch.Tensor, scores: torch.Tensor, survivors: int, u: float, top_n: int) -> Roll:
    """The roll over `probs` (vocab,), the softmax of the final `scores` (vocab,) whose `survivors` finite entries
    can be drawn. Sums are float64, over the ranking, divided by the survivors' total."""
    total = probs.double().sum()
    for count in FIRST_CANDIDATES:
        if count >= survivors:
            break
        values, ids = probs.topk(count + 1)  # (count + 1,)
        if not values[count - 1] > values[count]:  # a tie across the edge (or NaN): which ones are in is open
            continue
        ids, by_id = ids[:count].sort()
        values, by_value = values[:count].gather(0, by_id).sort(descending=True, stable=True)  # ties in id order
        cumulative = torch.cumsum(values.double(), dim=0) / total  # (count,)
        if float(cumulative[-1]) > u:
            return _landed(values, ids.gather(0, by_value), cumulative, u, top_n)
    alive = torch.isfinite(scores).nonzero()[:, 0]  # (survivors,) in id order: a stable sort keeps ties so
    values, order = probs[alive].sort(descending=True, stable=True)
    return _landed(values, alive[order], torch.cumsum(values.double(), dim=0) / total, u, top_n)


def _landed(values: torch.Tensor, ids: torch.Tensor, cumulative: torch.Tensor, u: float, top_n: int) -> Roll:
    """The roll on a ranking's first len(ids) entries (u below their last running sum, or past the end: the last)."""
    at = torch.tensor(u, dtype=torch.float64, device=cumulative.device)
    rank = min(int(torch.searchsorted(cumulative, at, right=True)), len(ids) - 1)
    return Roll(int(ids[rank]), rank, float(cumulative[rank - 1]) if rank else 0.0, float(cumulative[rank]),
                values[:top_n].tolist(), ids[:top_n].tolist())


def ranked(row: torch.Tensor, k: int, finite: int) -> tuple[list[float], list[int]]:
    """The k largest of a row (vocab,) most first, ties in id order; where fewer than k are finite (`finite` of them:
    after greedy's limit, one), those, then the lowest ids of the rest (a topk over a row of -inf takes any)."""
    k = min(k, row.numel())
    if finite >= k:
        values, ids = ranked_topk(row, k)
        return values.tolist(), ids.tolist()
    alive = torch.isfinite(row).nonzero()[:, 0]  # (finite,)
    values, order = row[alive].sort(descending=True, stable=True)
    rest = np.setdiff1d(np.arange(k + len(alive)), alive.cpu().numpy(), assume_unique=True)[:k - len(alive)]
    return values.tolist() + row[torch.from_numpy(rest).to(row.device)].tolist(), alive[order].tolist() + rest.tolist()


def finite_count(row: torch.Tensor) -> int:
    """The entries that are finite (a stage's survivors): every one when the row's sum is (one pass, no mask: a
    sum with an infinity or a NaN in it is not finite), else counted (numpy's count on a CPU: a third of torch's)."""
    if math.isfinite(float(row.sum())):
        return row.numel()
    return int(np.isfinite(row.float().numpy()).sum()) if row.device.type == "cpu" else int(torch.isfinite(row).sum())

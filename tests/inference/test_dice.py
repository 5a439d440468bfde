"""The dice roll reads the most likely tokens first (inference/dice.py) and lands where a full sort lands; a greedy
step read from the ranking (inference/greedy.py) is the step the stages make."""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from inference.capture import top_tokens
from inference.dice import finite_count, ranked, roll
from inference.engine import GenerationSession
from inference.prompting import build_prompt
from inference.sampling import SamplingParams, run_stages, sample_token


def sorted_roll(probs: torch.Tensor, scores: torch.Tensor, u: float, top_n: int) -> tuple:
    """The reference: every survivor sorted (most likely first, ties in id order), the running sum where u falls."""
    alive = [i for i in range(len(scores)) if math.isfinite(float(scores[i]))]
    order = sorted(alive, key=lambda i: (-float(probs[i]), i))
    total = probs.double().sum()
    cumulative = torch.cumsum(probs[order].double(), dim=0) / total
    rank = min(int((cumulative <= u).sum()), len(order) - 1)
    return (order[rank], rank, float(cumulative[rank - 1]) if rank else 0.0, float(cumulative[rank]),
            order[:top_n], probs[order[:top_n]].tolist())


@st.composite
def distributions(draw):
    """Final scores as the stages leave them: spread or peaked, some cut to -inf (top-k, top-p), ties at any rank."""
    vocab = draw(st.integers(2, 3000))
    spread = draw(st.sampled_from([0.5, 3.0, 30.0, 300.0]))  # 300: most probabilities underflow to 0
    scores = torch.randn(vocab, generator=torch.Generator().manual_seed(draw(st.integers(0, 2**31)))) * spread
    if draw(st.booleans()):  # ties: a run of equal scores somewhere in the ranking
        at, width = draw(st.integers(0, vocab - 1)), draw(st.integers(1, 200))
        order = scores.argsort(descending=True)
        scores[order[at:at + width]] = float(scores[order[at]])
    kept = draw(st.sampled_from([None, 1, 5, 63, 64, 65, 1023, 1025]))
    if kept is not None and kept < vocab:
        scores[scores.argsort(descending=True)[kept:]] = -math.inf
    u = draw(st.one_of(st.floats(0.0, 1.0, exclude_max=True), st.sampled_from([0.0, 0.999999999, 0.5])))
    return scores, u


@settings(max_examples=300, deadline=None)
@given(distributions())
def test_the_roll_lands_where_a_sort_of_every_survivor_lands(case):
    scores, u = case
    probs = torch.softmax(scores, dim=-1)
    landed = roll(probs, scores, finite_count(scores), u, 10)
    token, rank, before, after, top_ids, top_probs = sorted_roll(probs, scores, u, 10)
    assert (landed.token, landed.rank, landed.top_ids, landed.top_probs) == (token, rank, top_ids, top_probs)
    assert (landed.before, landed.after) == (before, after)


def test_the_roll_reads_the_first_candidates_only_when_u_lies_among_them(monkeypatch):
    """A flat distribution: u = 0.01 lies in the first 64 (no sort); u = 0.9 past the first 1,024 (one sort)."""
    sorts = []
    real_sort = torch.Tensor.sort
    monkeypatch.setattr(torch.Tensor, "sort", lambda self, *a, **k: sorts.append(self.numel()) or real_sort(self, *a, **k))
    scores = torch.linspace(0, 1, 5000)
    probs = torch.softmax(scores, dim=-1)
    roll(probs, scores, 5000, 0.01, 10)
    assert max(sorts) <= 64  # the candidates' own order
    sorts.clear()
    roll(probs, scores, 5000, 0.9, 10)
    assert 5000 in sorts


def test_a_tie_across_the_candidates_edge_sorts_everything():
    """Which of the tied tokens are among the first 64 is open: the roll does not guess."""
    scores = torch.zeros(500)
    scores[:10] = 5.0  # then 490 equal scores: the 64th and 65th tie
    probs = torch.softmax(scores, dim=-1)
    u = float(torch.cumsum(probs.double().sort(descending=True).values, 0)[30] / probs.double().sum())  # rank 31
    landed = roll(probs, scores, 500, u, 10)
    assert landed.token == sorted_roll(probs, scores, u, 10)[0] == 31  # ties in id order


@pytest.mark.parametrize("row, k, expected_ids", [
    (torch.tensor([1.0, 3.0, 3.0, 2.0]), 3, [1, 2, 3]),  # ties in id order
    (torch.tensor([-math.inf, -math.inf, 7.0, -math.inf]), 3, [2, 0, 1]),  # one finite, then the lowest others
    (torch.tensor([-math.inf, 2.0, -math.inf, 9.0, -math.inf]), 4, [3, 1, 0, 2]),
])
def test_a_ranking_lists_the_finite_first_then_the_lowest_ids(row, k, expected_ids):
    values, ids = ranked(row, k, finite_count(row))
    assert ids == expected_ids and all(math.isfinite(v) for v in values[:int(torch.isfinite(row).sum())])


def greedy_steps(loaded, **params):
    """A greedy run's (sample_token inputs, ranking) at each step."""
    prompt = build_prompt(loaded.tokenizer, messages=[{"role": "user", "content": "Tell me a story about a dog."}])
    session = GenerationSession(loaded, prompt, SamplingParams.from_dict({"temperature": 0, **params}))
    session.prefill()
    out = []
    while not session.finished:
        logits = session.pending.logits
        out.append((torch.tensor([session.ids]), logits, session.prompt_length, session.step_index + 1, session.eos_ids))
        session.step()
    return out, session.params


@pytest.mark.parametrize("params", [
    {"max_new_tokens": 12}, {"max_new_tokens": 12, "min_new_tokens": 12}, {"max_new_tokens": 6, "repetition_penalty": 1.3},
])
def test_a_greedy_step_read_from_the_ranking_is_the_step_the_stages_make(bundled, params):
    steps, sampling = greedy_steps(bundled, **params)
    for ids, logits, prompt_length, step, eos in steps:
        for forced in (None, 5):
            staged = sample_token(ids, logits, sampling, prompt_length, step, forced=forced, eos_ids=eos)
            read = sample_token(ids, logits, sampling, prompt_length, step, forced=forced, eos_ids=eos,
                                ranking=top_tokens(logits[None])[0])
            assert (read.token_id, read.prob, read.stages, read.probs_top, read.draw) == \
                   (staged.token_id, staged.prob, staged.stages, staged.probs_top, staged.draw)
            assert torch.equal(read.final, staged.final)


def test_a_held_off_eos_in_the_ranking_runs_the_stages(monkeypatch):
    """EOS is the argmax while min_new_tokens holds it off: the ranking's first is not the pick, so the stages run."""
    logits = torch.tensor([0.0, 1.0, 5.0, 2.0, 0.5] * 4)
    ran = []
    monkeypatch.setattr("inference.sampling.run_stages", lambda *a: ran.append(1) or run_stages(*a))
    params = SamplingParams(temperature=0, max_new_tokens=4, min_new_tokens=4)
    result = sample_token(torch.tensor([[0]]), logits, params, 1, 1, top_n=5, eos_ids={2},
                          ranking=top_tokens(logits[None], 5)[0])
    assert ran and result.token_id == 7  # EOS (2) held off: the next 5.0 is id 7
    assert result.stages[0]["survivors"] == 20 - 1


def test_tied_candidates_rank_in_id_order():
    """topk returns ties as it likes ([30000, 500, 40000, 10] on this CPU): the roll's ranking is the sort's."""
    scores = torch.zeros(50_000)
    scores[[40_000, 10, 500, 30_000]] = 20.0  # a quarter of the mass each
    probs = torch.softmax(scores, dim=-1)
    landed = roll(probs, scores, 50_000, 0.6, 10)
    assert landed.top_ids[:4] == [10, 500, 30_000, 40_000] and landed.token == 30_000  # u = 0.6: the third quarter
    assert (landed.token, landed.rank, landed.top_ids) == sorted_roll(probs, scores, 0.6, 10)[:2] + (sorted_roll(probs, scores, 0.6, 10)[4],)

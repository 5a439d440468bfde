"""Two runs side by side, step-locked (issue 29): one prompt through two sessions (another temperature, top-p or
seed, the int8 copy of the weights, or another model), advanced one step each in turn, and what parts them.

At every step both runs sample from their own context (they may have drawn different tokens before), so the
comparison says how the two *runs* differ, not one model read twice: the two chosen tokens, each run's
probability of the other's token, KL(A ‖ B) between the two final distributions (after every sampling stage),
Jensen-Shannon (finite even where one run filtered out a token the other may draw), and the largest raw-logit
difference (the quantized pair's figure). With two tokenizers only each run's top 5 is comparable.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import torch

from .capture import ranked_topk
from .capture_records import piece
from .engine import GenerationSession
from .loading import LoadedModel
from .quantize import quantize_model

TOP_N = 5


@dataclass(frozen=True)
class Candidate:
    id: int
    text: str
    prob: float


@dataclass(frozen=True)
class StepComparison:
    """What parts run A and run B at one step; the float figures are None where they do not apply."""

    step: int
    token_a: Candidate
    token_b: Candidate
    same_tokenizer: bool
    a_prob_of_b: float | None = None  # run A's probability of the token B drew
    b_prob_of_a: float | None = None
    kl: float | None = None  # KL(A ‖ B), nats; None when B gives 0 to a token A can draw (infinite)
    kl_infinite: bool = False
    js: float | None = None  # Jensen-Shannon divergence, nats, in [0, ln 2]
    max_logit_diff: float | None = None  # max over the vocabulary of |raw logit A − raw logit B|
    top_a: list[Candidate] = field(default_factory=list)
    top_b: list[Candidate] = field(default_factory=list)

    @property
    def parted(self) -> bool:
        return self.token_a.id != self.token_b.id if self.same_tokenizer else self.token_a.text != self.token_b.text

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "parted": self.parted}


def divergences(p: torch.Tensor, q: torch.Tensor) -> tuple[float | None, float]:
    """(KL(p ‖ q) or None when infinite, JS(p, q)) in nats, for two distributions over one vocabulary (float64)."""
    p, q = p.double(), q.double()  # (vocab,) each
    kl = _kl(p, q)
    mid = (p + q) / 2  # (vocab,) nonzero wherever p or q is
    js = (_kl(p, mid) + _kl(q, mid)) / 2
    return kl, max(0.0, float(js))


def _kl(p: torch.Tensor, q: torch.Tensor) -> float | None:
    support = p > 0
    if bool((q[support] == 0).any()):
        return None
    return max(0.0, float((p[support] * (p[support].log() - q[support].log())).sum()))


def compare_step(a: GenerationSession, b: GenerationSession, step: int, same: bool) -> StepComparison:
    """The two sessions' latest steps side by side (each must have just sampled its step `step`); `same`: their
    token ids name the same tokens (same_vocabulary)."""
    (logits_a, final_a), (logits_b, final_b) = a.last_draw, b.last_draw
    token_a, token_b = a.ids[-1], b.ids[-1]
    top_a, top_b = _top(a, final_a), _top(b, final_b)
    chosen_a = Candidate(token_a, piece(a.tokenizer, token_a), float(final_a[token_a]))
    chosen_b = Candidate(token_b, piece(b.tokenizer, token_b), float(final_b[token_b]))
    if not same:
        return StepComparison(step, chosen_a, chosen_b, False, top_a=top_a, top_b=top_b)
    kl, js = divergences(final_a, final_b.to(final_a.device))
    diff = (logits_a.float() - logits_b.float().to(logits_a.device)).abs().max()  # over (vocab,)
    return StepComparison(step, chosen_a, chosen_b, True, a_prob_of_b=float(final_a[token_b]),
                          b_prob_of_a=float(final_b[token_a]), kl=kl, kl_infinite=kl is None, js=js,
                          max_logit_diff=float(diff), top_a=top_a, top_b=top_b)


def _top(session: GenerationSession, final: torch.Tensor) -> list[Candidate]:
    probs, ids = ranked_topk(final, TOP_N)  # (TOP_N,) each; ties in id order, as the step payload ranks them
    return [Candidate(i, piece(session.tokenizer, i), round(p, 6)) for i, p in zip(ids.tolist(), probs.tolist())]


def same_vocabulary(a: LoadedModel, b: LoadedModel) -> bool:
    """One tokenizer, or two that map every piece to the same id (ids then name the same tokens in both runs)."""
    if a.tokenizer is b.tokenizer:
        return True
    return a.description.vocab_size == b.description.vocab_size and a.tokenizer.get_vocab() == b.tokenizer.get_vocab()


def quantized_copy(loaded: LoadedModel, bits: int = 8) -> LoadedModel:
    """The served model with every Linear weight stored in `bits` bits (inference/quantize.py, as the serving view
    measures it), sharing the tokenizer; the original is untouched. No prefix cache: its keys are another model's."""
    model, _layers, head = quantize_model(loaded.model, bits)
    description = dataclasses.replace(loaded.description, name=f"{loaded.description.name} (int{bits} weights)",
                                      spec=f"{loaded.description.spec}+int{bits}")
    return dataclasses.replace(loaded, model=model, description=description, prefix_cache=None)


class PairedRun:
    """Run A and run B advanced together: `step()` gives both steps and their comparison. When one run has ended
    (its EOS, a stop string) the other goes on alone and there is nothing left to compare."""

    def __init__(self, a: GenerationSession, b: GenerationSession):
        self.a, self.b = a, b
        self.same_tokenizer = same_vocabulary(a.loaded, b.loaded)  # once: two vocabularies compare in full
        self.comparisons: list[StepComparison] = []

    @property
    def finished(self) -> bool:
        return bool(self.a.finished and self.b.finished)

    def prefill(self) -> tuple[dict, dict]:
        return self.a.prefill(), self.b.prefill()

    def step(self) -> tuple[dict | None, dict | None, StepComparison | None]:
        both = not self.a.finished and not self.b.finished
        step_a = None if self.a.finished else self.a.step()
        step_b = None if self.b.finished else self.b.step()
        if not both:
            return step_a, step_b, None
        comparison = compare_step(self.a, self.b, step_a["step"], self.same_tokenizer)
        self.comparisons.append(comparison)
        return step_a, step_b, comparison

    @property
    def first_parting(self) -> StepComparison | None:
        """The first step where the two runs drew different tokens (None while they agree)."""
        return next((c for c in self.comparisons if c.parted), None)

    def summary(self) -> dict:
        parting = self.first_parting
        finite = [c.kl for c in self.comparisons if c.kl is not None]
        diffs = [c.max_logit_diff for c in self.comparisons if c.max_logit_diff is not None]
        return {"steps_compared": len(self.comparisons), "first_parting_step": parting and parting.step,
                "kl_at_parting": parting and parting.kl, "js_at_parting": parting and parting.js,
                "mean_kl": sum(finite) / len(finite) if finite else None,
                "max_logit_diff": max(diffs) if diffs else None,
                "reply_a": self.a.reply_text(), "reply_b": self.b.reply_text()}

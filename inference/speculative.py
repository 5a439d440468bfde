"""Speculative decoding (Leviathan, Kalman & Matias 2023): a small draft guesses, the target checks.

Each round the draft proposes k tokens one at a time (k cheap forward passes with its own KV cache),
then the target scores all k in ONE forward pass over them, which gives it k + 1 next-token
distributions: one before each proposal and one after the last. Walking the proposals in order:

    accept proposal x with probability min(1, p_target(x) / p_draft(x))
    at the first rejection, emit a token from normalize(max(0, p_target - p_draft)) and stop
    if all k are accepted, emit a bonus token from the target's last distribution

Every emitted token is distributed exactly as if the target had sampled it alone. Greedy decoding
(temperature 0) is the same rule with one-hot distributions: a proposal is accepted when it is the
target's argmax, and the residual is the target's argmax itself, so the output equals the target's
own greedy output. Both caches are then cropped back to what was kept, and the next round starts.

Prompt lookup (n-gram) drafting needs no draft model, so it works for any served model: the proposals are
copied from earlier in the sequence, after the latest earlier occurrence of its last n tokens (transformers'
PromptLookupCandidateGenerator, as `prompt_lookup_num_tokens` uses it). Its "draft distribution" is one-hot
on each copied token, so the same rule keeps the output exactly the target's (greedy: identical tokens).

    python -m inference.speculative --k 4     # bundled target + bundled_draft on the article prompt
    python -m inference speculative --target FOLDER --draft ngram
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
from transformers import DynamicCache
from transformers.generation.candidate_generator import PromptLookupCandidateGenerator

from .engine import eos_token_ids
from .forward import synchronize
from .loading import LoadedModel, load_model
from .wire.said import said

DRAFT_DIR = Path(__file__).resolve().parent / "bundled_draft"
NGRAM = "ngram"  # the draft spec for prompt lookup
NGRAM_SIZE = 3  # the longest suffix looked up (transformers' max_matching_ngram_size)
NGRAM_MIN = 2  # the shortest (vLLM's prompt_lookup_min): a 1-token match proposes mostly wrong guesses


class CachedModel:
    """A model with its KV cache and a count of its forward passes; it feeds only what the cache lacks."""

    def __init__(self, loaded: LoadedModel):
        self.model = loaded.model
        self.cache = DynamicCache(config=self.model.config)
        self.forward_passes = 0

    @torch.no_grad()
    def logits(self, ids: list[int], keep: int) -> torch.Tensor:
        """Run the ids the cache has not seen yet; return the logits of the last ``keep`` positions."""
        new = ids[self.cache.get_seq_length():]
        input_ids = torch.tensor([new], device=self.model.device)  # (1, new)
        out = self.model(input_ids=input_ids, cache=self.cache, use_cache=True, logits_to_keep=keep)
        self.cache = out.cache
        self.forward_passes += 1
        return out.logits[0].float().cpu()  # (keep, vocab)

    def rewind(self, length: int) -> None:
        """Keep the first ``length`` positions of the cache (crop(-n) drops the last n)."""
        extra = self.cache.get_seq_length() - length
        if extra > 0:  # crop(-0) would mean "keep nothing"
            self.cache.crop(-extra)


def check_shared_vocabulary(target: LoadedModel, draft: LoadedModel) -> None:
    """The draft's token ids must mean the same tokens as the target's."""
    t_size, d_size = target.model.config.vocab_size, draft.model.config.vocab_size
    if t_size != d_size:
        raise ValueError(f"draft and target must share a vocabulary: the target has {t_size} token ids, "
                         f"the draft {d_size}")
    if target.tokenizer is not draft.tokenizer and target.tokenizer.get_vocab() != draft.tokenizer.get_vocab():
        raise ValueError("draft and target must share a vocabulary: same size, but the tokenizers map "
                         "tokens to different ids")


def distribution(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Next-token probabilities (..., vocab); temperature 0 gives a one-hot on the argmax."""
    if temperature == 0:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()  # (..., vocab)
    return torch.softmax(logits / temperature, dim=-1)  # (..., vocab)


def accept_reject(p_target: torch.Tensor, p_draft: torch.Tensor, proposed: torch.Tensor,
                  generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The rejection rule at n independent positions: which proposals pass, and what replaces them.

    p_target, p_draft: (n, vocab); proposed: (n,) ids drawn from p_draft.
    Returns accepted (n,) bool and replacement (n,) ids drawn from normalize(max(0, p_target - p_draft)).
    """
    pick = proposed[:, None]  # (n, 1)
    ratio = p_target.gather(-1, pick)[:, 0] / p_draft.gather(-1, pick)[:, 0].clamp_min(1e-30)  # (n,)
    accepted = torch.rand(ratio.shape, generator=generator) < ratio  # (n,) P(accept) = min(1, ratio)
    residual = (p_target - p_draft).clamp_min(0)  # (n, vocab), multinomial normalises it
    nothing_left = residual.sum(-1, keepdim=True) <= 0  # (n, 1) p_target == p_draft: never rejected
    residual = torch.where(nothing_left, p_target, residual)  # (n, vocab)
    replacement = torch.multinomial(residual, 1, generator=generator)[:, 0]  # (n,)
    return accepted, replacement


def propose(draft: CachedModel, ids: list[int], k: int, temperature: float,
            generator: torch.Generator) -> tuple[list[int], torch.Tensor]:
    """The draft samples k tokens autoregressively; returns them and the distributions they came from."""
    proposed, dists = [], []
    for _ in range(k):
        q = distribution(draft.logits(ids + proposed, keep=1)[0], temperature)  # (vocab,)
        proposed.append(int(torch.multinomial(q, 1, generator=generator)))
        dists.append(q)
    return proposed, torch.stack(dists)  # k ids, (k, vocab)


class NgramDraft:
    """Prompt lookup: proposals copied from the sequence itself; no model, so no forward passes."""

    forward_passes = 0

    def __init__(self, vocab_size: int, eos_ids: set[int], ngram_size: int = NGRAM_SIZE, min_size: int = NGRAM_MIN):
        self.vocab_size, self.eos_ids, self.ngram_size, self.min_size = vocab_size, eos_ids, ngram_size, min_size
        self.lookups = 0

    def propose(self, ids: list[int], k: int, temperature: float, generator) -> tuple[list[int], torch.Tensor]:
        """Up to k ids that followed the first earlier match of the longest suffix (none: an ordinary decode
        step); one-hot q."""
        if not suffix_seen(ids, self.min_size):
            return [], torch.zeros(0, self.vocab_size)
        lookup = PromptLookupCandidateGenerator(
            eos_token_id=torch.tensor(sorted(self.eos_ids)) if self.eos_ids else None, num_output_tokens=k,
            max_matching_ngram_size=self.ngram_size, max_length=len(ids) + k + 1)
        candidates, _ = lookup.get_candidates(torch.tensor([ids]))  # (1, len(ids) + proposals)
        self.lookups += 1
        proposed = candidates[0, len(ids):].tolist()
        q = torch.nn.functional.one_hot(torch.tensor(proposed, dtype=torch.long), self.vocab_size).float()  # (n, vocab)
        return proposed, q

    def rewind(self, length: int) -> None:
        """Nothing cached."""


def suffix_seen(ids: list[int], n: int) -> bool:
    """Whether the last n ids occur earlier in ids."""
    tail = ids[-n:]
    return len(ids) > n and any(ids[i:i + n] == tail for i in range(len(ids) - n))


class ModelDraft(CachedModel):
    """A small draft model with its own cache."""

    def propose(self, ids, k, temperature, generator):
        return propose(self, ids, k, temperature, generator)


def speculative_round(target: CachedModel, draft, ids: list[int], k: int,
                      temperature: float, generator: torch.Generator) -> dict:
    """One round: up to k draft proposals, one target forward over them, accept a prefix, add one target token."""
    proposed, q = draft.propose(ids, k, temperature, generator)  # k ids, (k, vocab); n-gram: maybe fewer
    k = len(proposed)
    p = distribution(target.logits(ids + proposed, keep=k + 1), temperature)  # (k + 1, vocab)
    if k:
        accepted, replacement = accept_reject(p[:k], q, torch.tensor(proposed), generator)  # (k,), (k,)
    else:  # nothing to copy: the pass is an ordinary decode step
        accepted, replacement = torch.zeros(0, dtype=torch.bool), torch.zeros(0, dtype=torch.long)
    n = int(accepted.long().cumprod(0).sum())  # length of the accepted prefix
    if n < k:  # the first rejected proposal is replaced by a draw from the residual
        corrected, bonus = int(replacement[n]), None
    else:  # all accepted: the target's distribution after the last proposal gives one more, for free
        corrected, bonus = None, int(torch.multinomial(p[k], 1, generator=generator))
    return {"proposed": proposed, "accepted": n, "rejected": proposed[n:], "corrected": corrected,
            "bonus": bonus, "emitted": proposed[:n] + [bonus if corrected is None else corrected]}


def speculative_decode(target: LoadedModel, draft: LoadedModel | str, input_ids: list[int], max_new_tokens: int,
                       k: int, temperature: float = 0.0, seed: int = 0, eos_ids: set[int] | None = None) -> dict:
    """Generate up to max_new_tokens tokens after input_ids; stops after an EOS id (default: the target's).

    ``draft`` is a draft model sharing the target's vocabulary, or "ngram" for prompt lookup.
    Each round records proposed ids, how many were accepted, the rejected ones (the first rejected
    proposal and the unchecked ones after it), the corrected or bonus token, and the ids emitted
    (the last round is cut at max_new_tokens or after an EOS id).
    """
    if k < 1 or max_new_tokens < 1:
        raise ValueError(f"k and max_new_tokens must be at least 1, got k={k}, max_new_tokens={max_new_tokens}")
    eos_ids = eos_token_ids(target) if eos_ids is None else set(eos_ids)
    generator = torch.Generator().manual_seed(seed)
    t_model, d_model = CachedModel(target), drafter(target, draft, eos_ids)
    ids, tokens, rounds = list(input_ids), [], []
    started = time.perf_counter()
    while len(tokens) < max_new_tokens:
        remaining = max_new_tokens - len(tokens)
        result = speculative_round(t_model, d_model, ids, min(k, remaining), temperature, generator)
        result["emitted"] = cut_at_eos(result["emitted"][:remaining], eos_ids)
        rounds.append(result)
        tokens += result["emitted"]
        ids += result["emitted"]
        if tokens[-1] in eos_ids:
            break
        for m in (t_model, d_model):  # both caches keep everything but the newest token, fed next round
            m.rewind(len(ids) - 1)
    synchronize(target.model.device)
    proposed = sum(len(r["proposed"]) for r in rounds)
    return {"tokens": tokens, "rounds": rounds, "method": NGRAM if draft == NGRAM else "draft_model",
            "ngram_size": d_model.ngram_size if draft == NGRAM else None, "proposed": proposed,
            "acceptance_rate": sum(r["accepted"] for r in rounds) / proposed if proposed else 0.0,
            "target_forward_passes": t_model.forward_passes, "draft_forward_passes": d_model.forward_passes,
            "spec_ms": (time.perf_counter() - started) * 1e3}


def drafter(target: LoadedModel, draft: LoadedModel | str, eos_ids: set[int]):
    """The proposer for ``draft``: prompt lookup for "ngram", else the draft model (same vocabulary)."""
    if draft == NGRAM:
        return NgramDraft(target.model.config.get_text_config().vocab_size, eos_ids)
    if isinstance(draft, str):
        raise ValueError(f"draft must be a loaded draft model or {NGRAM!r}, not {draft!r}")
    check_shared_vocabulary(target, draft)
    return ModelDraft(draft)


def cut_at_eos(tokens: list[int], eos_ids: set[int]) -> list[int]:
    for i, token in enumerate(tokens):
        if token in eos_ids:
            return tokens[: i + 1]
    return tokens


def greedy_tokens(loaded: LoadedModel, input_ids: list[int], max_new_tokens: int,
                  eos_ids: set[int] | None = None) -> tuple[list[int], int, float]:
    """The model's own greedy decoding, one cached forward per token: (tokens, forward passes, ms)."""
    eos_ids = eos_token_ids(loaded) if eos_ids is None else set(eos_ids)
    model, ids = CachedModel(loaded), list(input_ids)
    started = time.perf_counter()
    for _ in range(max_new_tokens):
        ids.append(int(model.logits(ids, keep=1)[0].argmax()))
        if ids[-1] in eos_ids:
            break
    synchronize(loaded.model.device)
    return ids[len(input_ids):], model.forward_passes, (time.perf_counter() - started) * 1e3


def speculative_report(target: LoadedModel, draft: LoadedModel | str, input_ids: list[int], max_new_tokens: int,
                       k: int, temperature: float = 0.0, seed: int = 0, progress=None) -> dict:
    """Speculative decoding beside the target's own greedy decoding: same tokens? how much faster?
    ``progress(done, total, label)``, if given, is called before each of the two runs (the page shows it)."""
    report = progress or (lambda done, total, label: None)
    report(0, 2, said("speculative decoding: draft guesses, target verifies"))
    result = speculative_decode(target, draft, input_ids, max_new_tokens, k, temperature, seed)
    report(1, 2, said("the target decoding alone, to compare"))
    target_tokens, target_passes, target_ms = greedy_tokens(target, input_ids, max_new_tokens)
    return {**result, "k": k, "target_tokens": target_tokens, "target_alone_forward_passes": target_passes,
            "target_ms": target_ms, "speedup": target_ms / result["spec_ms"],
            "identical": result["tokens"] == target_tokens, "pieces": pieces(target, result, target_tokens)}


def pieces(target: LoadedModel, result: dict, target_tokens: list[int]) -> dict[str, str]:
    """The text of every token id the report names (drafts the run never showed included), keyed by id."""
    ids = set(result["tokens"]) | set(target_tokens)
    for r in result["rounds"]:
        ids |= set(r["proposed"]) | set(r["emitted"]) | {t for t in (r.get("corrected"), r.get("bonus")) if t is not None}
    return {str(i): target.tokenizer.decode([i]) for i in sorted(ids)}


def main(argv=None) -> None:
    from .prompting import build_prompt
    from .training.corpus import ARTICLE_PROMPT

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", default="bundled")
    p.add_argument("--draft", default=str(DRAFT_DIR), help=f"a draft model folder, or {NGRAM} for prompt lookup")
    p.add_argument("--prompt", default=ARTICLE_PROMPT)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=40)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=5, help="timed runs after a warm-up; medians are reported")
    args = p.parse_args(argv)
    target = load_model(args.target, device="cpu")
    draft = NGRAM if args.draft == NGRAM else load_model(args.draft, device="cpu")
    ids = build_prompt(target.tokenizer, messages=[{"role": "user", "content": args.prompt}]).ids
    runs = [speculative_report(target, draft, ids, args.max_new_tokens, args.k, args.temperature, args.seed)
            for _ in range(args.repeats + 1)][1:]  # the first run warms up
    report = runs[0]
    keys = ("k", "acceptance_rate", "target_forward_passes", "draft_forward_passes", "target_alone_forward_passes",
            "identical")
    medians = {key: statistics.median(r[key] for r in runs) for key in ("spec_ms", "target_ms", "speedup")}
    print(json.dumps({**{key: report[key] for key in keys}, **medians, "tokens": len(report["tokens"]),
                      "rounds": len(report["rounds"]),
                      "text": target.tokenizer.decode(report["tokens"], skip_special_tokens=True)}, indent=2))

if __name__ == "__main__":
    main()

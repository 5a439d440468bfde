"""Speculative decoding with the bundled model and its bundled draft: same greedy tokens, fewer target passes."""
import types

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from inference.loading import LoadedModel, load_model
from inference.prompting import build_prompt
from inference.speculative import (DRAFT_DIR, accept_reject, distribution, greedy_tokens, speculative_decode,
                                   speculative_report)

PROMPTS = [
    "The mole on my face may need a biopsy. Explain this simply.",  # the article's prompt
    "What does bank mean?",
    "The rash on my arm may need a skin test. Explain this simply.",
]


@pytest.fixture(scope="module")
def draft():
    assert (DRAFT_DIR / "config.json").exists(), "the draft model must ship in inference/bundled_draft"
    return load_model(str(DRAFT_DIR), device="cpu")


def prompt_ids(loaded, text: str) -> list[int]:
    return build_prompt(loaded.tokenizer, messages=[{"role": "user", "content": text}]).ids


def tiny_llama(vocab: int, seed: int, init: float = 0.02) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
                         initializer_range=init)
    return LlamaForCausalLM(config).eval()


def test_draft_shares_the_target_tokenizer_and_eos(bundled, draft):
    assert draft.tokenizer.get_vocab() == bundled.tokenizer.get_vocab()
    end = bundled.tokenizer.convert_tokens_to_ids("<|end|>")
    assert draft.model.config.eos_token_id == bundled.model.config.eos_token_id == end
    assert draft.description.parameters < bundled.description.parameters / 4
    assert (DRAFT_DIR / "LICENSE-WordNet").exists() and (DRAFT_DIR / "training_stats.json").exists()


@pytest.mark.parametrize("text", PROMPTS)
def test_greedy_speculative_equals_target_greedy(bundled, draft, text):
    ids = prompt_ids(bundled, text)
    report = speculative_report(bundled, draft, ids, max_new_tokens=40, k=4)
    print(f"\n{text!r}: acceptance {report['acceptance_rate']:.2f}, target passes {report['target_forward_passes']} "
          f"for {len(report['tokens'])} tokens, draft passes {report['draft_forward_passes']}, speedup {report['speedup']:.2f}")
    assert report["identical"] and report["tokens"] == report["target_tokens"]
    assert report["acceptance_rate"] > 0
    assert report["target_forward_passes"] < len(report["tokens"]) == report["target_alone_forward_passes"]
    assert report["target_forward_passes"] == len(report["rounds"])
    assert [t for r in report["rounds"] for t in r["emitted"]] == report["tokens"]
    for r in report["rounds"]:
        assert r["proposed"][: r["accepted"]] + r["rejected"] == r["proposed"]
        assert (r["corrected"] is None) != (r["bonus"] is None) and (r["bonus"] is None) == bool(r["rejected"])
        for token in r["proposed"] + [r["corrected"] or r["bonus"]]:  # every id the diagram draws has its text
            assert report["pieces"][str(token)] == bundled.tokenizer.decode([token])


def test_greedy_tokens_equal_generate(bundled):
    ids = prompt_ids(bundled, PROMPTS[0])
    tokens, passes, _ = greedy_tokens(bundled, ids, 40)
    ref = bundled.model.generate(torch.tensor([ids]), max_new_tokens=40, do_sample=False,
                                 pad_token_id=bundled.tokenizer.pad_token_id)[0, len(ids):].tolist()
    assert tokens == ref and passes == len(tokens)


def test_target_as_its_own_draft_accepts_everything(bundled):
    ids = prompt_ids(bundled, PROMPTS[1])
    result = speculative_decode(bundled, bundled, ids, max_new_tokens=20, k=4, eos_ids=set())
    assert result["acceptance_rate"] == 1.0 and len(result["tokens"]) == 20
    assert result["target_forward_passes"] == 4  # 5 tokens a round: 4 accepted + the bonus


def test_max_new_tokens_and_eos_cut_the_last_round(bundled, draft):
    ids = prompt_ids(bundled, PROMPTS[0])
    assert len(speculative_decode(bundled, draft, ids, max_new_tokens=3, k=4)["tokens"]) == 3
    greedy, _, _ = greedy_tokens(bundled, ids, 12)
    stop = greedy[6]
    tokens = speculative_decode(bundled, draft, ids, max_new_tokens=40, k=4, eos_ids={stop})["tokens"]
    assert tokens == greedy[: greedy.index(stop) + 1]


def test_sampling_is_seeded_and_stops(bundled, draft):
    ids = prompt_ids(bundled, PROMPTS[0])
    runs = [speculative_decode(bundled, draft, ids, max_new_tokens=30, k=3, temperature=1.0, seed=s) for s in (1, 1, 2, 3)]
    assert runs[0]["tokens"] == runs[1]["tokens"]
    assert any(run["tokens"] != runs[0]["tokens"] for run in runs[2:])
    for run in runs:
        assert 0 < run["acceptance_rate"] <= 1
        assert len(run["tokens"]) == 30 or run["tokens"][-1] == bundled.model.config.eos_token_id


def test_rejection_rule_preserves_the_target_distribution():
    """Draw x ~ draft, accept or resample: the emitted token must follow the target's softmax."""
    context = torch.tensor([[3]])  # (1, 1): a fixed 1-token context
    with torch.no_grad():
        p = distribution(tiny_llama(8, seed=1, init=0.5)(context).logits[0, -1], 1.0)  # (8,)
        q = distribution(tiny_llama(8, seed=2, init=0.5)(context).logits[0, -1], 1.0)  # (8,)
    draft_vs_target = 0.5 * (p - q).abs().sum()
    assert draft_vs_target > 0.1, "the two models must disagree for the check to mean anything"
    n, generator = 20000, torch.Generator().manual_seed(0)
    proposed = torch.multinomial(q, n, replacement=True, generator=generator)  # (n,)
    accepted, replacement = accept_reject(p.expand(n, 8), q.expand(n, 8), proposed, generator)  # (n,), (n,)
    emitted = torch.where(accepted, proposed, replacement)  # (n,)
    empirical = torch.bincount(emitted, minlength=8).float() / n  # (8,)
    assert 0.5 * (empirical - p).abs().sum() < 0.02
    assert abs(accepted.float().mean() - (1 - draft_vs_target)) < 0.02  # P(accept) = sum(min(p, q))


def test_rejection_rule_with_one_hot_distributions_is_greedy():
    p = distribution(torch.tensor([[0.0, 2.0, 1.0], [0.0, 2.0, 1.0]]), 0)  # target argmax: 1, 1
    q = distribution(torch.tensor([[0.0, 3.0, 1.0], [0.0, 1.0, 3.0]]), 0)  # draft argmax: 1, 2
    accepted, replacement = accept_reject(p, q, q.argmax(-1), torch.Generator().manual_seed(0))
    assert accepted.tolist() == [True, False] and replacement[1] == 1


def test_different_vocabularies_raise(bundled):
    small = LoadedModel(tiny_llama(512, seed=0), bundled.tokenizer, bundled.description, bundled.adapter)
    with pytest.raises(ValueError, match="draft and target must share a vocabulary"):
        speculative_decode(bundled, small, [1, 2, 3], max_new_tokens=4, k=2)
    other_tokenizer = types.SimpleNamespace(get_vocab=lambda: {"<|pad|>": 0})
    same_size = LoadedModel(tiny_llama(4096, seed=0), other_tokenizer, bundled.description, bundled.adapter)
    with pytest.raises(ValueError, match="draft and target must share a vocabulary"):
        speculative_report(bundled, same_size, [1, 2, 3], max_new_tokens=4, k=2)

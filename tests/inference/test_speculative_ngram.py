"""Prompt-lookup (n-gram) speculative decoding: no draft model, output identical to the target's greedy decoding."""
import json
import subprocess
import sys

import pytest
import torch

from inference.speculative import NGRAM, NgramDraft, accept_reject, distribution, greedy_tokens, speculative_report
from tests.inference.arch_helpers import arch_config, tiny_loaded
from tests.inference.test_speculative import PROMPTS, prompt_ids


def generate_greedy(loaded, ids: list[int], n: int) -> list[int]:
    out = loaded.model.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False,
                                pad_token_id=loaded.tokenizer.pad_token_id)
    return out[0, len(ids):].tolist()


@pytest.fixture(scope="module")
def looping():
    """A tiny random Llama: its greedy text falls into loops, which prompt lookup can copy."""
    return tiny_loaded(arch_config("llama"))


@pytest.mark.parametrize("text", PROMPTS)
def test_ngram_output_equals_greedy_on_bundled(bundled, text):
    ids = prompt_ids(bundled, text)
    report = speculative_report(bundled, NGRAM, ids, max_new_tokens=40, k=4)
    print(f"\n{text!r}: n-gram acceptance {report['acceptance_rate']:.2f} of {report['proposed']} proposals, "
          f"target passes {report['target_forward_passes']} for {len(report['tokens'])} tokens, speedup {report['speedup']:.2f}")
    assert report["method"] == "ngram" and report["draft_forward_passes"] == 0
    assert report["identical"] and report["tokens"] == generate_greedy(bundled, ids, 40)[: len(report["tokens"])]
    assert report["target_forward_passes"] == len(report["rounds"]) <= len(report["tokens"])


def test_ngram_copies_repeated_text_and_saves_target_passes(looping):
    ids = [5, 9, 17, 33, 5, 9, 17]
    report = speculative_report(looping, NGRAM, ids, max_new_tokens=60, k=4)
    assert report["tokens"] == generate_greedy(looping, ids, 60) and report["identical"]
    assert report["acceptance_rate"] > 0.5, report["acceptance_rate"]
    assert report["target_forward_passes"] < len(report["tokens"]) / 2
    for r in report["rounds"]:
        assert r["emitted"][: r["accepted"]] == r["proposed"][: r["accepted"]]


def test_proposals_follow_an_earlier_match_of_the_suffix():
    draft = NgramDraft(vocab_size=50, eos_ids={49})
    proposed, q = draft.propose([1, 2, 3, 4, 5, 9, 9, 2, 3], k=3, temperature=0, generator=None)
    assert proposed == [4, 5, 9] and q.argmax(-1).tolist() == [4, 5, 9] and q.sum().item() == 3
    assert draft.propose([1, 2, 3, 49, 7, 2, 3], k=3, temperature=0, generator=None)[0] == []  # never copies an EOS
    assert draft.propose([1, 2, 3], k=3, temperature=0, generator=None)[0] == []  # nothing earlier to copy
    assert draft.propose([1, 2, 3, 4, 9, 3], k=3, temperature=0, generator=None)[0] == []  # a 1-token match is too weak


def test_copied_tokens_keep_the_target_distribution_when_sampling():
    """A copied token is a one-hot draft: accepted with p(x), else resampled from p without x."""
    p = torch.softmax(torch.tensor([0.5, 1.5, 0.0, 1.0]), -1)  # (4,)
    n, generator = 20000, torch.Generator().manual_seed(0)
    proposed = torch.full((n,), 1)
    q = torch.nn.functional.one_hot(proposed, 4).float()  # (n, 4)
    accepted, replacement = accept_reject(p.expand(n, 4), q, proposed, generator)
    emitted = torch.where(accepted, proposed, replacement)
    assert 0.5 * (torch.bincount(emitted, minlength=4).float() / n - p).abs().sum() < 0.02
    assert abs(accepted.float().mean() - p[1]) < 0.02


def test_sampled_ngram_runs_are_seeded(looping):
    ids = [5, 9, 17, 33, 5, 9, 17]
    runs = [speculative_report(looping, NGRAM, ids, max_new_tokens=30, k=3, temperature=1.0, seed=s) for s in (1, 1, 2)]
    assert runs[0]["tokens"] == runs[1]["tokens"] and len(runs[0]["tokens"]) == 30
    assert runs[0]["tokens"] != runs[2]["tokens"]


def test_distribution_is_one_hot_at_temperature_zero():
    assert distribution(torch.tensor([0.1, 3.0, 2.0]), 0).tolist() == [0.0, 1.0, 0.0]


def test_cli_takes_ngram_beside_a_folder():
    out = subprocess.run([sys.executable, "-m", "inference", "speculative", "--target", "bundled", "--draft", "ngram",
                          "--prompt", "What does mole mean?", "--max-new-tokens", "12", "--k", "4"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    [report] = [json.loads(line) for line in out.stdout.splitlines()]
    assert report["method"] == "ngram" and report["identical"] and report["tokens"] == report["target_tokens"]

"""The batching experiment on the bundled model: throughput per batch size, drift of the visitor's row."""
import math

import pytest
import torch

from inference.batching import batch_experiment, filler_rows
from inference.prompting import build_prompt

ARTICLE = [{"role": "user", "content": "The mole on my face may need a biopsy. Explain this simply."}]
NEW_TOKENS = 8


@pytest.fixture(scope="module")
def experiment(bundled):
    prompt = build_prompt(bundled.tokenizer, messages=ARTICLE)
    return prompt, batch_experiment(bundled, prompt.ids, batch_sizes=(1, 2, 4), max_new_tokens=NEW_TOKENS)


def test_shape_of_result(experiment):
    prompt, result = experiment
    assert result["model"] == "bundled"
    assert result["prompt_tokens"] == len(prompt.ids)
    assert result["max_new_tokens"] == NEW_TOKENS
    assert [r["batch_size"] for r in result["runs"]] == [1, 2, 4]
    assert set(result["throughput_ratio"]) == {1, 2, 4}


def test_throughput_ratios_are_each_size_against_the_lone_row(experiment):
    """Each ratio is that size's measured tokens/s over batch size one's, both from the same run."""
    speed = {r["batch_size"]: r["tokens_per_s"] for r in experiment[1]["runs"]}
    for size in (2, 4):
        assert experiment[1]["throughput_ratio"][size] == pytest.approx(speed[size] / speed[1], rel=5e-3)


def test_batch_size_one_matches_reference(experiment):
    one = experiment[1]["runs"][0]
    assert one["max_abs_logit_diff"] == 0
    assert one["flipped_tokens"] == 0 and one["first_flip"] is None
    assert one["padding_tokens"] == 0


def test_every_run_reports_measurements(experiment):
    for run in experiment[1]["runs"]:
        assert math.isfinite(run["tokens_per_s"]) and run["tokens_per_s"] > 0
        assert run["seconds"] > 0
        assert 0 <= run["max_abs_logit_diff"] < 1e-2
        assert 0 <= run["flipped_tokens"] <= NEW_TOKENS
        assert (run["first_flip"] is None) == (run["flipped_tokens"] == 0)
        if run["batch_size"] > 1:
            assert run["padding_tokens"] > 0


@torch.inference_mode()
def test_flips_agree_with_an_independent_batch_of_two(bundled, experiment):
    prompt, result = experiment
    model, pad = bundled.model, bundled.tokenizer.pad_token_id
    alone = model.generate(torch.tensor([prompt.ids]), max_new_tokens=NEW_TOKENS, do_sample=False,
                           pad_token_id=pad)[0, len(prompt.ids):].tolist()
    rows = [prompt.ids, filler_rows(bundled.tokenizer, 1, seed=0)[0]]
    width = max(map(len, rows))
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    together = model.generate(ids, attention_mask=mask, max_new_tokens=NEW_TOKENS, do_sample=False,
                              pad_token_id=pad)[0, width:].tolist()
    common = min(len(alone), len(together))
    differing = sum(a != b for a, b in zip(alone[:common], together[:common]))
    two = next(r for r in result["runs"] if r["batch_size"] == 2)
    assert two["flipped_tokens"] == differing
    assert result["reference_tokens"] == alone[: len(result["reference_tokens"])]


def test_rejects_bad_batch_sizes(bundled):
    with pytest.raises(ValueError, match="batch_sizes"):
        batch_experiment(bundled, [2, 3], batch_sizes=(1, 0))

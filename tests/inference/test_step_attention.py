"""A step's attention: every head's row while the step fits one frame (STEP_FRAME_BYTES), else the mean over heads
and each head's strongest keys, which the page lists in place of the rows. Never both: with every row sent, the
strongest keys are the rows' own top (derivable), ~800 numbers a SmolLM2 step writes for nobody."""
import json

import numpy as np
import torch

from inference.capture import HEAD_TOP_KEYS
from inference.engine import GenerationSession
from inference.prompting import build_prompt
from inference.sampling import SamplingParams
from inference.wire import builders
from inference.wire.canonical import canonical_text
from inference.wire.packing import unpack


def steps_of(loaded, n: int = 5) -> list[dict]:
    session = GenerationSession(loaded, build_prompt(loaded.tokenizer, input_ids=[1, 300, 301, 302]),
                                SamplingParams(temperature=0.8, seed=4, max_new_tokens=n, min_new_tokens=n))
    return [session.step() for _ in range(n)]


def test_a_step_that_fits_its_frame_sends_every_heads_row_and_no_top_lists(stories):
    for step in steps_of(stories):
        attention = step["attention"]
        assert attention["mode"] == "heads" and attention["top_keys"] is None and attention["top_weights"] is None
        heads = unpack(attention["heads"])  # (layers, heads, keys)
        assert heads.shape[-1] == attention["keys"] == step["input"]["position"] + 1
        assert np.allclose(heads.mean(axis=1), unpack(attention["mean"]), atol=2e-3)
        assert len(step.text) <= builders.STEP_FRAME_BYTES  # the frame it goes out as
        assert step.text == canonical_text(json.loads(json.dumps(step)))  # written once, as the digest reads it


def test_a_step_over_its_frame_sends_the_mean_and_each_heads_strongest_keys_from_the_same_rows(stories, monkeypatch):
    whole = steps_of(stories)
    # every step's rows over the cap (their timings' digits differ run to run: a few bytes)
    monkeypatch.setattr(builders, "STEP_FRAME_BYTES", min(len(s.text) for s in whole) - 100)
    for step, full in zip(steps_of(stories), whole):
        attention = step["attention"]
        assert attention["mode"] == "mean" and attention["heads"] is None
        assert attention["mean"] == full["attention"]["mean"] and step["token"] == full["token"]
        heads = unpack(full["attention"]["heads"])  # the same run's rows, sent whole
        k = min(HEAD_TOP_KEYS, heads.shape[-1])
        keys = np.asarray(attention["top_keys"])  # (layers, heads, k)
        assert keys.shape == heads.shape[:2] + (k,)
        weights = np.take_along_axis(heads, keys, axis=-1)  # each listed key's weight in the row (float16)
        assert np.allclose(weights, attention["top_weights"], atol=1e-3)
        assert np.all(weights.min(axis=-1) + 1e-3 >= np.sort(heads, axis=-1)[..., -k])  # none stronger left out


def test_the_frame_decision_counts_every_byte_of_the_rows(stories, monkeypatch):
    """Heads mode exactly while the step's text with every row (the frame it goes out as) is within the cap: at a
    real step's size it sends the rows, at one byte less the mean. (Decided from the rest of the step's text, whose
    timings differ run to run: the same rest is given here.)"""
    step = steps_of(stories, 2)[-1]
    rest = canonical_text({k: v for k, v in step.items() if k != "attention"})
    rows = torch.from_numpy(unpack(step["attention"]["heads"]))  # (layers, heads, keys)
    monkeypatch.setattr(builders, "STEP_FRAME_BYTES", len(step.text))
    assert builders.step_attention(rows, len(rest))["mode"] == "heads"
    monkeypatch.setattr(builders, "STEP_FRAME_BYTES", len(step.text) - 1)
    assert builders.step_attention(rows, len(rest))["mode"] == "mean"


def test_each_heads_strongest_keys_are_its_top_weights_ties_to_the_earlier_key():
    from inference.capture import head_top_keys

    attn = torch.rand(4, 3, 50, generator=torch.Generator().manual_seed(0)).softmax(-1)  # (layers, heads, keys)
    attn[2, 1, [30, 7, 20, 41]] = 0.5  # four tied: the three earliest
    top = head_top_keys(attn)
    values, keys = attn.topk(HEAD_TOP_KEYS, dim=-1)
    assert np.allclose(top.weights, values.double().numpy().round(4), atol=0) and top.keys[2][1] == [7, 20, 30]
    untied = torch.ones(4, 3, dtype=torch.bool)
    untied[2, 1] = False
    assert np.array_equal(np.asarray(top.keys)[untied.numpy()], keys[untied].numpy())
    assert head_top_keys(attn[:, :, :2]).keys == attn[:, :, :2].topk(2, dim=-1).indices.tolist()  # fewer keys than k

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
        assert len(json.dumps(step)) <= builders.STEP_FRAME_BYTES


def test_a_step_over_its_frame_sends_the_mean_and_each_heads_strongest_keys_from_the_same_rows(stories, monkeypatch):
    whole = steps_of(stories)
    monkeypatch.setattr(builders, "STEP_FRAME_BYTES", min(len(json.dumps(s)) for s in whole) - 1)
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
    """Heads mode exactly while the step with every row encodes within the cap (give or take the packed dict's
    own keys, counted generously): one byte less than a real step's size, and that step sends the mean."""
    size = len(json.dumps(steps_of(stories, 2)[-1]))
    monkeypatch.setattr(builders, "STEP_FRAME_BYTES", size + 64)
    assert steps_of(stories, 2)[-1]["attention"]["mode"] == "heads"
    monkeypatch.setattr(builders, "STEP_FRAME_BYTES", size - 1)
    assert steps_of(stories, 2)[-1]["attention"]["mode"] == "mean"

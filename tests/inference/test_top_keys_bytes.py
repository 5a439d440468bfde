"""A step decides whether every head's attention row fits its frame from its encoded size; the top keys and
weights (~800 numbers on SmolLM2) are counted from their tensors instead of written. The count must be exactly
what json.dumps writes, for any weights an attention row can have."""
import json

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from inference.capture import head_top_keys


@st.composite
def attention_rows(draw):
    layers, heads, keys = draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(1, 120))
    special = st.sampled_from([0.0, 1.0, 0.5, 0.1, 0.12, 0.00005, 0.00004999, 0.99995, 0.999949, 1e-9, 0.1234])
    value = st.one_of(special, st.floats(0.0, 1.0, allow_nan=False, width=32))
    flat = draw(st.lists(value, min_size=layers * heads * keys, max_size=layers * heads * keys))
    return torch.tensor(flat, dtype=torch.float32).reshape(layers, heads, keys)


@settings(max_examples=300, deadline=None)
@given(attention_rows())
def test_the_top_lists_are_counted_exactly_as_json_dumps_writes_them(attn):
    top = head_top_keys(attn)
    assert top.encoded_bytes == len(json.dumps(top.keys)) + len(json.dumps(top.weights))


def test_weights_that_are_not_an_attention_rows_are_left_to_json_dumps():
    for odd in (float("nan"), float("inf"), 1.5, -0.25, -0.0):
        attn = torch.full((2, 3, 5), 0.2)
        attn[1, 2] = odd  # a whole head's row: its top keys carry the odd weight
        assert head_top_keys(attn).encoded_bytes is None, odd


def test_a_half_precision_row_and_many_keys_count_exactly():
    attn = torch.softmax(torch.randn(30, 9, 12_345), dim=-1).half()  # key positions of five digits
    attn[3, 4, 11_000] = 1.0
    top = head_top_keys(attn)
    assert top.encoded_bytes == len(json.dumps(top.keys)) + len(json.dumps(top.weights))



def test_a_real_steps_counted_size_is_its_encoded_size(monkeypatch):
    """The size each step of a run decides by is the one json.dumps gives the same message."""
    from inference.engine import GenerationSession
    from inference.loading import load_model
    from inference.prompting import build_prompt
    from inference.sampling import SamplingParams
    from inference.wire import builders
    from inference.wire.framing import encoded_size
    from tests.support import stories_spec

    counted = []

    def checked(step, top):
        size = step_bytes(step, top)
        counted.append((size, encoded_size(step), top.encoded_bytes))
        return size
    step_bytes = builders.step_bytes
    monkeypatch.setattr(builders, "step_bytes", checked)
    loaded = load_model(stories_spec(), device="cpu")
    session = GenerationSession(loaded, build_prompt(loaded.tokenizer, input_ids=[1, 300, 301, 302]),
                                SamplingParams(temperature=0.8, seed=4, max_new_tokens=6))
    for _ in range(6):
        session.step()
    assert len(counted) == 6 and all(top is not None for _, _, top in counted)
    assert all(size == actual for size, actual, _ in counted), counted


"""A message's canonical text (inference/wire/canonical.py) is json.dumps of it as a browser writes it back, whatever
is written directly: the packed arrays' text, a step's attention added last."""
import json

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from inference.wire.canonical import canonical_text, with_first_member
from inference.wire.packing import Packed, packed, unpack


def reference(value):
    """The digest's definition, written out: integral floats as ints, sorted keys, no spaces, ASCII, strict."""
    def plain(v):
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, list):
            return [plain(x) for x in v]
        return v
    return json.dumps(plain(json.loads(json.dumps(value))), sort_keys=True, separators=(",", ":"), allow_nan=False)


arrays = st.builds(lambda shape, seed: packed(torch.randn(shape, generator=torch.Generator().manual_seed(seed))),
                   st.lists(st.integers(0, 5), min_size=1, max_size=3), st.integers(0, 1000))
texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
leaves = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), texts,
                   st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([0.0, 2.0, -1.0, 1e-05]))
messages = st.recursive(leaves | arrays, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
                        max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(texts, messages, max_size=6))
def test_the_canonical_text_is_the_reference_with_packed_arrays_written_directly(message):
    assert canonical_text(message) == reference(message)


def test_a_packed_array_reads_back_and_writes_as_json_does():
    array = packed(torch.tensor([[0.5, -1.0, 2.25], [0.0, 3.0, 1e-3]]))
    assert type(array) is Packed and np.allclose(unpack(array), [[0.5, -1.0, 2.25], [0.0, 3.0, 1e-3]], atol=1e-3)
    assert array.text() == json.dumps(dict(array), sort_keys=True, separators=(",", ":"))
    array["shape"] = [6.0]  # changed into what it does not write directly: json.dumps writes it
    assert canonical_text({"a": array}) == reference({"a": array})


def test_a_text_that_looks_like_a_placeholder_stays_text():
    """A visitor's words cannot name a placeholder: they lack the nonce (and json.dumps escapes their quotes)."""
    from inference.wire import canonical
    spoof = {"a": "\0" + "0" * 16 + "0", "b": f"\0{canonical._NONCE[:8]}0", "c": packed(torch.ones(2))}
    assert canonical_text(spoof) == reference(spoof)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(alphabet="bcdefgz", min_size=1, max_size=5), leaves, max_size=5), messages)
def test_a_member_that_sorts_first_joins_the_rest_as_one_dumps_writes_them(rest, first):
    assert with_first_member(canonical_text(rest), "a", canonical_text({"x": first})[5:-1]) == \
        reference({"a": first, **rest})

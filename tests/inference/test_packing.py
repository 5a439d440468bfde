"""Packed arrays (docs/protocol.md, "Packed arrays"): little-endian float16, base64. A tensor is converted by
torch (a strided row of a stacked batch, every step); the bytes are numpy's conversion's, value for value."""
import base64

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from inference.wire.packing import packed, unpack

EDGES = [0.0, -0.0, 1.0, 65504.0, 65520.0, 1e6, -1e6, 6e-8, 3e-8, 1e-9, 5.96e-8, 0.1, 1 / 3, float("inf"), float("-inf")]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(EDGES), st.floats(-7e4, 7e4, allow_nan=False, width=32)), min_size=1, max_size=64))
def test_a_tensor_packs_to_the_bytes_numpy_gives(values):
    tensor = torch.tensor(values, dtype=torch.float32)
    ours = packed(tensor)
    with np.errstate(over="ignore"):
        numpy_bytes = np.asarray(values, dtype=np.float32).astype("<f2").tobytes()
    assert base64.b64decode(ours["b64"]) == numpy_bytes and ours["dtype"] == "float16" and ours["shape"] == [len(values)]


def test_a_strided_row_of_a_stack_packs_as_its_copy_and_unpacks_back():
    stack = torch.rand(30, 8, 9, 70)  # (layers, batch, heads, keys)
    row = stack[:, 5, :, 3:]  # a step's attention: a view with strides
    assert packed(row) == packed(row.contiguous().clone())
    assert np.allclose(unpack(packed(row)), row.numpy(), atol=1e-3)
    assert packed(row.to(torch.bfloat16)) == packed(row.to(torch.bfloat16).float())  # a GPU's bf16, as float first

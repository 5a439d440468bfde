"""Weight-only quantization of the bundled model: smaller, close to float, and the shared model untouched."""
import math

import pytest
import torch

from inference.prompting import build_prompt
from inference.quantize import QuantLinear, quantize_experiment, quantize_int4, quantize_int8, unpack_int4

ARTICLE = [{"role": "user", "content": "The mole on my face may need a biopsy. Explain this simply."}]
NEW_TOKENS = 8


def checksum(model) -> float:
    return sum(float(t.double().sum()) for t in model.state_dict().values())


@pytest.fixture(scope="module")
def results(bundled):
    ids = build_prompt(bundled.tokenizer, messages=ARTICLE).ids
    before = checksum(bundled.model)
    out = {bits: quantize_experiment(bundled, ids, bits=bits, max_new_tokens=NEW_TOKENS) for bits in (8, 4)}
    return out, before


def test_int8_is_smaller_and_close(results):
    r = results[0][8]
    assert r["bits"] == 8
    assert r["weight_bytes_after"] < 0.75 * r["weight_bytes_before"]
    assert r["top1_agreement"] >= 0.9
    assert math.isfinite(r["max_abs_logit_diff"]) and r["max_abs_logit_diff"] > 0
    assert r["quantized_layers"] == 6 * 7  # q, k, v, o, gate, up, down per layer; the tied head stays float
    assert r["lm_head"] == "float (tied to embeddings)"
    assert r["decode_tokens_per_s_before"] > 0 and r["decode_tokens_per_s_after"] > 0
    assert isinstance(r["greedy_tokens_identical"], bool)


def test_int4_is_smaller_than_int8(results):
    r4, r8 = results[0][4], results[0][8]
    assert r4["weight_bytes_after"] < r8["weight_bytes_after"]
    assert r4["weight_bytes_before"] == r8["weight_bytes_before"]
    assert 0 <= r4["top1_agreement"] <= 1


def test_shared_model_untouched(bundled, results):
    assert checksum(bundled.model) == results[1]
    assert not any(isinstance(m, QuantLinear) for m in bundled.model.modules())
    assert bundled.model.get_output_embeddings().weight is bundled.model.get_input_embeddings().weight


def test_bits_validated(bundled):
    with pytest.raises(ValueError, match="bits"):
        quantize_experiment(bundled, [2, 3], bits=3)


def test_round_trip_error_is_within_half_a_step():
    w = torch.randn(6, 70, generator=torch.Generator().manual_seed(0))  # 70: not a multiple of the group
    q8, s8 = quantize_int8(w)
    assert q8.dtype == torch.int8 and q8.shape == w.shape
    assert ((q8.float() * s8[:, None] - w).abs() <= s8[:, None] / 2 + 1e-6).all()
    packed, s4 = quantize_int4(w)
    assert packed.dtype == torch.uint8 and packed.shape == (6, 48) and s4.shape == (6, 3)
    err = (unpack_int4(packed, s4, 70) - w).abs().view(6, -1)  # (6, 70)
    assert (err <= s4.repeat_interleave(32, dim=1)[:, :70] / 2 + 1e-6).all()

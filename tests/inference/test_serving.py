"""Serving measurements run on the loaded model and report consistent numbers."""
from inference.kvstats import kv_formula
from inference.serving import capacity, kv_calculator, prefill_decode, weight_bytes


def test_prefill_decode_measures_each_length(bundled):
    result = prefill_decode(bundled, lengths=(8, 32))
    assert [r["prompt_tokens"] for r in result["rows"]] == [8, 32]
    assert all(r["prefill_ms"] > 0 and r["decode_ms"] > 0 for r in result["rows"])
    assert result["weight_bytes"] == 4 * result["parameters"]  # float32 on this machine
    assert result["prefill_intensity"]["32"] == 32 * result["decode_intensity"]  # one weight read shared by 32 tokens


def test_kv_calculator_includes_loaded_model_and_opt(bundled):
    rows = {r["key"]: r for r in kv_calculator(bundled, tokens=(2048,))["rows"]}
    assert rows["opt-13b"]["bytes_per_token"] == 819_200
    assert rows["loaded"]["bytes_per_token"] == kv_formula(bundled.model.config, "float16", 1)["bytes_per_token"]


def test_capacity(bundled):
    result = capacity(bundled, memory_bytes=1 << 30, context_tokens=512)
    per = kv_formula(bundled.model.config, "float32", 512)["total_bytes"]
    assert result["visitors"] == ((1 << 30) - weight_bytes(bundled.model)) // per

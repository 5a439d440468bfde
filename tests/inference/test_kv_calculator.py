"""The KV-cache calculator on the shipped configs: exact figures, KV heads not query heads."""
from inference.kvstats import kv_formula, kv_table, known_configs


def test_opt_13b_is_the_vllm_papers_800_kb():
    opt = known_configs()["opt-13b"]
    assert kv_formula(opt, "float16", 1)["bytes_per_token"] == 819_200  # 2 x 5120 x 40 layers x 2 bytes
    assert kv_formula(opt, "float16", 2048)["total_bytes"] == 1_677_721_600  # ~1.6 GB for one 2,048-token request


def test_shipped_configs_exact():
    configs = known_configs()
    expected = {  # 2 x layers x KV heads x head dim x 2 bytes (fp16/bf16)
        "llama-2-7b": 2 * 32 * 32 * 128 * 2,  # 512 KiB: one KV head per query head
        "llama-3-8b": 2 * 32 * 8 * 128 * 2,  # 128 KiB: GQA, 4x smaller
        "mistral-7b": 2 * 32 * 8 * 128 * 2,
        "qwen2.5-7b-1m": 2 * 28 * 4 * 128 * 2,
    }
    for key, per_token in expected.items():
        assert kv_formula(configs[key], "float16", 1)["bytes_per_token"] == per_token, key


def test_sliding_window_caps_mistral_and_declared_but_off_window_does_not():
    configs = known_configs()
    mistral = kv_formula(configs["mistral-7b"], "float16", 32_000)
    assert mistral["cached_tokens"] == 4095 and mistral["total_bytes"] == 131_072 * 4095  # window - 1 between steps
    qwen = kv_formula(configs["qwen2.5-7b-1m"], "float16", 1_000_000)
    assert qwen["sliding_window"] is None and qwen["total_bytes"] == 57_344 * 1_000_000  # ~57 GB for 1M tokens


def test_table_rows():
    rows = kv_table(known_configs(), [1, 2048])
    by_key = {r["key"]: r for r in rows}
    assert by_key["opt-13b"]["totals"][1]["total_bytes"] == 1_677_721_600
    assert by_key["llama-3-8b"]["query_heads"] == 32 and by_key["llama-3-8b"]["kv_heads"] == 8

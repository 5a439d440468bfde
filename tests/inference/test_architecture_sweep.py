"""Every decoder-only text architecture transformers maps to a causal LM, built tiny and random: the engine
traces it exactly or names what it lacks; stages a model does not have are reported, not crashed on."""
from collections import Counter

import pytest
from tests.inference.arch_helpers import (arch_config, causal_lm_types, decoder_only_text, small_loaded, tiny_loaded,
                                          trace_architecture)
from tests.inference.test_architectures import PROMPT, run_greedy

from inference.discovery import adapter_for
from inference.model_config import UnsupportedModel


def test_every_decoder_only_architecture_in_the_causal_lm_mapping():
    """Tiny random configs of every decoder-only text architecture transformers maps to a causal LM:
    greedy ids equal ``generate`` and every payload validates, for at least 98% of those that build small."""
    types = [t for t in causal_lm_types() if decoder_only_text(t) is None]
    results = {t: trace_architecture(t, PROMPT, 6) for t in types}
    counts = Counter(kind for kind, _ in results.values())
    built = len(types) - counts["not_small"]
    print(f"\n{len(types)} decoder-only text types; {built} build small; {dict(counts)}")
    for t, (kind, detail) in sorted(results.items()):
        if kind != "exact":
            print(f"  {t}: {kind} {detail}")
    assert built >= 100, "the small configs stopped building: the sweep would prove little"
    assert counts["crash"] == 0, {t: d for t, (k, d) in results.items() if k == "crash"}
    assert counts["exact"] >= 0.98 * built, {t: d for t, (k, d) in results.items() if k == "mismatch"}


def test_an_unusable_model_is_a_clear_error_naming_the_architecture(monkeypatch):
    model = tiny_loaded(arch_config("llama")).model
    monkeypatch.setattr(model, "get_output_embeddings", lambda: None)
    with pytest.raises(UnsupportedModel, match="llama.*LlamaForCausalLM.*no LM head"):
        adapter_for(model)


@pytest.mark.parametrize("model_type", ["mamba", "openai-gpt", "rwkv", "qwen3_next", "bloom"])
def test_models_without_a_stage_say_so(model_type):
    """No attention (Mamba, RWKV), no cache (RWKV's state is not a cache transformers can extend here;
    openai-gpt keeps none), linear attention (Qwen3-Next), no position table (Bloom: ALiBi)."""
    loaded = small_loaded(model_type)
    absent = loaded.description.absent_stages
    session, prefill, steps = run_greedy(loaded, new=3)
    if model_type in ("mamba", "rwkv"):
        assert "attention" in absent and prefill["attention"]["layers"] == 0
    if model_type == "openai-gpt":
        assert "kv_cache" in absent and prefill["kv"]["bytes"] == 0 and prefill["positions"]["scheme"] == "learned"
    if model_type == "qwen3_next":
        assert "only layers" in absent["attention"] and 0 < prefill["attention"]["layers"] < loaded.description.layers
    if model_type == "bloom":
        assert "positions" in absent and prefill["positions"]["scheme"] == "none"
    assert len(steps) == 3 and all(s["lens"] for s in steps)

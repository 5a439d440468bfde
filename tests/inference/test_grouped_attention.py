"""Grouped eager attention (inference/grouped_attention.py): the same tokens, logits and attention weights as each
family's own eager attention, wherever it is switched on, and never where the family's eager differs."""
import inspect
import sys
import types

import pytest
import torch
from transformers.models.llama import modeling_llama

from inference.grouped_attention import NAME, grouped_eager_attention, standard_eager, use_grouped_attention
from inference.loading import load_model
from tests.inference.arch_helpers import NotSmall, causal_lm_types, small_model

PROMPT = torch.tensor([[5, 17, 42, 9, 77, 3, 64, 21, 90, 11]])


class Module(torch.nn.Module):
    num_key_value_groups = 3


@pytest.mark.parametrize("queries", [1, 5])
@pytest.mark.parametrize("masked", [False, True])
def test_it_is_llamas_eager_attention_without_the_copies(queries, masked):
    torch.manual_seed(queries)
    query, key, value = torch.randn(2, 9, queries, 16), torch.randn(2, 3, 7, 16), torch.randn(2, 3, 7, 16)
    mask = torch.zeros(2, 1, queries, 7).masked_fill(torch.rand(2, 1, queries, 7) < 0.3, -1e9) if masked else None
    module = Module().eval()
    expected = modeling_llama.eager_attention_forward(module, query, key, value, mask, scaling=0.25)
    got = grouped_eager_attention(module, query, key, value, mask, scaling=0.25)
    for e, g in zip(expected, got):
        assert g.shape == e.shape
        torch.testing.assert_close(g, e, rtol=0, atol=1e-6)


def _generate(model) -> tuple[torch.Tensor, torch.Tensor, list]:
    with torch.no_grad():
        out = model.generate(PROMPT, attention_mask=torch.ones_like(PROMPT), do_sample=False, max_new_tokens=6,
                             min_new_tokens=6, output_logits=True, output_attentions=True,
                             return_dict_in_generate=True, pad_token_id=0)
    weights = [w for step in out.attentions for w in step if w is not None]
    return out.sequences, torch.stack(out.logits), weights


def test_every_family_it_switches_keeps_its_own_eagers_tokens_logits_and_weights():
    switched, kept = [], []
    for model_type in causal_lm_types():
        try:
            model = small_model(model_type)
            before = _generate(model)
        except (NotSmall, Exception):  # noqa: BLE001 - not buildable small here, or no generate: not this test's
            continue
        if not use_grouped_attention(model):
            kept.append(model_type)
            assert model.config._attn_implementation == "eager"
            continue
        switched.append(model_type)
        after = _generate(model)
        assert torch.equal(after[0], before[0]), model_type
        torch.testing.assert_close(after[1], before[1], rtol=0, atol=1e-5, msg=model_type)
        assert len(after[2]) == len(before[2])
        for a, b in zip(after[2], before[2]):
            torch.testing.assert_close(a, b, rtol=0, atol=1e-6, msg=model_type)
    assert {"llama", "mistral", "qwen2", "qwen3", "gemma", "smollm3"} <= set(switched)
    # soft-capped logits (gemma2), attention sinks (gpt_oss), no shared KV heads (gpt2): their own eager stays
    assert {"gemma2", "gpt_oss", "gpt2"} <= set(kept)


def family(name: str, eager_source: str):
    """A made-up family module: Llama's attention class, with `eager_source` as the module's eager attention."""
    module = types.ModuleType(name)
    sys.modules[name] = module
    exec("from __future__ import annotations\nimport torch\nfrom torch import nn\nfrom transformers.models.llama.modeling_llama import LlamaAttention, repeat_kv\n"
         + eager_source + "\nclass Attention(LlamaAttention):\n    pass\n", module.__dict__)
    return module.Attention


def test_a_copy_of_llamas_eager_switches_and_a_twisted_one_does_not():
    original = inspect.getsource(modeling_llama.eager_attention_forward)
    twisted = original.replace("attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling",
                               "attn_weights = torch.tanh(torch.matmul(query, key_states.transpose(2, 3)) * scaling)")
    assert twisted != original  # the line is there to change
    for source, switches in ((original, True), (twisted, False)):
        model = small_model("llama")
        attention_class = family(f"tests_fake_family_{switches}", source)
        for module in model.modules():
            if hasattr(module, "num_key_value_groups"):
                module.__class__ = attention_class  # its family now: the made-up module
        assert use_grouped_attention(model) is switches
        assert model.config._attn_implementation == (NAME if switches else "eager")


def test_smollm2_runs_it_and_its_greedy_reply_is_eagers(smollm2):
    assert smollm2.description.attn_implementation == smollm2.model.config._attn_implementation == NAME
    ids = smollm2.tokenizer.apply_chat_template([{"role": "user", "content": "Why is the sea salty?"}],
                                                add_generation_prompt=True, return_tensors="pt", return_dict=True)["input_ids"]
    runs = {}
    for implementation in ("eager", NAME):
        smollm2.model.set_attn_implementation(implementation)
        try:
            with torch.no_grad():
                out = smollm2.model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=16,
                                             min_new_tokens=16, output_logits=True, return_dict_in_generate=True)
        finally:
            smollm2.model.set_attn_implementation(NAME)
        runs[implementation] = (out.sequences[0, ids.shape[1]:].tolist(), torch.stack(out.logits))
    assert runs[NAME][0] == runs["eager"][0]
    torch.testing.assert_close(runs[NAME][1], runs["eager"][1], rtol=0, atol=1e-4)


def test_sdpa_and_models_without_shared_kv_heads_keep_their_attention():
    assert load_model("bundled", device="cpu", attn_implementation="sdpa").model.config._attn_implementation == "sdpa"
    gpt2 = small_model("gpt2")
    assert not use_grouped_attention(gpt2) and gpt2.config._attn_implementation == "eager"

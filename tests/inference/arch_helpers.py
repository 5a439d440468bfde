"""Tiny, randomly initialised models of real architectures, wrapped as ``LoadedModel``s.

Nothing is downloaded: each config is built here, the weights come from ``torch.manual_seed(0)``,
and the tokenizer is a WordLevel vocabulary ``<tN> -> N`` (like the bundled stories260K one).
No eos token anywhere, so greedy runs always produce exactly ``max_new_tokens`` tokens.
"""
from __future__ import annotations

import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    AutoModelForCausalLM,
    GemmaConfig,
    GPT2Config,
    LlamaConfig,
    MistralConfig,
    PhiConfig,
    Phi3Config,
    PreTrainedTokenizerFast,
    Qwen2Config,
)

from inference.adapters import adapter_for
from inference.loading import FALLBACK_CHAT_TEMPLATE, LoadedModel, describe

VOCAB = 128
CONTEXT = 128
SLIDING_WINDOW = 8
NO_SPECIAL_IDS = dict(bos_token_id=None, eos_token_id=None, pad_token_id=None)
_COMMON = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
               vocab_size=VOCAB, max_position_embeddings=CONTEXT, **NO_SPECIAL_IDS)


def arch_config(name: str):
    """A 2-layer, hidden-32 config of the family ``name``."""
    if name == "gpt2":  # learned absolute positions, Conv1D projections, fused qkv
        return GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=VOCAB, n_positions=CONTEXT, **NO_SPECIAL_IDS)
    if name == "llama":  # grouped-query attention: 2 KV heads for 4 query heads
        return LlamaConfig(**_COMMON, num_key_value_heads=2)
    if name == "qwen2":  # q/k/v biases
        return Qwen2Config(**_COMMON, num_key_value_heads=2)
    if name == "mistral":  # sliding-window attention, window much shorter than prompt + generation
        return MistralConfig(**_COMMON, num_key_value_heads=2, sliding_window=SLIDING_WINDOW)
    if name == "gemma":  # embeddings scaled by sqrt(hidden), multi-query attention, explicit head_dim
        return GemmaConfig(**_COMMON, num_key_value_heads=1, head_dim=8)
    if name == "phi3":  # fused qkv / gate_up projections
        return Phi3Config(**_COMMON, num_key_value_heads=4)
    if name == "phi":  # partial rotary (half of each head), parallel attention + MLP, final_layernorm
        return PhiConfig(**_COMMON)
    raise ValueError(name)


ARCHITECTURES = ("gpt2", "llama", "qwen2", "mistral", "gemma", "phi3", "phi")


def tiny_tokenizer(vocab_size: int = VOCAB) -> PreTrainedTokenizerFast:
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"<t{i}>": i for i in range(3, vocab_size)}}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", bos_token="<s>")
    tokenizer.chat_template = FALLBACK_CHAT_TEMPLATE
    return tokenizer


def tiny_loaded(config, spec: str | None = None) -> LoadedModel:
    """A LoadedModel over a freshly initialised (seed 0), eager-attention model of ``config``."""
    config._attn_implementation = "eager"  # attentions are returned only by eager attention
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    model.generation_config.eos_token_id = model.generation_config.pad_token_id = None
    model.generation_config.bos_token_id = None
    adapter = adapter_for(model.config)
    description = describe(model, spec or f"tiny-{config.model_type}", adapter, "fallback", "eager")
    return LoadedModel(model, tiny_tokenizer(config.vocab_size), description, adapter)

"""A randomly initialised Llama with SmolLM2-135M's shapes, saved as a model folder with the bundled tokenizer.

Payload sizes depend on shapes (layers, heads, hidden size, tokens), not on weights, so this stands in for
SmolLM2-135M-Instruct in the frame-size tests. The bundled tokenizer's 4,096 ids are all inside SmolLM2's vocabulary.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, LlamaConfig

from inference.loading import BUNDLED_DIR

SMOLLM2_135M_SHAPES = dict(num_hidden_layers=30, hidden_size=576, num_attention_heads=9, num_key_value_heads=3,
                           intermediate_size=1536, vocab_size=49152, tie_word_embeddings=True,
                           max_position_embeddings=8192, rope_theta=100000.0)


def save_smollm2_shaped(folder: Path, **overrides) -> Path:
    """Write the model (float16 on disk, to keep it small) and the bundled tokenizer into ``folder``.

    ``overrides`` change config fields that no payload shows (e.g. intermediate_size, the MLP's width), to make
    long test sweeps cheaper without changing a single message size.
    """
    if (folder / "config.json").exists():
        return folder
    torch.manual_seed(0)
    config = LlamaConfig(**{**SMOLLM2_135M_SHAPES, **overrides}, bos_token_id=None, eos_token_id=1, pad_token_id=0)
    model = AutoModelForCausalLM.from_config(config).to(torch.float16)
    model.save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(BUNDLED_DIR / name, folder / name)
    return folder

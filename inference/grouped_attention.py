"""Eager attention for grouped-query models, without copying each key/value head out to every query head it serves.

The page needs every head's attention weights, so the model runs eager attention (SDPA returns none). transformers'
eager attention (modeling_llama.eager_attention_forward, copied into most families) first copies each of the
cache's key and value heads out to its query heads (repeat_kv: SmolLM2's 3 KV heads to 9, every layer, every step),
then multiplies. This one multiplies each KV head's keys with all the query heads that share it, as one matrix:
the same dot products, the same softmax, the same weights returned, and no copy. On SmolLM2 (2-core CPU) a class of
32's decode forward took 62 ms instead of 70 (in-process, 30 steps).

It replaces eager attention only where that is exactly transformers' standard eager function (the same bytecode as
Llama's, so no soft-capping, sinks or other family twist is lost) and some query heads share a KV head; anything else
keeps its family's own eager attention.
"""
from __future__ import annotations

import sys

import torch
from torch import nn
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, eager_mask
from transformers.models.llama import modeling_llama

NAME = "eager_grouped"  # config._attn_implementation of a model that runs it


def grouped_eager_attention(module: nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                            attention_mask: torch.Tensor | None, scaling: float, dropout: float = 0.0, **kwargs):
    """transformers' eager attention, the query heads of each KV head taken together. query: (batch, heads, q, dim);
    key, value: (batch, kv_heads, k, dim); returns ((batch, q, heads, dim), weights (batch, heads, q, k))."""
    batch, heads, queries, dim = query.shape
    kv_heads, keys = key.shape[1], key.shape[2]
    grouped = query.reshape(batch, kv_heads, heads // kv_heads * queries, dim)  # head h reads KV head h // groups
    weights = (torch.matmul(grouped, key.transpose(2, 3)) * scaling).view(batch, heads, queries, keys)
    if attention_mask is not None:
        weights = weights + attention_mask  # (batch, 1, q, k)
    weights = nn.functional.softmax(weights, dim=-1, dtype=torch.float32).to(query.dtype)
    weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    out = torch.matmul(weights.view(batch, kv_heads, heads // kv_heads * queries, keys), value)  # (batch, kv, g*q, dim)
    return out.view(batch, heads, queries, dim).transpose(1, 2).contiguous(), weights


AttentionInterface.register(NAME, grouped_eager_attention)
AttentionMaskInterface.register(NAME, eager_mask)  # the masks eager attention gets (additive, float)


def _same_code(a, b) -> bool:
    a, b = a.__code__, b.__code__
    return (a.co_code, a.co_consts, a.co_names, a.co_varnames) == (b.co_code, b.co_consts, b.co_names, b.co_varnames)


def standard_eager(attention: nn.Module) -> bool:
    """This attention module's family runs transformers' standard eager attention and repeat_kv (Llama's)."""
    family = sys.modules.get(type(attention).__module__)
    eager, repeat = getattr(family, "eager_attention_forward", None), getattr(family, "repeat_kv", None)
    return (callable(eager) and callable(repeat) and _same_code(eager, modeling_llama.eager_attention_forward)
            and _same_code(repeat, modeling_llama.repeat_kv))


def use_grouped_attention(model: nn.Module) -> bool:
    """Switch an eager model to grouped eager attention where it applies (see the module's docstring); True if it
    did. Its attention modules are those with num_key_value_groups (transformers' attention classes)."""
    attentions = [m for m in model.modules() if hasattr(m, "num_key_value_groups")]
    if (getattr(model.config, "_attn_implementation", None) != "eager" or not attentions
            or not all(standard_eager(a) for a in attentions) or all(a.num_key_value_groups == 1 for a in attentions)):
        return False
    model.set_attn_implementation(NAME)
    return model.config._attn_implementation == NAME

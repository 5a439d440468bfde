"""One small adapter per model family: what differs between architectures, and nothing else.

The step engine never asks "which architecture is this?"; it asks the adapter for the token
embedding table, the position scheme, the final norm and the LM head.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class FamilyAdapter:
    family: str
    position_scheme: str  # "learned" (a vector per position is added) or "rotary" (q/k are rotated)
    embedding_scale: bool = False  # Gemma multiplies embeddings by sqrt(hidden_size)

    def backbone(self, model):
        return getattr(model, model.base_model_prefix)

    def token_embeddings(self, model) -> torch.nn.Embedding:
        return model.get_input_embeddings()

    def embed(self, model, input_ids: torch.Tensor) -> torch.Tensor:
        """The looked-up embedding rows, as the first layer receives them (before positions)."""
        rows = self.token_embeddings(model)(input_ids)  # (batch, seq, hidden)
        if self.embedding_scale:
            rows = rows * torch.tensor(math.sqrt(model.config.hidden_size), dtype=rows.dtype)
        return rows

    def final_norm(self, model) -> torch.nn.Module:
        backbone = self.backbone(model)
        return getattr(backbone, "norm", None) or getattr(backbone, "ln_f", None) or backbone.final_layernorm

    def layers(self, model) -> list[torch.nn.Module]:
        backbone = self.backbone(model)
        return list(getattr(backbone, "layers", None) or backbone.h)

    def position_vectors(self, model, positions: torch.Tensor) -> torch.Tensor | None:
        """Learned position vectors (batch, seq, hidden), or None for rotary models."""
        return None

    def rotary_angles(self, model, positions: torch.Tensor) -> torch.Tensor | None:
        """Rotation angle per (position, frequency pair) in radians, (seq, head_dim // 2)."""
        config = model.config
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        rotary_dim = int(head_dim * getattr(config, "partial_rotary_factor", 1.0))
        theta = rope_theta(config)
        inv_freq = 1.0 / (theta ** (torch.arange(0, rotary_dim, 2, dtype=torch.float32) / rotary_dim))
        return positions.float()[:, None] * inv_freq[None, :]  # (seq, rotary_dim // 2)

    def sliding_window(self, config) -> int | None:
        return getattr(config, "sliding_window", None) if getattr(config, "use_sliding_window", True) else None

    def context_window(self, config) -> int:
        return getattr(config, "max_position_embeddings", None) or config.n_positions


@dataclass(frozen=True)
class LearnedPositionsAdapter(FamilyAdapter):
    def position_vectors(self, model, positions):
        return self.backbone(model).wpe(positions)  # (seq, hidden)

    def rotary_angles(self, model, positions):
        return None


def rope_theta(config) -> float:
    params = getattr(config, "rope_parameters", None) or {}
    if isinstance(params, dict) and "rope_theta" in params:
        return float(params["rope_theta"])
    return float(getattr(config, "rope_theta", 10000.0))


ADAPTERS = {
    "gpt2": LearnedPositionsAdapter("gpt2", "learned"),
    "llama": FamilyAdapter("llama", "rotary"),
    "qwen2": FamilyAdapter("qwen2", "rotary"),
    "mistral": FamilyAdapter("mistral", "rotary"),
    "gemma": FamilyAdapter("gemma", "rotary", embedding_scale=True),
    "gemma2": FamilyAdapter("gemma2", "rotary", embedding_scale=True),
    "phi": FamilyAdapter("phi", "rotary"),
    "phi3": FamilyAdapter("phi3", "rotary"),
}


def adapter_for(config) -> FamilyAdapter:
    """The family's adapter; unknown families get the rotary default (most current causal LMs)."""
    return ADAPTERS.get(config.model_type, FamilyAdapter(config.model_type, "rotary"))

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
        table = self.token_embeddings(model)
        rows = table(input_ids)  # (batch, seq, hidden)
        # transformers 5's Gemma embedding module (…ScaledWordEmbedding) already multiplies by its embed_scale
        if self.embedding_scale and not hasattr(table, "embed_scale"):
            rows = rows * torch.tensor(math.sqrt(model.config.hidden_size), dtype=rows.dtype)
        return rows

    def layer_input(self, model, input_ids: torch.Tensor, first_position: int) -> torch.Tensor:
        """What layer 0 receives: embedding rows, plus learned position vectors where the family adds them."""
        rows = self.embed(model, input_ids)  # (batch, seq, hidden)
        positions = torch.arange(first_position, first_position + input_ids.shape[-1], device=rows.device)
        learned = self.position_vectors(model, positions)  # (seq, hidden) or None for rotary models
        return rows if learned is None else rows + learned

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
        rotary = getattr(self.backbone(model), "rotary_emb", None)
        inv_freq = getattr(rotary, "inv_freq", None)  # the model's own frequencies (rope scaling included)
        if inv_freq is None:
            config = model.config
            head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
            rotary_dim = int(head_dim * partial_rotary_factor(config))
            theta = rope_theta(config)
            inv_freq = 1.0 / (theta ** (torch.arange(0, rotary_dim, 2, dtype=torch.float32) / rotary_dim))
        inv_freq = inv_freq.detach().float().to(positions.device)
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


def partial_rotary_factor(config) -> float:
    """Share of each head's dims that is rotated (Phi: 0.5); transformers 5 keeps it in rope_parameters."""
    params = getattr(config, "rope_parameters", None) or {}
    if isinstance(params, dict) and "partial_rotary_factor" in params:
        return float(params["partial_rotary_factor"])
    return float(getattr(config, "partial_rotary_factor", None) or 1.0)


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

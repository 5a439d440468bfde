"""What differs between architectures, found from the model itself rather than from fixed attribute names.

The step engine never asks "which architecture is this?"; it asks the adapter for the decoder layers,
the token embedding table, the position scheme, the modules between the last layer and the LM head
(the final norm), and which stages the model has at all. ``adapter_for(model)`` (discovery.py) finds them once: the
layer list by shape, the embeddings with ``get_input_embeddings``/``get_output_embeddings``, the final
norm by watching one tiny forward pass, and sizes from ``config.get_text_config()``.
"""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field

import torch

from .model_config import head_dim_of, partial_rotary_factor, rope_theta, setting, text_config

@dataclass(frozen=True)
class FamilyAdapter:
    family: str
    position_scheme: str  # "learned" (a vector per position is added), "rotary" (q/k are rotated) or "none"
    embedding_scale: bool = False  # multiplied by sqrt(hidden) outside the embedding module (older Gemma code)
    layers_path: str = ""  # the decoder layer list, as a submodule name
    final_paths: tuple[str, ...] = ()  # what runs between the last layer and the LM head, in order
    positions_path: str | None = None  # the learned position table
    has_cache: bool = True  # False: the model returns no cache (openai-gpt), so every step re-runs the sequence
    attention_layers: tuple[int, ...] | None = None  # decoder layers that return attention weights; None = all
    notes: dict = field(default_factory=dict)  # stage -> what this model does instead (absent stages only)
    lens_ok: bool = True  # the final modules + head read any layer's residual (else only the last layer's)

    def backbone(self, model):
        return getattr(model, model.base_model_prefix)

    def token_embeddings(self, model) -> torch.nn.Embedding:
        return model.get_input_embeddings()

    def embed(self, model, input_ids: torch.Tensor) -> torch.Tensor:
        """The looked-up embedding rows (before positions)."""
        table = self.token_embeddings(model)
        rows = table(input_ids)  # (batch, seq, hidden)
        # transformers 5's Gemma embedding module (…ScaledWordEmbedding) already multiplies by its embed_scale
        if self.embedding_scale and not hasattr(table, "embed_scale"):
            rows = rows * torch.tensor(math.sqrt(text_config(model.config).hidden_size), dtype=rows.dtype)
        return rows

    def layer_input(self, model, input_ids: torch.Tensor, first_position: int) -> torch.Tensor:
        """Embedding rows plus learned position vectors where the family adds them (the engine records
        what layer 0 really receives with a hook; this is the explanation of it)."""
        rows = self.embed(model, input_ids)  # (batch, seq, hidden)
        positions = torch.arange(first_position, first_position + input_ids.shape[-1], device=rows.device)
        learned = self.position_vectors(model, positions)  # (seq, hidden) or None
        return rows if learned is None else rows + learned

    def final_norm(self, model) -> torch.nn.Module:
        """The modules between the last layer and the LM head, as one callable."""
        modules = [model.get_submodule(path) for path in self.final_paths]
        return modules[0] if len(modules) == 1 else torch.nn.Sequential(*modules)

    def layers(self, model) -> list[torch.nn.Module]:
        return list(model.get_submodule(self.layers_path))

    def position_vectors(self, model, positions: torch.Tensor) -> torch.Tensor | None:
        """Learned position vectors (seq, hidden), or None when the model adds none."""
        if self.positions_path is None:
            return None
        table = model.get_submodule(self.positions_path)
        offset = getattr(table, "offset", 0)  # OPT and BioGPT keep 2 spare rows at the start
        return table.weight[positions.to(table.weight.device) + offset]

    def rotary_angles(self, model, positions: torch.Tensor) -> torch.Tensor | None:
        """Rotation angle per (position, frequency pair) in radians, (seq, rotary_dim // 2)."""
        if self.position_scheme != "rotary":
            return None
        inv_freq = model_inv_freq(model)  # the model's own frequencies (rope scaling included)
        if inv_freq is None:
            config = text_config(model.config)
            rotary_dim = int(head_dim_of(config) * partial_rotary_factor(config))
            rotary_dim = setting(config, "rotary_dim") or rotary_dim  # GPT-J, CodeGen
            theta = rope_theta(config)
            inv_freq = 1.0 / (theta ** (torch.arange(0, rotary_dim, 2, dtype=torch.float32) / rotary_dim))
        inv_freq = inv_freq.detach().float().to(positions.device)
        return positions.float()[:, None] * inv_freq[None, :]  # (seq, rotary_dim // 2)

    def sliding_window(self, config) -> int | None:
        config = text_config(config)
        window = setting(config, "sliding_window") if setting(config, "use_sliding_window", True) else None
        return window if isinstance(window, int) else None

    def context_window(self, config) -> int:
        config = text_config(config)
        for name in ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "n_ctx"):
            value = setting(config, name)
            if isinstance(value, int) and value > 0:
                return value
        return 2048  # recurrent models (Mamba, RWKV) have no limit in their config; a bound for the page


_rotary_modules: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # model -> its rotary module, or None


def model_inv_freq(model) -> torch.Tensor | None:
    """The model's rotary frequencies (its first module with an `inv_freq` tensor), the module found once per model:
    walking every module took a millisecond and a half of each prefill's capture."""
    if model not in _rotary_modules:
        _rotary_modules[model] = next((m for m in model.modules() if isinstance(getattr(m, "inv_freq", None), torch.Tensor)), None)
    return getattr(_rotary_modules[model], "inv_freq", None)


# Families whose embedding scale is applied outside the embedding module in older code paths.
SCALED_EMBEDDINGS = {"gemma", "gemma2"}

"""Reading a model's config: the text part of multimodal configs, values that may be missing or per layer,
and the sizes the adapters and the page need. A leaf module: it imports nothing from this package but
`said` (inference/wire/said.py, itself a leaf)."""
from __future__ import annotations

from .wire.said import said

NO_CACHE_NOTE = said("this model keeps no KV cache: every step runs the whole sequence again")


class UnsupportedModel(RuntimeError):
    """A model the explainer cannot trace; the message names the architecture and the missing part."""


def text_config(config):
    """The text part of a config (a multimodal config's text_config; a text config itself)."""
    try:
        return config.get_text_config()
    except (AttributeError, ValueError):
        return config


def setting(config, name: str, default=None):
    """A config value, or ``default`` where the config has none or keeps it per layer (it raises then)."""
    try:
        value = getattr(config, name, default)
    except Exception:  # transformers: a per-layer attribute read globally is ambiguous
        return default
    return default if value is None else value


def head_dim_of(config) -> int:
    config = text_config(config)
    heads = setting(config, "num_attention_heads")
    return setting(config, "head_dim") or (setting(config, "hidden_size", 0) // heads if heads else 0)


def partial_rotary_factor(config) -> float:
    """Share of each head's dims that is rotated (Phi: 0.5); transformers 5 keeps it in rope_parameters."""
    params = setting(config, "rope_parameters") or {}
    if isinstance(params, dict) and "partial_rotary_factor" in params:
        return float(params["partial_rotary_factor"])
    return float(setting(config, "partial_rotary_factor") or 1.0)


def rope_theta(config) -> float:
    config = text_config(config)
    params = setting(config, "rope_parameters") or {}
    if isinstance(params, dict) and "rope_theta" in params:
        return float(params["rope_theta"])
    return float(setting(config, "rope_theta") or 10000.0)

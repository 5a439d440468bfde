"""KV-cache size: measured from the live cache tensors, and the formula from a config."""
from __future__ import annotations

import json
from pathlib import Path

import torch
from transformers.cache_utils import DynamicLayer

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "int8": 1, "fp8": 1}
KNOWN_CONFIGS = Path(__file__).resolve().parent / "kv_configs"  # real models' configs, for the calculator


def config_dims(config) -> dict:
    """layers, KV heads and head dim of a transformers config (object or dict)."""
    get = config.get if isinstance(config, dict) else lambda k, d=None: getattr(config, k, d)
    heads = get("num_attention_heads") or get("n_head")
    hidden = get("hidden_size") or get("n_embd")
    return {
        "layers": get("num_hidden_layers") or get("n_layer"),
        "kv_heads": get("num_key_value_heads") or heads,  # KV heads, not query heads (GQA/MQA share them)
        "head_dim": get("head_dim") or hidden // heads,
        "context_window": get("max_position_embeddings") or get("n_positions"),
        "sliding_window": get("sliding_window") if get("use_sliding_window", True) else None,
    }


def kv_formula(config, dtype: str = "float16", tokens: int = 1) -> dict:
    """bytes per token = 2 (K and V) x layers x KV heads x head dim x bytes per element."""
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"dtype must be one of {sorted(DTYPE_BYTES)}, not {dtype!r}")
    if tokens < 0:
        raise ValueError(f"tokens must be >= 0, got {tokens}")
    dims = config_dims(config)
    per_token = 2 * dims["layers"] * dims["kv_heads"] * dims["head_dim"] * DTYPE_BYTES[dtype]
    # transformers' sliding-window layers keep window - 1 keys between forward passes
    cached = min(tokens, dims["sliding_window"] - 1) if dims["sliding_window"] else tokens
    return {**dims, "dtype": dtype, "bytes_per_element": DTYPE_BYTES[dtype], "bytes_per_token": per_token,
            "tokens": tokens, "cached_tokens": cached, "total_bytes": per_token * cached,
            "formula": f"2 x {dims['layers']} layers x {dims['kv_heads']} KV heads x {dims['head_dim']} head dim x "
                       f"{DTYPE_BYTES[dtype]} bytes = {per_token} bytes/token"}


def load_config_json(spec: str) -> dict:
    """A config.json path, a model folder, or ``bundled``."""
    from .loading import resolve_spec

    path = Path(spec)
    if path.is_file():
        return json.loads(path.read_text())
    _, source = resolve_spec(spec)
    config_path = Path(source) / "config.json"
    if not config_path.exists():
        raise FileNotFoundError(f"no config.json for {spec!r}: pass a config.json path or a local model folder")
    return json.loads(config_path.read_text())


def layer_tensors(layer) -> tuple[torch.Tensor | None, list[torch.Tensor]]:
    """A cache layer's keys (None if it keeps none) and every tensor it holds: keys, values, and the
    recurrent or convolution states of linear-attention / state-space layers."""
    keys = getattr(layer, "keys", None)
    if type(layer) is DynamicLayer:  # the common layer, read directly (every visitor's step reads every layer)
        values = layer.values
        if type(keys) is torch.Tensor and type(values) is torch.Tensor and keys.dim() and values.dim():
            return (keys if keys.numel() else None), [keys, values]  # as below, in a third of the time
        held = [t for t in (keys, values) if isinstance(t, torch.Tensor) and t.dim() > 0]
        return (keys if isinstance(keys, torch.Tensor) and keys.numel() else None), held
    public = [v for name, v in vars(layer).items() if not name.startswith("_")]  # not bookkeeping scalars
    held = [v for v in public if isinstance(v, torch.Tensor)]
    held += [t for v in public if isinstance(v, (list, tuple)) for t in v if isinstance(t, torch.Tensor)]
    held = [t for t in held if t.dim() > 0]
    return (keys if isinstance(keys, torch.Tensor) and keys.numel() else None), held


def cache_stats(cache, context_window: int, seen: int | None = None) -> dict:
    """What the live cache holds: the actual bytes of its tensors, layer by layer, read from the cache's
    own layers. ``seen``: positions fed so far, for caches that cannot say (recurrent-only, or none)."""
    layers, total, dtype = [], 0, None
    for layer in getattr(cache, "layers", None) or ():
        keys, held = layer_tensors(layer)
        nbytes = sum(t.nbytes for t in held)
        total += nbytes
        dtype = dtype or (keys.dtype if keys is not None else None)
        layers.append({"shape": list(keys.shape) if keys is not None else [0, 0, 0, 0], "bytes": nbytes})  # (batch, kv_heads, seq, head_dim)
    try:
        # an int, or (transformers 5.25, caches of linear-attention layers) a 0-d tensor
        seq_len = int(cache.get_seq_length()) if cache is not None else seen or 0
    except ValueError:  # transformers: only linear-attention layers, which keep no positions
        seq_len = seen or 0
    stored = max((layer["shape"][2] for layer in layers), default=0)  # < seq_len once a sliding window drops keys
    return {
        "seq_len": seq_len,
        "stored_tokens": stored,
        "bytes": total,
        "bytes_per_token": total // stored if stored else 0,
        "context_window": context_window,
        "context_used": round(seq_len / context_window, 4) if context_window else None,
        "dtype": str(dtype).replace("torch.", "") if dtype is not None and seq_len else None,
        "layers": layers,
    }


def known_configs() -> dict[str, dict]:
    """The shipped configs (OPT-13B, Llama-2-7B, Llama-3-8B, Mistral-7B, a 1M-token Qwen2.5), by file stem."""
    return {p.stem: json.loads(p.read_text()) for p in sorted(KNOWN_CONFIGS.glob("*.json"))}


def kv_table(configs: dict[str, dict], tokens: list[int], dtype: str = "float16") -> list[dict]:
    """The calculator's rows: bytes per token and for each token count, per config."""
    rows = []
    for key, config in configs.items():
        per = kv_formula(config, dtype, 1)
        rows.append({"key": key, "name": config.get("_name", key), "source": config.get("_source"),
                     **{k: per[k] for k in ("layers", "kv_heads", "head_dim", "context_window", "sliding_window",
                                            "bytes_per_token", "formula")},
                     "query_heads": config.get("num_attention_heads") or config.get("n_head"),
                     "totals": [{"tokens": n, "total_bytes": kv_formula(config, dtype, n)["total_bytes"]} for n in tokens]})
    return rows

"""Compact encodings for the payload's large arrays (see docs/protocol.md, "Packed arrays")."""
from __future__ import annotations

import base64
import math

import numpy as np
import torch


class PlainList(list):
    """A list whose numbers are as a browser writes them back (no integral floats: 0, not 0.0), made so by its
    builder: a recording's digest (explainer/services/run/provenance.py) takes it as it is instead of walking its
    ~800 numbers at every step."""
    __slots__ = ()


def packed(array: torch.Tensor | np.ndarray) -> dict:
    """A float array as little-endian float16, base64: {"dtype", "shape", "b64"}."""
    if isinstance(array, torch.Tensor):  # converted by torch: half the time of numpy's on a strided row of a stack
        array = array.detach().to("cpu", torch.float16).contiguous().numpy()
    data = np.ascontiguousarray(array, dtype="<f2")
    return {"dtype": "float16", "shape": list(data.shape), "b64": base64.b64encode(data.tobytes()).decode("ascii")}


def unpack(obj: dict) -> np.ndarray:
    """The inverse of ``packed`` (used by tests and replay tools)."""
    return np.frombuffer(base64.b64decode(obj["b64"]), dtype="<f2").astype(np.float32).reshape(obj["shape"])


def rounded(values, digits: int = 4) -> list:
    """Floats rounded for JSON; non-finite values (masked logits) become None."""
    if isinstance(values, torch.Tensor):
        values = values.tolist()
    if isinstance(values, list):
        return [rounded(v, digits) for v in values]
    return round(values, digits) if math.isfinite(values) else None

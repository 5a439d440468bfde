"""Compact encodings for the payload's large arrays (see docs/protocol.md, "Packed arrays")."""
from __future__ import annotations

import base64
import json
import math

import numpy as np
import torch


class PlainList(list):
    """A list whose numbers are as a browser writes them back (no integral floats: 0, not 0.0), made so by its
    builder: a recording's digest (explainer/services/run/provenance.py) takes it as it is instead of walking its
    ~800 numbers at every step."""
    __slots__ = ()


class Packed(dict):
    """A packed array as ``packed`` makes it: {"dtype", "shape", "b64"}, whose canonical text (wire/canonical.py) is
    written directly: base64 and a dtype's name need no escapes, which json.dumps would look for in every character."""
    __slots__ = ()

    def text(self) -> str | None:
        """Its JSON text with sorted keys and no spaces, as json.dumps writes it; None once it holds what is not so
        written (a shape of floats, say), which the canonical text then walks as any dict."""
        if (self.keys() != {"b64", "dtype", "shape"} or type(self["b64"]) is not str or type(self["dtype"]) is not str
                or not all(type(n) is int for n in self["shape"])):
            return None
        return f'{{"b64":"{self["b64"]}","dtype":{json.dumps(self["dtype"])},"shape":[{",".join(map(str, self["shape"]))}]}}'


def packed(array: torch.Tensor | np.ndarray) -> Packed:
    """A float array as little-endian float16, base64: {"dtype", "shape", "b64"}."""
    if isinstance(array, torch.Tensor):  # converted by torch: half the time of numpy's on a strided row of a stack
        array = array.detach().to("cpu", torch.float16).contiguous().numpy()
    data = np.ascontiguousarray(array, dtype="<f2")
    return Packed(dtype="float16", shape=list(data.shape), b64=base64.b64encode(data.tobytes()).decode("ascii"))


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

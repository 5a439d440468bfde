"""Weight-only quantization experiment: store the Linear weights in 8 or 4 bits, measure the cost.

Why our own ``QuantLinear``: torch 2.13's public CPU path, ``torch.ao.quantization.quantize_dynamic``,
is deprecated (its warning says it moves to torchao, which is not installed here), and it is
*dynamic* quantization (activations are quantized too), not weight-only. torch does ship private
weight-only kernels (``torch._weight_int8pack_mm``, ``torch._weight_int4pack_mm_for_cpu``), but
they are undocumented, underscore-prefixed and tied to a kernel-specific layout. So this module
implements weight-only quantization plainly:

* 8 bits: an int8 weight tensor and one float32 scale per output channel (symmetric:
  ``scale = max|w| / 127``, ``q = round(w / scale)``).
* 4 bits: values in [-7, 7] with one float32 scale per group of 32 inputs, stored as
  ``q + 8`` (0..15), two per byte (a uint8 tensor of half the width).

``forward`` dequantizes the weight on the fly and runs an ordinary float matmul. That is
honest about memory (only the small integers and scales are stored) but it is *not* a fast
kernel: expect decoding to be as fast or slower than float, never faster.
"""
from __future__ import annotations

import copy
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from .wire.said import said

BITS = (4, 8)
GROUP_SIZE = 32


def quantize_int8(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-output-channel symmetric int8: (q (out, in) int8, scale (out,) float32)."""
    w = weight.float()  # (out, in)
    scale = (w.abs().amax(dim=1) / 127).clamp(min=1e-12)  # (out,)
    q = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8)  # (out, in)
    return q, scale


def quantize_int4(weight: torch.Tensor, group_size: int = GROUP_SIZE) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-group symmetric 4-bit, packed: (packed (out, in_padded/2) uint8, scale (out, groups) float32).

    The input dimension is zero-padded to a multiple of ``group_size`` (688 -> 704, say).
    """
    w = weight.float()  # (out, in)
    pad = -w.shape[1] % group_size
    w = F.pad(w, (0, pad))  # (out, in_padded)
    groups = w.view(w.shape[0], -1, group_size)  # (out, groups, group_size)
    scale = (groups.abs().amax(dim=2) / 7).clamp(min=1e-12)  # (out, groups)
    q = torch.round(groups / scale[..., None]).clamp(-7, 7).to(torch.int16) + 8  # (out, groups, group_size) 1..15
    q = q.view(w.shape[0], -1)  # (out, in_padded)
    packed = (q[:, 0::2] | (q[:, 1::2] << 4)).to(torch.uint8)  # (out, in_padded/2) low nibble first
    return packed, scale


def unpack_int4(packed: torch.Tensor, scale: torch.Tensor, in_features: int) -> torch.Tensor:
    """The float weight (out, in) back from ``quantize_int4``'s packed bytes and group scales."""
    low = (packed & 0x0F).to(torch.int16) - 8  # (out, in_padded/2)
    high = (packed >> 4).to(torch.int16) - 8  # (out, in_padded/2)
    q = torch.stack([low, high], dim=2).view(packed.shape[0], -1)  # (out, in_padded)
    groups = q.view(q.shape[0], scale.shape[1], -1).float() * scale[..., None]  # (out, groups, group_size)
    return groups.view(q.shape[0], -1)[:, :in_features]  # (out, in)


class QuantLinear(nn.Module):
    """A Linear whose weight is stored as int8 (or packed int4) + scales, dequantized per call."""

    def __init__(self, linear: nn.Linear, bits: int):
        super().__init__()
        self.in_features, self.out_features, self.bits = linear.in_features, linear.out_features, bits
        with torch.no_grad():
            q, scale = quantize_int8(linear.weight) if bits == 8 else quantize_int4(linear.weight)
        self.register_buffer("qweight", q)
        self.register_buffer("scale", scale)
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone())

    def dequantized_weight(self) -> torch.Tensor:
        if self.bits == 8:
            return self.qweight.float() * self.scale[:, None]  # (out, in)
        return unpack_int4(self.qweight, self.scale, self.in_features)  # (out, in)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.dequantized_weight().to(x.dtype)  # (out, in)
        return F.linear(x, weight, self.bias)  # (..., out)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bits={self.bits}"


def lm_head_is_tied(model) -> bool:
    head, embed = model.get_output_embeddings(), model.get_input_embeddings()
    return head is not None and head.weight.data_ptr() == embed.weight.data_ptr()


def quantize_model(model, bits: int) -> tuple[nn.Module, int, str]:
    """A quantized deep copy of ``model`` (the original is untouched): (copy, layers, lm_head note).

    Every nn.Linear is replaced, except a tied LM head: its weight *is* the embedding table,
    which stays in float, so the head does too.
    """
    if bits not in BITS:
        raise ValueError(f"bits: must be one of {BITS}, got {bits!r}")
    quantized = copy.deepcopy(model)
    tied = lm_head_is_tied(quantized)
    head = quantized.get_output_embeddings()
    targets = [(name, m) for name, m in quantized.named_modules()
               if isinstance(m, nn.Linear) and not (tied and m is head)]
    for name, linear in targets:
        parent_name, _, child = name.rpartition(".")
        setattr(quantized.get_submodule(parent_name), child, QuantLinear(linear, bits))
    note = "float (tied to embeddings)" if tied else f"int{bits}"
    return quantized.eval(), len(targets), note


def weight_bytes(model) -> int:
    """Bytes of every parameter and buffer (a tied weight counted once)."""
    return sum(t.nbytes for t in model.parameters()) + sum(t.nbytes for t in model.buffers())


@torch.inference_mode()
def timed_greedy(model, ids: torch.Tensor, max_new_tokens: int, pad_id: int,
                 repeats: int = 2) -> tuple[list[int], float]:
    """Greedy continuation of ``ids`` (1, T) and decode tokens per second.

    After a short warm-up, the best (fastest) of ``repeats`` runs: on a shared machine the
    slowest runs measure the neighbours, not the model.
    """
    model.generate(ids, max_new_tokens=2, do_sample=False, pad_token_id=pad_id)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        out = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=pad_id)  # (1, T+n)
        if ids.device.type == "cuda":
            torch.cuda.synchronize(ids.device)
        best = min(best, time.perf_counter() - started)
    new = out[0, ids.shape[1]:].tolist()
    return new, len(new) / best


@torch.inference_mode()
def teacher_forced(float_model, quant_model, sequence: torch.Tensor) -> tuple[list[float], float]:
    """Both models over the same sequence (1, L): max |logit diff| at each position, and top-1 agreement."""
    a = float_model(sequence).logits[0].float()  # (L, V)
    b = quant_model(sequence).logits[0].float()  # (L, V)
    agree = (a.argmax(-1) == b.argmax(-1)).float().mean()
    return (a - b).abs().amax(dim=-1).tolist(), float(agree)  # (L,) as a list


def quantize_experiment(loaded, input_ids: list[int], bits: int = 8, max_new_tokens: int = 32, progress=None) -> dict:
    """Weight-only quantize a copy of the loaded model; memory, speed and fidelity against float.

    ``max_abs_logit_diff`` (and, per new token, ``max_abs_logit_diff_per_step``) and ``top1_agreement`` are teacher-forced: both models read the float
    model's greedy sequence (prompt + continuation) and are compared at every position, so one
    early disagreement cannot snowball. ``greedy_tokens_identical`` is the free-running check.
    ``progress(done, total, label)``, if given, is called before each part (the page shows it).
    """
    model, tokenizer = loaded.model, loaded.tokenizer
    report = progress or (lambda done, total, label: None)
    report(0, 4, said("storing a copy of the weights in int%(bits)s", bits=bits))
    quant, layers, head_note = quantize_model(model, bits)
    device = next(model.parameters()).device
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids = torch.tensor([list(input_ids)], device=device)  # (1, T)
    report(1, 4, said("timing the original's decoding"))
    float_tokens, speed_before = timed_greedy(model, ids, max_new_tokens, pad_id)
    report(2, 4, said("timing the int%(bits)s copy's decoding", bits=bits))
    quant_tokens, speed_after = timed_greedy(quant, ids, max_new_tokens, pad_id)
    report(3, 4, said("comparing both models' logits at every position"))
    sequence = torch.tensor([list(input_ids) + float_tokens], device=device)  # (1, L)
    by_position, top1 = teacher_forced(model, quant, sequence)
    max_diff = max(by_position)
    return {"bits": bits, "weight_bytes_before": weight_bytes(model), "weight_bytes_after": weight_bytes(quant),
            "decode_tokens_per_s_before": round(speed_before, 2), "decode_tokens_per_s_after": round(speed_after, 2),
            "decode_speed_ratio": round(speed_after / speed_before, 3), "max_abs_logit_diff": max_diff,
            "top1_agreement": top1, "greedy_tokens_identical": float_tokens == quant_tokens,
            # step k's figure: the position that predicts the k-th new token (what compare.py shows per step)
            "max_abs_logit_diff_per_step": by_position[len(input_ids) - 1:len(input_ids) - 1 + len(float_tokens)],
            "quantized_layers": layers, "lm_head": head_note}

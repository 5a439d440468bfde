"""The kernel under a float32 model's linear layers on an x86 CPU: oneDNN's matmul instead of the BLAS call torch
makes for nn.Linear (MKL's sgemm in the wheels torch ships).

Both libraries come in the same torch wheel. MKL picks its fastest code by the CPU's vendor, not by what the CPU can
do, and on AMD processors its sgemm stays far from the cores' AVX-512 throughput; oneDNN (torch.ops.mkldnn, the
kernels torch.compile uses on CPU) picks by the instruction sets the CPU reports. Measured on SmolLM2-135M's shapes
on a 2-core AMD EPYC, two threads, ms per call:

    rows   LM head (49152 x 576)   MLP up (1536 x 576)   MLP down (576 x 1536)   one decode forward (in-process)
           MKL      oneDNN         MKL      oneDNN       MKL      oneDNN         MKL      oneDNN
    1      6.3      2.3            0.04     0.03         0.04     0.05           37       25
    32     14.8     6.7            0.31     0.16         0.39     0.18           104      62
    256    90.7     44.6           2.23     0.96         2.12     1.01

Exactness: each output row is the same float32 dot products in another order (|diff| ~1e-5 of values ~20), and a
row's result does not depend on the thread count (tests/inference/test_cpu_linear.py), so the thread fit
(inference/cores.py) never changes a run's tokens. Training (autograd on), other dtypes and other devices run
nn.Linear's own forward.
"""
from __future__ import annotations

import contextlib
import os
import platform

import torch
from torch import nn

CHOICES = ("auto", "onednn", "default")  # EXPLAINER_CPU_LINEAR / load_model(cpu_linear=...)
ONEDNN, DEFAULT = "onednn", "default"  # what a model's linear layers run on (ModelDescription.linear_kernel)


class OneDnnLinear(nn.Linear):
    """An nn.Linear whose inference forward on float32 CPU tensors is oneDNN's matmul (same weight and bias)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if (torch.is_grad_enabled() or x.dtype != torch.float32 or self.weight.dtype != torch.float32
                or x.device.type != "cpu" or self.weight.device.type != "cpu" or x.dim() < 2 or x.numel() == 0):
            return super().forward(x)
        return torch.ops.mkldnn._linear_pointwise(x, self.weight, self.bias, "none", [None], "")  # (..., out)


def available() -> bool:
    """This torch has oneDNN's linear and runs on x86 (elsewhere its CPU matmuls are not this library's)."""
    return (platform.machine().lower() in ("x86_64", "amd64") and torch.backends.mkldnn.is_available()
            and hasattr(torch.ops.mkldnn, "_linear_pointwise"))


def resolve(choice: str | None, device: torch.device, dtype: torch.dtype) -> str:
    """The kernel for a model on `device` in `dtype`: `choice` (None: EXPLAINER_CPU_LINEAR, else auto); auto is
    oneDNN for float32 on an x86 CPU that has it, else torch's default."""
    choice = choice or os.environ.get("EXPLAINER_CPU_LINEAR") or "auto"
    if choice not in CHOICES:
        raise ValueError(f"EXPLAINER_CPU_LINEAR (cpu_linear) must be one of {', '.join(CHOICES)}, not {choice!r}")
    fits = device.type == "cpu" and dtype == torch.float32 and available()
    if choice == ONEDNN and not fits:
        raise ValueError(f"cpu_linear 'onednn' needs float32 on an x86 CPU with oneDNN; this model is {dtype} on "
                         f"{device.type} ({platform.machine()}, oneDNN {'present' if available() else 'absent'})")
    return ONEDNN if fits and choice != DEFAULT else DEFAULT


def use_kernel(model: nn.Module, kernel: str) -> None:
    """Set every plain nn.Linear of `model` to run on `kernel` in place (weights, ties and hooks stay as they are).
    Only the class changes: a state dict, a tied LM head and isinstance(m, nn.Linear) see no
    difference."""
    to = OneDnnLinear if kernel == ONEDNN else nn.Linear
    for module in model.modules():
        if type(module) in (nn.Linear, OneDnnLinear):
            module.__class__ = to


def kernel_of(model: nn.Module) -> str:
    """ONEDNN when any linear layer of `model` runs on oneDNN, else DEFAULT."""
    return ONEDNN if any(type(m) is OneDnnLinear for m in model.modules()) else DEFAULT


@contextlib.contextmanager
def running_on(model: nn.Module, kernel: str):
    """`model`'s linear layers on `kernel` inside the block, as they were after it (comparisons, benches)."""
    before = kernel_of(model)
    use_kernel(model, kernel)
    try:
        yield model
    finally:
        use_kernel(model, before)

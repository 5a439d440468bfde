"""What the engine hands the payload builders: typed records of one run's moments, never the session itself.

A record holds the tensors and figures the engine captured and the token texts the message will name
(``texts``: token id -> its piece decoded alone), so the builders (builders.py) read nothing else: no
session, no model, no tokenizer. Tensor shapes are given beside each field.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from inference.forward import ForwardRow
from inference.sampling import SampleResult


@dataclass(frozen=True)
class SessionRecord:
    """A run's description, sent once before its prefill."""
    model: dict  # ModelDescription.to_dict()
    params: dict  # SamplingParams.to_dict()
    prompt_kind: str  # messages | text | input_ids
    lens_layers: list[int]
    keep_budget_bytes: int
    eos_ids: list[int]
    texts: dict[int, str]


@dataclass(frozen=True)
class PromptRecord:
    """The prompt as the model reads it: the template's text, its spans and its tokens."""
    text: str
    source: str  # where the chat template came from, or the prompt kind
    spans: list[dict]  # [{role, start, end, message?}] where each character came from (prompting.render_messages)
    ids: list[int]
    offsets: list  # [start, end) UTF-8 byte range of each token in text
    special_ids: frozenset[int]
    tokenize_ms: float


@dataclass(frozen=True)
class EmbeddingRows:
    table_shape: list[int]  # [vocab_size, hidden_size]
    rows: torch.Tensor  # (P, dims): the first dims of each prompt token's row
    norms: torch.Tensor  # (P,): L2 norm of each full row
    scale: float  # multiplier applied before layer 0 (Gemma: sqrt(hidden))


@dataclass(frozen=True)
class RotaryAngles:
    theta: float
    head_dim: int
    freq_index: list[int]  # which frequency pairs are sent
    inv_freq: list[float]  # radians per position of each sent pair
    angles: torch.Tensor  # (P, len(freq_index)) radians


@dataclass(frozen=True)
class PositionRows:
    scheme: str  # learned | rotary | none
    learned: torch.Tensor | None = None  # (P, dims) learned position vectors (learned only)
    rotary: RotaryAngles | None = None  # (rotary only)


@dataclass(frozen=True)
class PrefillRecord:
    """The prompt's forward pass and what capture read from it."""
    prompt: PromptRecord
    embeddings: EmbeddingRows
    positions: PositionRows
    sliding_window: int | None
    row: ForwardRow  # the pass: attentions, residuals, logits, timing, batch size
    lens: list[dict]  # [{layer, ids, probs}] at the last position
    top: list[tuple[int, float, float]]  # (id, logit, prob) of the final distribution, highest first
    kv: dict  # kvstats.cache_stats
    texts: dict[int, str]
    cached_tokens: int = 0  # prompt positions from the prefix cache
    prefix_cache: dict | None = None  # PrefixStats.to_dict() after this prefill; None: no prefix cache


@dataclass(frozen=True)
class StepTiming:
    sampling_ms: float
    ttft_ms: float
    tokens_per_s: float | None
    elapsed_ms: float  # on the run's clock: paused time left out


@dataclass(frozen=True)
class StepRecord:
    """One decode step: the forward pass it sampled from, the draw and the text it added."""
    step: int  # 1-based
    input_id: int  # the token fed to this forward pass
    position: int  # its position
    row: ForwardRow  # last position only: logits (vocab,), last_hidden (layers + 1, hidden), last_attn (layers, heads, keys)
    lens: list[dict]
    top: list[tuple[int, float, float]]
    draw: SampleResult
    greedy: bool
    forced: bool
    special_ids: frozenset[int]
    text_delta: str
    kv: dict
    timing: StepTiming
    stop_reason: str | None
    texts: dict[int, str]


@dataclass(frozen=True)
class DoneRecord:
    stop_reason: str
    steps: int
    text: str
    token_ids: list[int]
    total_s: float
    ttft_s: float | None


@dataclass(frozen=True)
class RetemperRecord:
    """Where a step's own u lands under other sampling parameters."""
    step: int
    params: dict  # temperature, top_k, top_p, min_p applied
    draw: SampleResult
    texts: dict[int, str] = field(default_factory=dict)

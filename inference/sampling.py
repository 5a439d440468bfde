"""The sampling pipeline: transformers' logits processors, stage by stage, and the dice roll.

Stages run in transformers' order (penalties, then temperature, top-k, top-p, min-p). Each stage is a
real ``LogitsProcessor``; we only record what it left behind, so the diagram shows the very numbers
that picked the token.
"""
from __future__ import annotations

import math
import secrets
from dataclasses import asdict, dataclass, field, fields
from functools import lru_cache

import torch
from transformers import (
    LogitsProcessor,
    MinNewTokensLengthLogitsProcessor,
    MinPLogitsWarper,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from .capture import ranked_topk
from .dice import MAX_SEED, dice_roll, finite_count, ranked, roll
from .greedy import greedy_records, one_hot
from .wire.said import said

STAGE_TOP_N = 10  # candidates recorded after each stage
FRESH_SEEDS = 2**32  # fresh seeds stay short enough to read, type back in, and hold exactly in a JS number
MIN_TEMPERATURE = 0.01  # below it (but above 0) float32 logits / T overflow to inf and sampling breaks
MIN_REPETITION_PENALTY = 0.01  # logits / 1e-39 overflow to inf and every probability becomes NaN
FLOAT_FIELDS = ("temperature", "top_p", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty")


class ParamError(ValueError):
    """A sampling parameter outside its allowed range; names the field."""

    def __init__(self, field_name: str, message: str, code: str = "invalid_param"):
        super().__init__(said("%(field)s: %(problem)s", field=field_name, problem=message))
        self.field, self.message, self.code = field_name, message, code


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0  # [0, 2]; 0 = greedy
    top_k: int = 0  # >= 0; 0 = off
    top_p: float = 1.0  # (0, 1]
    min_p: float = 0.0  # [0, 1]
    repetition_penalty: float = 1.0  # [0.01, 10]; 1 = off (HF: divides positive logits of seen tokens)
    presence_penalty: float = 0.0  # [-2, 2] (OpenAI)
    frequency_penalty: float = 0.0  # [-2, 2] (OpenAI)
    max_new_tokens: int = 64  # >= 1
    min_new_tokens: int = 0  # [0, max_new_tokens]; EOS cannot end the reply before this many tokens (0 = off)
    seed: int = 0  # integer in [0, 2**63 - 1]
    stop: tuple[str, ...] = field(default=())  # up to 4 stop strings, each 1-64 characters

    @classmethod
    def from_dict(cls, data: dict | None, max_new_tokens_cap: int | None = None) -> "SamplingParams":
        data = dict(data or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ParamError(unknown[0], said("unknown parameter; allowed: %(names)s", names=", ".join(sorted(known))),
                             "unknown_param")
        if "stop" in data:
            data["stop"] = _stop_strings(data["stop"])
        if "max_new_tokens" not in data and max_new_tokens_cap is not None:  # the default must not exceed the cap
            data["max_new_tokens"] = min(cls.max_new_tokens, max_new_tokens_cap)
        for name in FLOAT_FIELDS:  # JSON's 2 is an int; transformers' processors insist on floats
            if type(data.get(name)) is int and abs(data[name]) < 2**53:
                data[name] = float(data[name])
        params = cls(**data)
        params.validate(max_new_tokens_cap)
        return params

    def validate(self, max_new_tokens_cap: int | None = None) -> None:
        _number("temperature", self.temperature, 0.0, 2.0)
        if 0 < self.temperature < MIN_TEMPERATURE:
            raise ParamError("temperature", said("must be 0 (greedy) or in [%(low)s, 2], got %(got)s", low=MIN_TEMPERATURE,
                                                 got=self.temperature), "out_of_range")
        _integer("top_k", self.top_k, 0, None)
        _number("top_p", self.top_p, 0.0, 1.0, low_open=True)
        _number("min_p", self.min_p, 0.0, 1.0)
        _number("repetition_penalty", self.repetition_penalty, MIN_REPETITION_PENALTY, 10.0)
        _number("presence_penalty", self.presence_penalty, -2.0, 2.0)
        _number("frequency_penalty", self.frequency_penalty, -2.0, 2.0)
        _integer("max_new_tokens", self.max_new_tokens, 1, max_new_tokens_cap)
        _integer("min_new_tokens", self.min_new_tokens, 0, self.max_new_tokens)
        _integer("seed", self.seed, 0, MAX_SEED)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def to_dict(self) -> dict:
        return {**asdict(self), "stop": list(self.stop)}


def with_fresh_seed(params: dict) -> dict:
    """A start's params with a fresh random seed where none was given (or it was null), so visitors at the same
    temperature do not all draw the same reply; a given seed is kept, and reproduces its run."""
    if params.get("seed") is not None:
        return params
    return {**params, "seed": secrets.randbelow(FRESH_SEEDS)}


def _number(name: str, value, low: float, high: float, low_open: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ParamError(name, said("must be a number, not %(kind)s", kind=type(value).__name__), "wrong_type")
    if (isinstance(value, float) and not math.isfinite(value)) or value > high or value < low or (low_open and value == low):
        bounds = dict(low=_short(low), high=_short(high), got=value)
        raise ParamError(name, said("must be in (%(low)s, %(high)s], got %(got)s", **bounds) if low_open
                         else said("must be in [%(low)s, %(high)s], got %(got)s", **bounds), "out_of_range")


def _integer(name: str, value, low: int, high: int | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ParamError(name, said("must be an integer, not %(kind)s", kind=type(value).__name__), "wrong_type")
    if value < low or (high is not None and value > high):
        raise ParamError(name, said("must be [%(low)s, %(high)s], got %(got)s", low=low, high=high, got=value)
                         if high is not None else said("must be >= %(low)s, got %(got)s", low=low, got=value), "out_of_range")


def _short(bound: float) -> float | int:
    """A bound as people write it: 2, not 2.0."""
    return int(bound) if float(bound).is_integer() else bound


def _stop_strings(value) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or len(value) > 4:
        raise ParamError("stop", said("must be a list of at most 4 strings"), "wrong_type")
    for item in value:
        if not isinstance(item, str) or not 1 <= len(item) <= 64:
            raise ParamError("stop", said("each stop string must be 1 to 64 characters"), "out_of_range")
        try:
            item.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate ("\\ud800" in JSON) can never appear in decoded text
            raise ParamError("stop", said("stop strings must be valid Unicode (no lone surrogates)"), "invalid_value") from None
    return tuple(value)


class PresencePenaltyLogitsProcessor(LogitsProcessor):
    """OpenAI's presence penalty: logit - presence * [count > 0], counted over generated tokens."""

    def __init__(self, penalty: float, prompt_length: int):
        self.penalty, self.prompt_length = penalty, prompt_length

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        counts = generated_counts(input_ids, self.prompt_length, scores.shape[-1])  # (batch, vocab)
        return scores - self.penalty * (counts > 0).to(scores.dtype)


class FrequencyPenaltyLogitsProcessor(LogitsProcessor):
    """OpenAI's frequency penalty: logit - frequency * count, counted over generated tokens."""

    def __init__(self, penalty: float, prompt_length: int):
        self.penalty, self.prompt_length = penalty, prompt_length

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        counts = generated_counts(input_ids, self.prompt_length, scores.shape[-1])  # (batch, vocab)
        return scores - self.penalty * counts.to(scores.dtype)


class ZeroTemperatureLimit(LogitsProcessor):
    """Temperature 0 as the limit of T -> 0: softmax(logits / T) tends to 1 on the argmax and 0 elsewhere.

    transformers' TemperatureLogitsWarper refuses 0 (greedy decoding skips the warpers), so without this stage
    a greedy step would show the untempered softmax (T = 1) while taking the argmax."""

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        keep = torch.zeros_like(scores, dtype=torch.bool).scatter_(-1, scores.argmax(-1, keepdim=True), True)
        return scores.masked_fill(~keep, -math.inf)


def generated_counts(input_ids: torch.LongTensor, prompt_length: int, vocab_size: int) -> torch.Tensor:
    generated = input_ids[:, prompt_length:]  # (batch, generated)
    counts = torch.zeros(input_ids.shape[0], vocab_size, dtype=torch.long, device=input_ids.device)
    return counts.scatter_add_(1, generated, torch.ones_like(generated))


def build_stages(params: SamplingParams, prompt_length: int) -> list[tuple[str, LogitsProcessor | None]]:
    """Every stage in transformers' order; None where the parameter leaves logits unchanged."""
    sampling = not params.greedy
    return [
        ("repetition_penalty", RepetitionPenaltyLogitsProcessor(params.repetition_penalty) if params.repetition_penalty != 1.0 else None),
        ("presence_penalty", PresencePenaltyLogitsProcessor(params.presence_penalty, prompt_length) if params.presence_penalty else None),
        ("frequency_penalty", FrequencyPenaltyLogitsProcessor(params.frequency_penalty, prompt_length) if params.frequency_penalty else None),
        ("temperature", temperature_stage(params)),
        ("top_k", TopKLogitsWarper(params.top_k) if sampling and params.top_k else None),
        ("top_p", TopPLogitsWarper(params.top_p) if sampling and params.top_p < 1.0 else None),
        ("min_p", MinPLogitsWarper(params.min_p) if sampling and params.min_p > 0 else None),
    ]


def temperature_stage(params: SamplingParams) -> LogitsProcessor | None:
    if params.greedy:
        return ZeroTemperatureLimit()
    return TemperatureLogitsWarper(params.temperature) if params.temperature != 1.0 else None


@dataclass
class SampleResult:
    token_id: int
    prob: float  # the chosen token's probability in the final distribution
    stages: list[dict]  # one per stage: name, applied, survivors, top [{id, value}]
    probs_top: list[tuple[int, float]]  # the final distribution's most likely tokens
    draw: dict | None  # the dice roll: u, rank it landed on, cumulative mass around it; None when greedy
    final: torch.Tensor | None = field(default=None, repr=False)  # (vocab,) the final distribution (compare.py)


def stage_record(name: str, applied: bool, scores: torch.Tensor, top_n: int = STAGE_TOP_N) -> dict:
    survivors = finite_count(scores[0])
    values, ids = ranked(scores[0], top_n, survivors)
    return {"name": name, "applied": applied, "survivors": survivors,
            "top": [{"id": i, "value": round(v, 4) if math.isfinite(v) else None} for v, i in zip(values, ids)]}


def run_stages(input_ids: torch.LongTensor, logits: torch.Tensor, params: SamplingParams,
               prompt_length: int) -> tuple[torch.Tensor, list[dict]]:
    """Apply every stage to one position's logits; (final scores (1, vocab), stage records)."""
    scores = logits.float().reshape(1, -1)  # (1, vocab)
    ids = input_ids.reshape(1, -1).to(scores.device)  # (1, seq)
    records = []
    for name, processor in build_stages(params, prompt_length):
        if processor is not None:
            scores = processor(ids, scores)
            records.append(stage_record(name, True, scores))
        else:  # unchanged scores: same survivors and top as the stage before
            records.append({**records[-1], "name": name, "applied": False} if records else stage_record(name, False, scores))
    return scores, records


class MinNewTokens(MinNewTokensLengthLogitsProcessor):
    """transformers' MinNewTokensLengthLogitsProcessor, its EOS mask made once per vocabulary and device: it builds
    one at every call (an arange and an isin over SmolLM2's 49,152 ids, 40% of a greedy step's sampling)."""

    def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor) -> torch.Tensor:
        if input_ids.shape[-1] - self.prompt_length_to_skip >= self.min_new_tokens:
            return scores.clone()  # as transformers returns it
        mask = eos_mask(scores.shape[-1], tuple(self.eos_token_id.tolist()), str(scores.device))  # (vocab,)
        return scores.masked_fill(mask, -math.inf)


@lru_cache(maxsize=16)
def eos_mask(vocab_size: int, eos_ids: tuple[int, ...], device: str) -> torch.Tensor:
    """(vocab,) True at the EOS ids (read it, never write into it; made outside inference mode)."""
    with torch.inference_mode(False):
        return torch.isin(torch.arange(vocab_size, device=device), torch.tensor(eos_ids, device=device))


def suppress_early_eos(input_ids: torch.LongTensor, logits: torch.Tensor, params: SamplingParams,
                       prompt_length: int, eos_ids) -> torch.Tensor:
    """EOS ids at -inf until min_new_tokens are generated (MinNewTokens)."""
    if not params.min_new_tokens or not eos_ids:
        return logits
    processor = MinNewTokens(prompt_length, params.min_new_tokens, sorted(eos_ids), device=logits.device)
    scores = logits.float().reshape(1, -1)  # (1, vocab)
    return processor(input_ids.reshape(1, -1).to(scores.device), scores).reshape(logits.shape)


def sample_token(input_ids: torch.LongTensor, logits: torch.Tensor, params: SamplingParams,
                 prompt_length: int, step: int, top_n: int = STAGE_TOP_N, forced: int | None = None,
                 eos_ids=(), ranking: list | None = None) -> SampleResult:
    """Run the stages, softmax, and either take the argmax (temperature 0) or roll the dice (inference/dice.py).

    ``forced`` (a fork) replaces the chosen token; its probability is read from the same final distribution.
    ``eos_ids``: the tokens that end the reply, held off until ``params.min_new_tokens`` are generated.
    ``ranking``: the raw logits' top [(id, logit, prob)] (capture.top_tokens), from which a greedy step reads its
    records without running the stages (inference/greedy.py).
    """
    stages = build_stages(params, prompt_length)
    if params.greedy and ranking is not None and all(p is None or isinstance(p, ZeroTemperatureLimit) for _, p in stages):
        held_off = set(eos_ids) if params.min_new_tokens and input_ids.shape[-1] - prompt_length < params.min_new_tokens else set()
        read = greedy_records([(name, p is not None) for name, p in stages], ranking, logits,
                              {i for i in held_off if 0 <= i < logits.shape[-1]}, top_n)
        if read is not None:
            return _one_hot_result(*read, logits.float(), top_n, forced)
    logits = suppress_early_eos(input_ids, logits, params, prompt_length, eos_ids)
    scores, records = run_stages(input_ids, logits, params, prompt_length)
    survivors = records[-1]["survivors"]
    if params.greedy and survivors == 1:  # greedy's limit left one token
        return _one_hot_result(int(scores[0].argmax()), records, scores[0], top_n, forced)
    probs = torch.softmax(scores[0], dim=-1)  # (vocab,)
    if params.greedy:  # no finite logit (a broken model): what softmax and the ranking make of it
        top_probs, top_ids = ranked_topk(probs, top_n)  # ties in id order: the first is argmax's own pick
        token, draw, top = int(top_ids[0]), None, [(i, round(p, 6)) for i, p in zip(top_ids.tolist(), top_probs.tolist())]
    else:
        u = dice_roll(params.seed, step)
        landed = roll(probs, scores[0], survivors, u, top_n)
        token, top = landed.token, [(i, round(p, 6)) for i, p in zip(landed.top_ids, landed.top_probs)]
        draw = {"u": round(u, 6), "rank": landed.rank, "cumulative_before": round(landed.before, 6),
                "cumulative_after": round(landed.after, 6)}
    token = token if forced is None else forced
    return SampleResult(token, float(probs[token]), records, top, draw, probs)


def _one_hot_result(token: int, records: list[dict], like: torch.Tensor, top_n: int, forced: int | None) -> SampleResult:
    probs, top = one_hot(token, like, top_n)
    chosen = token if forced is None else forced
    return SampleResult(chosen, float(probs[chosen]), records, top, None, probs)

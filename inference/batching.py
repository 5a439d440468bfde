"""Batching experiment: the visitor's prompt decoded alone, then together with other prompts.

A server rarely runs one prompt at a time: it stacks several requests into one batch, which
multiplies throughput (one pass over the weights serves every row). The price is that the
visitor's row is no longer computed exactly as it would be alone: rows of different lengths are
left-padded, and the matrix kernels may split and order their sums differently for a different
batch shape. Floating-point addition is not associative, so the visitor's logits can move in
the last bits, and, when two candidates are nearly tied, a greedy token can flip.

``batch_experiment`` measures both sides: tokens per second per batch size, and how far row 0's
logits and greedy tokens drift from a batch-size-1 reference. It reports what it measured: on
CPU float32 the drift is often exactly 0.
"""
from __future__ import annotations

import random
import time

import torch

from .prompting import build_prompt
from .wire.said import said

# Other "visitors" sharing the batch: fixed, of different lengths, rendered with the chat template.
FILLER_PROMPTS = (
    "What does bank mean?",
    "Explain photosynthesis simply.",
    "Hi!",
    "Why is the sky blue? Answer in one short sentence for a child.",
    "Name three fruits.",
    "How do vaccines teach the body to fight an infection, and why do some need a booster later?",
    "What is a mole in chemistry?",
    "Tell me a story about a dog.",
)


def filler_rows(tokenizer, count: int, seed: int) -> list[list[int]]:
    """``count`` filler prompts as token ids, in an order fixed by ``seed``."""
    order = list(range(len(FILLER_PROMPTS)))
    random.Random(seed).shuffle(order)
    rows = []
    for i in range(count):
        content = FILLER_PROMPTS[order[i % len(order)]]
        rows.append(build_prompt(tokenizer, messages=[{"role": "user", "content": content}]).ids)
    return rows


def left_pad(rows: list[list[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack rows to the longest one, padding on the left so every row ends at the last column."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)  # (B, T)
    mask = torch.zeros((len(rows), width), dtype=torch.long)  # (B, T) 1 = real token
    for b, row in enumerate(rows):
        ids[b, width - len(row):] = torch.tensor(row)
        mask[b, width - len(row):] = 1
    return ids.to(device), mask.to(device)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@torch.inference_mode()
def decode_batch(loaded, rows: list[list[int]], max_new_tokens: int) -> dict:
    """Greedy-decode the rows together; row 0's tokens (up to its end-of-sequence) and logits."""
    model, tokenizer = loaded.model, loaded.tokenizer
    device = next(model.parameters()).device
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids, mask = left_pad(rows, pad_id, device)  # (B, T), (B, T)
    _sync(device)
    started = time.perf_counter()
    out = model.generate(ids, attention_mask=mask, max_new_tokens=max_new_tokens, do_sample=False,
                         pad_token_id=pad_id, output_logits=True, return_dict_in_generate=True)
    _sync(device)
    seconds = time.perf_counter() - started
    new = out.sequences[:, ids.shape[1]:]  # (B, steps)
    tokens = new[0].tolist()
    eos = _eos_ids(model)
    end = next((i + 1 for i, t in enumerate(tokens) if t in eos), len(tokens))
    logits = torch.stack([step[0] for step in out.logits[:end]]).float().cpu()  # (steps, V) row 0
    return {"tokens": tokens[:end], "logits": logits, "seconds": seconds, "steps": new.shape[1],
            "padding_tokens": int((mask == 0).sum())}


def _eos_ids(model) -> set[int]:
    eos = model.generation_config.eos_token_id
    return set() if eos is None else set(eos if isinstance(eos, list) else [eos])


def compare_rows(reference: dict, run: dict) -> dict:
    """Row 0 of ``run`` against the batch-size-1 ``reference``.

    ``flipped_tokens`` counts positions where the greedy tokens differ, ``first_flip`` is the
    first of them (None when none). ``max_abs_logit_diff`` is the largest |logit difference| over
    the steps whose context is still identical: steps 0..first_flip inclusive (the flip step's
    logits are computed from the same tokens; they are what decided the different choice). After
    a flip the two rows continue from different text, so their logits are no longer comparable.
    """
    a, b = reference["tokens"], run["tokens"]
    common = min(len(a), len(b))  # sequences that agree everywhere also end at the same eos
    flips = [i for i in range(common) if a[i] != b[i]]
    first = flips[0] if flips else None
    last = common if first is None else first + 1
    diff = (reference["logits"][:last] - run["logits"][:last]).abs()  # (last, V)
    return {"max_abs_logit_diff": float(diff.max()) if last else 0.0,
            "flipped_tokens": len(flips), "first_flip": first}


def batch_experiment(loaded, input_ids: list[int], batch_sizes=(1, 2, 4, 8), max_new_tokens: int = 32,
                     seed: int = 0, progress=None) -> dict:
    """Decode the visitor's prompt in batches of each size; throughput and drift of row 0.

    Row 0 is always the visitor's prompt; the other B-1 rows are filler prompts (``FILLER_PROMPTS``,
    order fixed by ``seed``), left-padded with the pad token. A first, untimed batch-size-1 run is
    the reference (it also warms up): the batch-size-1 run in ``runs`` is compared with it like
    every other run, so it shows run-to-run determinism. ``tokens_per_s`` counts every row:
    B x decode steps / seconds. ``padding_tokens`` is the number of pad positions in the batch's
    prompt block (0 when every row has the same length). ``progress(done, total, label)``, if given, is
    called before each decode (the page shows it).
    """
    if not batch_sizes or any(not isinstance(s, int) or s < 1 for s in batch_sizes):
        raise ValueError(f"batch_sizes: must be positive integers, got {batch_sizes!r}")
    torch.manual_seed(seed)
    fillers = filler_rows(loaded.tokenizer, max(batch_sizes) - 1, seed)
    report = progress or (lambda done, total, label: None)
    report(0, len(batch_sizes) + 1, said("the reference: your prompt alone"))
    reference = decode_batch(loaded, [list(input_ids)], max_new_tokens)
    runs = []
    for i, size in enumerate(batch_sizes):
        report(i + 1, len(batch_sizes) + 1, said("batch size %(size)s of %(most)s", size=size, most=max(batch_sizes)))
        result = decode_batch(loaded, [list(input_ids)] + fillers[: size - 1], max_new_tokens)
        runs.append({"batch_size": size,
                     "tokens_per_s": round(size * result["steps"] / result["seconds"], 2),
                     "seconds": round(result["seconds"], 4),
                     **compare_rows(reference, result),
                     "padding_tokens": result["padding_tokens"],
                     "tokens": result["tokens"]})
    base = next((r["tokens_per_s"] for r in runs if r["batch_size"] == 1), None)
    ratios = {r["batch_size"]: round(r["tokens_per_s"] / base, 3) for r in runs} if base else {}
    return {"model": loaded.description.name, "prompt_tokens": len(input_ids),
            "max_new_tokens": max_new_tokens, "reference_tokens": reference["tokens"],
            "runs": runs, "throughput_ratio": ratios}

"""What a language costs (issue 28): the same meaning in several languages, read by the served model's tokenizer.

Per line: the tokens it takes, characters per token, the tokens whose piece alone is not whole text (a byte-level
tokenizer splits a character's UTF-8 bytes over several tokens: the streamer holds them back until the character
is complete), the KV cache those tokens hold on this model, and, measured on request, the prefill's time. Ratios
are to the first line (English by default).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from .forward import synchronize
from .kvstats import kv_formula
from .wire.said import said

MAX_LINES, MAX_CHARS = 8, 400
REPEATS = 3  # timed prefills per line (the median is reported)


@dataclass
class Line:
    lang: str  # a BCP 47 tag: the page marks the line's language and direction with it
    name: str  # the language's name, as the page shows it
    text: str


SENTENCES = [  # one meaning: the article's own prompt
    Line("en", "English", "The mole on my face may need a biopsy. Explain this simply."),
    Line("fr", "French", "Le grain de beauté sur mon visage devra peut-être faire l'objet d'une biopsie. Explique-le simplement."),
    Line("es", "Spanish", "Puede que el lunar de mi cara necesite una biopsia. Explícalo de forma sencilla."),
    Line("zh", "Chinese", "我脸上的痣可能需要做活检。请简单地解释一下。"),
    Line("ja", "Japanese", "顔のほくろは生検が必要かもしれません。簡単に説明してください。"),
    Line("ar", "Arabic", "قد تحتاج الشامة على وجهي إلى خزعة. اشرح ذلك ببساطة."),
]


def _dtype_name(model) -> str:
    return str(next(model.parameters()).dtype).replace("torch.", "")


def line_cost(tokenizer, text: str) -> dict:
    """One line as the model reads it: its tokens (id and piece), and which pieces are not whole text alone."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    pieces = [tokenizer.decode([i]) for i in ids]
    partial = [n for n, piece in enumerate(pieces) if "\ufffd" in piece]  # bytes of a character split over tokens
    return {"tokens": len(ids), "chars": len(text), "utf8_bytes": len(text.encode("utf-8")),
            "chars_per_token": round(len(text) / len(ids), 3) if ids else None,
            "partial_tokens": len(partial), "ids": ids, "pieces": pieces, "partial": partial}


def language_costs(loaded, lines: list[Line]) -> dict:
    """Every line's cost on this model (no model run): tokens, characters per token, split characters, KV bytes."""
    kv = kv_formula(loaded.model.config, _dtype_name(loaded.model))
    rows = [{"lang": line.lang, "name": line.name, "text": line.text, **line_cost(loaded.tokenizer, line.text)}
            for line in lines]
    base = rows[0]["tokens"] or None
    for row in rows:
        row["kv_bytes"] = kv["bytes_per_token"] * row["tokens"]
        row["tokens_vs_first"] = round(row["tokens"] / base, 3) if base else None
    return {"rows": rows, "kv_bytes_per_token": kv["bytes_per_token"], "kv_dtype": kv["dtype"],
            "kv_formula": kv["formula"], "first": rows[0]["name"]}


@torch.no_grad()
def prefill_ms(loaded, ids: list[int], repeats: int = REPEATS) -> float:
    """The median time of a prefill over exactly these ids, with a fresh cache each time."""
    model = loaded.model
    input_ids = torch.tensor([ids], device=model.device)  # (1, T)
    times = []
    for _ in range(repeats):
        cache = DynamicCache(config=model.config)
        start = time.perf_counter()
        model(input_ids=input_ids, cache=cache, use_cache=True, logits_to_keep=1)
        synchronize(model.device)
        times.append((time.perf_counter() - start) * 1e3)
    return round(sorted(times)[len(times) // 2], 3)


def language_prefills(loaded, lines: list[Line], progress=None) -> dict:
    """The costs, and each line's prefill timed on this server (ratios to the first line's time too)."""
    costs = language_costs(loaded, lines)
    if costs["rows"][0]["ids"]:
        prefill_ms(loaded, costs["rows"][0]["ids"], repeats=1)  # warm-up: the first pass pays for allocations
    for n, row in enumerate(costs["rows"]):
        if progress:
            progress(n, len(costs["rows"]), said("prefill of the %(name)s line", name=row["name"]))  # the name as sent: data
        row["prefill_ms"] = prefill_ms(loaded, row["ids"]) if row["ids"] else None
    first = costs["rows"][0]["prefill_ms"]
    for row in costs["rows"]:
        row["prefill_vs_first"] = round(row["prefill_ms"] / first, 3) if first and row["prefill_ms"] else None
    return {**costs, "repeats": REPEATS}

"""The payload schema: every message of a run, defined once and versioned.

``docs/protocol.md`` carries the tables that ``schema_markdown()`` prints (a test keeps them in step),
and ``validate_payload`` checks that what the builders emit has every field named here.
A rule is (type, meaning) or (type, meaning, default). Types: int, float, str, bool, list, object, packed
(see "Packed arrays"), any; a trailing ? means null is allowed. A field added after recordings were made gets
a default: recordings without it are filled in on reading (upgrades.with_defaults), with no version bump.
SCHEMA_VERSION changes only when a field is renamed or removed (with an upgrade in upgrades.py).
"""
from __future__ import annotations

from .said import said

SCHEMA_VERSION = 3

_TOKEN = {"id": ("int", "token id"), "text": ("str", "the piece decoded alone"),
          "special": ("bool", "a special token (role marker, end of message, BOS)")}
_TIMING = {"forward_ms": ("float", "the model's forward pass"), "capture_ms": ("float", "summarising attentions, hidden states, logit lens"),
           "sampling_ms": ("float", "logits processors, softmax and the draw"), "ttft_ms": ("float?", "time to first token (prefill + first sampling) of this run"),
           "tokens_per_s": ("float?", "decode tokens per second so far")}
_KV = {"seq_len": ("int", "positions the cache has seen"), "stored_tokens": ("int", "positions whose keys it still holds (fewer once a sliding window drops old keys)"), "bytes": ("int", "sum of nbytes of every cached key and value tensor"),
       "bytes_per_token": ("int", "bytes / stored_tokens"), "context_window": ("int", "the model's maximum positions"),
       "context_used": ("float?", "seq_len / context_window"), "dtype": ("str?", "cache tensor dtype"),
       "layers": ("list", "per layer {shape: [batch, kv_heads, seq, head_dim], bytes}")}
_LENS = ("list", "per read layer {layer, ids[5], probs[5], texts[5]}: the residual after layer `layer` (0-based; hidden_norms row layer + 1) through the final norm and LM head, at the last position")
_LOGITS = {"top": ("list", "[{id, text, logit, prob}] sorted by raw logit, highest first (prob: softmax of raw logits)"),
           "vocab_size": ("int", "size of the distribution")}

SCHEMA: dict[str, dict] = {
    "session": {
        "type": ("str", "\"session\""), "schema_version": ("int", "payload schema version"),
        "model": ("object", "the model description: spec, name, family, layers, query_heads, kv_heads, head_dim, hidden_size, vocab_size, context_window, parameters, dtype, device, tied_lm_head, position_scheme, sliding_window, chat_template_source, attn_implementation, linear_kernel (onednn / default: what its linear layers run on)"),
        "params": ("object", "the validated sampling parameters"),
        "prompt_kind": ("str", "messages | text | input_ids"),
        "capture": ("object", "what is captured: lens_layers (read by default), keep_budget_bytes"),
        "eos": ("list", "[{id, text}] tokens that end the reply"),
    },
    "prefill": {
        "type": ("str", "\"prefill\""), "schema_version": ("int", ""),
        "template": {"text": ("str", "what the model reads"), "source": ("str", "where the chat template came from"),
                     "spans": ("list", "[{role, start, end, message?}] where each character of text came from: system, user or assistant (a typed message's turn; message: its index), template (added by the template on its own: a default system prompt, a date line), generation_prompt, text or input_ids")},
        "tokens": ("list", "[{id, text, bytes: [start, end), special}] one per prompt token; bytes index template.text as UTF-8"),
        "embeddings": {"shape": ("list", "[vocab_size, hidden_size] of the embedding table"),
                       "slice": ("packed", "(tokens, dims) the first dims of each token's row"),
                       "norms": ("packed", "(tokens,) L2 norm of each full row"),
                       "scale": ("float", "multiplier applied to rows before layer 0 (Gemma: sqrt(hidden))")},
        "positions": {"scheme": ("str", "learned | rotary"),
                      "learned": ("packed?", "(tokens, dims) slice of the learned position vectors (learned only)"),
                      "rotary": ("object?", "{theta, head_dim, freq_index[], inv_freq[] (radians per position of each sent pair), angles: packed (tokens, len(freq_index)) radians} (rotary only)")},
        "mask": {"kind": ("str", "causal"), "size": ("int", "prompt tokens"),
                 "sliding_window": ("int?", "query i sees key j only when 0 <= i - j < sliding_window")},
        "attention": {"mode": ("str", "full | summary"), "layers": ("int", ""), "heads": ("int", ""),
                      "full": ("packed?", "(layers, heads, tokens, tokens) weights (mode full)"),
                      "blocks": ("packed?", "(layers, heads, B, B) block-averaged weights (mode summary)"),
                      "block_edges": ("list?", "B + 1 token indices: block b covers tokens [edges[b], edges[b+1]) (mode summary)"),
                      "last_row": ("packed", "(layers, tokens) the last position's weights averaged over heads"),
                      "top_keys": ("list", "[layer][head][k] strongest keys of the last position"),
                      "top_weights": ("list", "[layer][head][k] their weights"),
                      "default": ("object?", "{layer, head (from 0), rule, first_token_weight, full}: the head drawn first, chosen from every head by `rule` (least mean weight on the first token from the queries after it; ties: the first); full: packed (tokens, tokens) its weights when mode is summary and tokens <= 64, else null", None)},
        "hidden_norms": ("packed", "(layers + 1, tokens) L2 norm of the residual stream: row 0 is layer 0's input, row i the output of layer i"),
        "lens": _LENS,
        "logits": _LOGITS,
        "kv": _KV,
        "timing": {"forward_ms": ("float", "the prefill forward pass"), "capture_ms": ("float", ""), "tokenize_ms": ("float", "template + tokenizer")},
        "batch_size": ("int", "sessions whose prompts shared this prefill's forward pass (1: alone)"),
        "cached_tokens": ("int", "prompt tokens taken from the prefix cache (their keys, values and captured rows computed once, by an earlier prefill); the forward pass computed the rest", 0),
        "prefix_cache": ("object?", "the server's prefix cache on this model after this prefill: {entries, bytes, budget_bytes, lookups, hits, hit_rate, tokens_looked_up, tokens_saved, evicted_tokens} since the process started; null: off", None),
    },
    "step": {
        "type": ("str", "\"step\""), "schema_version": ("int", ""),
        "step": ("int", "1-based decode step; step 1 samples from the prefill's last position"),
        "input": {"id": ("int", "token fed to this forward pass"), "text": ("str", ""), "position": ("int", "its position")},
        "forward": ("str", "prefill (step 1 reuses the prefill's last position) | decode"),
        "batch_size": ("int", "sessions whose decode shared this step's forward pass (1: alone, and step 1)"),
        "attention": {"mode": ("str", "heads | mean"), "keys": ("int", "cached keys the new query attends to"),
                      "mean": ("packed", "(layers, keys) weights averaged over heads"),
                      "heads": ("packed?", "(layers, heads, keys) every head's row (mode heads)"),
                      "top_keys": ("list?", "[layer][head][k] strongest keys per head (mode mean, listed in place of the rows; null in mode heads, where they are the rows' own top)"),
                      "top_weights": ("list?", "[layer][head][k] their weights (mode mean; null in mode heads)")},
        "hidden_norms": ("list", "(layers + 1) L2 norm of the residual at this position"),
        "lens": _LENS,
        "logits": _LOGITS,
        "stages": ("list", "[{name, applied, survivors, top: [{id, value}]}] in order repetition_penalty, presence_penalty, frequency_penalty, temperature, top_k, top_p, min_p; value = the logit after the stage (null = removed)"),
        "probs": ("list", "[{id, text, prob}] the final distribution's most likely tokens"),
        "draw": ("object?", "{u, rank, cumulative_before, cumulative_after}: where u in [0,1) landed on the cumulative distribution sorted by probability; null when greedy"),
        "greedy": ("bool", "temperature 0: argmax"),
        "forced": ("bool", "the token was chosen by a fork, not sampled"),
        "token": {**_TOKEN, "prob": ("float", "its probability in the final distribution")},
        "text_delta": ("str", "newly complete text (incomplete UTF-8 held back)"),
        "kv": _KV,
        "timing": _TIMING,
        "stop_reason": ("str?", "eos | stop_string | max_new_tokens | context_window | stopped, on the last step"),
    },
    "done": {
        "type": ("str", "\"done\""), "schema_version": ("int", ""),
        "stop_reason": ("str", "eos | stop_string | max_new_tokens | context_window | stopped"),
        "steps": ("int", "decode steps taken"), "text": ("str", "the whole reply"),
        "token_ids": ("list", "generated ids"), "timing": {"ttft_ms": ("float?", ""), "total_ms": ("float", ""),
                                                         "tokens_per_s": ("float?", ""), "tpot_ms": ("float?", "(total - ttft) / (n - 1)")},
    },
    "detail": {
        "type": ("str", "\"detail\""), "schema_version": ("int", ""), "what": ("str", "attention | hidden | embedding | lens"),
        "step": ("int?", "0 = prefill"), "layer": ("int?", ""), "head": ("int?", ""), "position": ("int?", ""),
        "data": ("packed", "the full matrix or vector"),
        "lens": ("list?", "for what=lens: every layer"),
    },
    "check": {
        "type": ("str", "\"check\""), "schema_version": ("int", ""),
        "name": ("str", "causal_mask | weights_unchanged | embedding_rows_unchanged"),
        "passed": ("bool", "whether the claim held on this run"),
        "data": ("object", "what was measured. causal_mask: {change_at, original: {id, text}, replacement: {id, text}, max_abs_change: [per position], earlier_unchanged, measured_ms (its device calls and the decode ticks between them: it runs after the first token), reused (true: the same prompt was checked lately on this model, so its result is sent without running again), from_prefix_cache (present when the run's prefill began in the prefix cache: both passes continued from those first positions' cached keys and values, as the run did, so only the later positions were computed; they come before change_at)}; weights_unchanged: {checksum_before, checksum_after, abs_sum_before, abs_sum_after, parameters} (float64 sums of every parameter, at load and after the run); embedding_rows_unchanged: {rows: [{position, id, norm_before, norm_after}], max_abs_change}"),
    },
    "serving": {
        "type": ("str", "\"serving\""), "schema_version": ("int", ""),
        "what": ("str", "prefill_decode | kv | capacity | batch | speculative | quantize | prefix | languages | languages_prefill"),
        "prompt": ("str?", "article | yours | none: whose prompt it ran on (the request's `prompt`; by default yours once you have run one); none: kv and capacity are arithmetic, prefill_decode times random tokens"),
        "measured_at": ("str?", "UTC ISO time it was measured (experiments only; kv and capacity are computed each time)"),
        "cached": ("bool?", "true: measured earlier on this server and model (see measured_at), sent at once"),
        "data": ("object", "measured on this server. prefill_decode: inference.serving.prefill_decode (rows [{prompt_tokens, prefill_ms, decode_ms}], parameters, weight_bytes, kv_bytes_per_token, flops_per_token, decode_intensity, prefill_intensity{P}, prefill_tokens_per_s{P}, decode_tokens_per_s); kv: {dtype, tokens[], rows [{key, name, source, layers, query_heads, kv_heads, head_dim, context_window, sliding_window, bytes_per_token, formula, totals [{tokens, total_bytes}]}], formula}; capacity: {memory_bytes, context_tokens, dtype, weight_bytes, kv_bytes_per_visitor, visitors}; batch: inference.batching.batch_experiment; speculative: inference.speculative.speculative_report (method draft_model / ngram, ngram_size, proposed, acceptance_rate, target_forward_passes, draft_forward_passes, target_alone_forward_passes, spec_ms, target_ms, speedup, identical, rounds, with pieces {id: text} for every id it names); quantize: inference.quantize.quantize_experiment; prefix: inference.prefix_saving.prefix_saving (prompt_tokens, cached_tokens, repeats, with_ms, without_ms, with_forward_ms, without_forward_ms, saved_ms, speedup: medians of the prompt's prefill with its first cached_tokens from a private prefix cache and without one) and cache_on; languages (arithmetic, no model run) and languages_prefill (each line's prefill timed, the median of 3 after a warm-up): inference.languages (rows [{lang, name, text, tokens, chars, utf8_bytes, chars_per_token, partial_tokens (tokens whose piece alone is not whole text: a character's UTF-8 bytes split over tokens), ids, pieces, partial (their indexes), kv_bytes, tokens_vs_first, and with languages_prefill prefill_ms, prefill_vs_first}], kv_bytes_per_token, kv_dtype, kv_formula, first: the line the ratios are to). The experiments also carry visitor_calls_between: visitors' calls run between the experiment's forward passes (it runs in slices on a busy server; their time is inside its timings)"),
    },
    "serving_progress": {
        "type": ("str", "\"serving_progress\""), "schema_version": ("int", ""),
        "what": ("str", "the measurement under way (as in serving): sent before each of its parts, only when it is measured afresh"),
        "done": ("int", "parts finished"), "total": ("int", "parts in all"),
        "label": ("str", "the part running now, e.g. \"batch size 4 of 8\""),
    },
    "part": {
        "type": ("str", "\"part\""), "schema_version": ("int", ""),
        "of": ("str", "the type of the split message this part completes (prefill, step, detail, serving, ...)"),
        "index": ("int", "1-based; parts arrive in order, right after their head"),
        "count": ("int", "how many parts the head announced (its `parts` field)"),
        "pieces": ("list", "[{path, text} or {path, items}]: append text to the string, or items to the list, at path (object keys from the message's top) in the head"),
    },
    "compare": {
        "type": ("str", "\"compare\""), "schema_version": ("int", ""),
        "step": ("int", "the step both runs have just taken (docs/protocol.md, \"Two runs side by side\"); each sampled it from its own context"),
        "token_a": ("object", "{id, text, prob}: run A's token and its probability in A's final distribution"),
        "token_b": ("object", "{id, text, prob}: run B's"),
        "same_tokenizer": ("bool", "token ids name the same tokens in both runs: the figures below compare the two distributions; false: only the top 5s compare"),
        "a_prob_of_b": ("float?", "run A's probability of the token B drew (null: two tokenizers)"),
        "b_prob_of_a": ("float?", "run B's probability of A's token"),
        "kl": ("float?", "KL(A ‖ B) = sum over the tokens A may draw of p_A log(p_A / p_B), in nats, between the two final distributions (after every sampling stage); null when B gives 0 to a token A may draw (infinite) or with two tokenizers"),
        "kl_infinite": ("bool", "B filtered out a token A may draw"),
        "js": ("float?", "Jensen-Shannon divergence in nats, in [0, ln 2]: finite where KL is not"),
        "max_logit_diff": ("float?", "max over the vocabulary of |raw logit A - raw logit B| (before any sampling stage): the int8 copy's error when only the weights differ"),
        "top_a": ("list", "[{id, text, prob}] run A's 5 most likely tokens (final distribution)"),
        "top_b": ("list", "[{id, text, prob}] run B's"),
        "parted": ("bool", "the two runs drew different tokens at this step"),
        "first_parting_step": ("int?", "the first step, so far, where they drew different tokens (null: they agree so far)"),
    },
    "retemper": {
        "type": ("str", "\"retemper\""), "schema_version": ("int", ""), "step": ("int", ""),
        "params": ("object", "temperature, top_k, top_p, min_p applied"),
        "stages": ("list", "as in step"), "probs": ("list", "as in step"),
        "token": ("object", "{id, text, prob}: where the step's own u now lands"),
        "draw": ("object?", "as in step"),
    },
}


class SchemaError(AssertionError):
    """An emitted payload does not match SCHEMA (or a recording's does: its sentence is `said`, the reader's)."""


def validate_payload(payload: dict) -> None:
    """Raise SchemaError unless every field of its type's table is there with its top-level type."""
    kind = payload.get("type")
    if kind not in SCHEMA:
        raise SchemaError(said("unknown payload type %(type)s", type=repr(kind)))
    _check(payload, SCHEMA[kind], kind)


_TYPES = {"int": int, "float": (int, float), "str": str, "bool": bool, "list": list, "object": dict, "packed": dict}


def _check(obj: dict, spec: dict, path: str) -> None:
    missing = sorted(set(spec) - set(obj))
    if missing:
        raise SchemaError(said("%(path)s: missing %(missing)s", path=path, missing=str(missing)))
    for name, rule in spec.items():
        value = obj[name]
        if isinstance(rule, dict):
            if not isinstance(value, dict):
                raise SchemaError(said("%(path)s: expected object", path=f"{path}.{name}"))
            _check(value, rule, f"{path}.{name}")
            continue
        kind = rule[0].rstrip("?")
        if value is None and rule[0].endswith("?"):
            continue
        if kind != "any" and (not isinstance(value, _TYPES[kind]) or (kind in ("int", "float") and isinstance(value, bool))):
            raise SchemaError(said("%(path)s: expected %(expected)s, got %(got)s", path=f"{path}.{name}",
                                   expected=rule[0], got=type(value).__name__))
        if kind == "packed" and not {"dtype", "shape", "b64"} <= set(value):
            raise SchemaError(said("%(path)s: packed array needs dtype, shape, b64", path=f"{path}.{name}"))


def field_paths(spec: dict, prefix: str = "") -> list[tuple[str, str, str]]:
    rows = []
    for name, rule in spec.items():
        path = f"{prefix}{name}"
        if isinstance(rule, dict):
            rows.append((path, "object", ""))
            rows.extend(field_paths(rule, path + "."))
        else:
            meaning = rule[1] if len(rule) < 3 else f"{rule[1]} (default {rule[2]!r} when absent)".lstrip()
            rows.append((path, rule[0], meaning))
    return rows


def schema_markdown() -> str:
    """The field tables of docs/protocol.md."""
    out = [f"<!-- generated by `python -m inference schema`; schema_version {SCHEMA_VERSION} -->"]
    for kind, spec in SCHEMA.items():
        out += [f"\n### `{kind}`\n", "| field | type | meaning |", "|---|---|---|"]
        out += [f"| `{p}` | {t} | {d.replace('|', '/')} |" for p, t, d in field_paths(spec)]
    return "\n".join(out) + "\n"

"""The step engine on tiny, randomly initialised models of real architectures (no download).

GPT-2 (learned positions), Llama (GQA), Qwen2, Mistral (sliding window shorter than the run),
Gemma (embedding scale, MQA, explicit head_dim), Phi3 and Phi (partial rotary). Every check compares
the engine's cached, instrumented decode against plain transformers: ``generate`` for the ids, a full
forward without cache for the logits.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from tests.inference.arch_helpers import ARCHITECTURES, SLIDING_WINDOW, arch_config, tiny_loaded
from transformers.cache_utils import DynamicLayer

from inference.engine import GenerationSession
from inference.kvstats import kv_formula
from inference.wire.packing import unpack
from inference.wire.schema import validate_payload
from inference.prompting import build_prompt
from inference.sampling import SamplingParams

PROMPT = [1, 5, 17, 42, 9, 77]  # 6 tokens: shorter than Mistral's window (8) ...
NEW = 10  # ... and prompt + generation (16) longer than it
LONG_PROMPT = [1, 5, 17, 42, 9, 77, 3, 64, 100, 12, 55, 31]  # 12 tokens: already past the window at prefill
ATOL = 1e-4
ROUNDING = 5e-5  # payload logits are rounded to 4 decimals

_LOADED: dict[str, object] = {}
_RUNS: dict[str, dict] = {}


def loaded_for(arch: str):
    if arch not in _LOADED:
        _LOADED[arch] = tiny_loaded(arch_config(arch))
    return _LOADED[arch]


def run_greedy(loaded, prompt_ids=PROMPT, new=NEW) -> tuple[GenerationSession, dict, list[dict]]:
    session = GenerationSession(loaded, build_prompt(loaded.tokenizer, input_ids=list(prompt_ids)),
                                SamplingParams(temperature=0, max_new_tokens=new))
    prefill = session.prefill()
    steps = []
    while not session.finished:
        steps.append(session.step())
    return session, prefill, steps


def greedy_run(arch: str) -> dict:
    """One greedy run per architecture, shared by the tests that only read it."""
    if arch not in _RUNS:
        session, prefill, steps = run_greedy(loaded_for(arch))
        _RUNS[arch] = {"session": session, "prefill": prefill, "steps": steps}
    return _RUNS[arch]


@torch.no_grad()
def full_logits(model, ids: list[int]) -> torch.Tensor:
    """Last-position logits of one forward over ``ids`` without any cache."""
    return model(input_ids=torch.tensor([ids]), use_cache=False).logits[0, -1].float()


def assert_payload_logits(payload: dict, expected: torch.Tensor) -> None:
    top = payload["logits"]["top"]
    assert payload["logits"]["vocab_size"] == expected.shape[-1]
    for entry in top:
        assert abs(entry["logit"] - float(expected[entry["id"]])) <= ATOL + ROUNDING, (entry, float(expected[entry["id"]]))
    assert top[0]["id"] == int(expected.argmax())


def live_cache_bytes(cache) -> int:
    return sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers if layer.keys is not None)


def is_sliding(loaded) -> bool:
    return loaded.description.sliding_window is not None


archs = pytest.mark.parametrize("arch", ARCHITECTURES)


@archs
def test_greedy_ids_match_generate(arch):
    loaded = loaded_for(arch)
    run = greedy_run(arch)
    session = run["session"]
    assert session.finished == "max_new_tokens"
    assert len(session.generated) == NEW
    with torch.no_grad():
        out = loaded.model.generate(torch.tensor([PROMPT]), attention_mask=torch.ones(1, len(PROMPT), dtype=torch.long),
                                    max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False,
                                    eos_token_id=None, pad_token_id=0)
    assert out[0, len(PROMPT):].tolist() == session.generated
    assert [s["token"]["id"] for s in run["steps"]] == session.generated


@archs
def test_step_logits_match_full_forward_without_cache(arch):
    loaded = loaded_for(arch)
    run = greedy_run(arch)
    session = run["session"]
    p = session.prompt_length
    assert_payload_logits(run["prefill"], full_logits(loaded.model, PROMPT))
    for n, payload in enumerate(run["steps"], start=1):
        prefix = session.ids[: p + n - 1]
        expected = full_logits(loaded.model, prefix)
        assert_payload_logits(payload, expected)
        # the kept full-vocabulary logits, not only the top 10
        torch.testing.assert_close(session.kept.get(n, "logits"), expected, atol=ATOL, rtol=0)
        assert payload["input"]["position"] == p + n - 2
        assert payload["input"]["id"] == session.ids[p + n - 2]
        assert payload["forward"] == ("prefill" if n == 1 else "decode")


@archs
def test_every_payload_matches_the_schema(arch):
    run = greedy_run(arch)
    for payload in [run["prefill"], *run["steps"], run["session"].done_payload()]:
        validate_payload(payload)


@archs
def test_kv_bytes_are_the_live_tensors_and_the_formula(arch):
    loaded = loaded_for(arch)
    run = greedy_run(arch)
    session, config = run["session"], loaded.model.config
    p, d = session.prompt_length, loaded.description
    per_token = 2 * d.layers * d.kv_heads * d.head_dim * 4  # float32
    assert kv_formula(config, "float32", 1)["bytes_per_token"] == per_token
    kv = session.kv()
    assert kv["bytes"] == live_cache_bytes(session.cache)
    assert kv["seq_len"] == p + NEW - 1  # the last sampled token has not been fed yet
    assert len(kv["layers"]) == d.layers
    for layer in kv["layers"]:
        assert layer["shape"][1] == d.kv_heads and layer["shape"][3] == d.head_dim
    for n, payload in enumerate([run["prefill"], *run["steps"][1:]]):
        tokens = p + n  # prefill: the prompt; step n + 1: the prompt and n generated tokens
        assert payload["kv"]["seq_len"] == tokens
        if is_sliding(loaded):
            # DynamicSlidingWindowLayer keeps the last window - 1 keys between forwards
            assert payload["kv"]["bytes"] == per_token * min(tokens, SLIDING_WINDOW - 1)
        else:
            assert payload["kv"]["bytes"] == kv_formula(config, "float32", tokens)["total_bytes"] == per_token * tokens
            assert payload["kv"]["bytes_per_token"] == per_token


def test_kv_formula_and_stats_agree_with_a_sliding_window_cache():
    loaded = loaded_for("mistral")
    session = greedy_run("mistral")["session"]
    kv = session.kv()
    tokens = kv["seq_len"]
    assert tokens > SLIDING_WINDOW
    formula = kv_formula(loaded.model.config, "float32", tokens)
    assert kv["bytes_per_token"] == formula["bytes_per_token"]
    assert kv["bytes"] == formula["total_bytes"]
    assert kv["stored_tokens"] == formula["cached_tokens"] == SLIDING_WINDOW - 1


@archs
@torch.no_grad()
def test_causal_mask_hides_the_future(arch):
    model = loaded_for(arch).model
    a = PROMPT + [20]
    b = PROMPT + [21]
    ha = model(input_ids=torch.tensor([a]), use_cache=False, output_hidden_states=True).hidden_states
    hb = model(input_ids=torch.tensor([b]), use_cache=False, output_hidden_states=True).hidden_states
    assert len(ha) == model.config.num_hidden_layers + 1
    for layer_a, layer_b in zip(ha, hb):
        torch.testing.assert_close(layer_a[0, :-1], layer_b[0, :-1], atol=0, rtol=0)
    assert not torch.equal(ha[-1][0, -1], hb[-1][0, -1])


@archs
def test_prefill_attention_is_causal_and_windowed(arch):
    loaded = loaded_for(arch)
    prefill = greedy_run(arch)["prefill"]
    assert prefill["attention"]["mode"] == "full"
    attn = unpack(prefill["attention"]["full"])  # (layers, heads, P, P)
    p = len(PROMPT)
    assert attn.shape == (loaded.description.layers, loaded.description.query_heads, p, p)
    q, k = np.indices((p, p))
    masked = k > q
    if is_sliding(loaded):
        masked |= q - k >= SLIDING_WINDOW
    assert np.all(attn[..., masked] == 0)
    np.testing.assert_allclose(attn.sum(-1), 1.0, atol=2e-3)
    assert prefill["mask"]["sliding_window"] == loaded.description.sliding_window


@archs
def test_fork_continues_like_a_fresh_forward(arch):
    loaded = loaded_for(arch)
    session = GenerationSession(loaded, build_prompt(loaded.tokenizer, input_ids=list(PROMPT)),
                                SamplingParams(temperature=0, max_new_tokens=NEW))
    session.prefill()
    for _ in range(6):
        session.step()
    original = list(session.generated)
    p = session.prompt_length
    forced = (original[2] + 1) % loaded.description.vocab_size
    forked = session.fork(3, forced)
    assert forked["forced"] and forked["step"] == 3 and forked["token"]["id"] == forced
    assert session.generated == original[:2] + [forced]
    assert_payload_logits(forked, full_logits(loaded.model, session.ids[: p + 2]))  # the fork point's own logits
    assert session.cache.get_seq_length() == p + 2
    nxt = session.step()
    assert nxt["step"] == 4 and session.generated[:3] == original[:2] + [forced]
    assert_payload_logits(nxt, full_logits(loaded.model, session.ids[: p + 3]))
    assert session.kv()["bytes"] == live_cache_bytes(session.cache)
    # and the run goes on consistently to the end
    while not session.finished:
        payload = session.step()
        assert_payload_logits(payload, full_logits(loaded.model, session.ids[: p + payload["step"] - 1]))
    assert len(session.generated) == NEW


@archs
def test_fork_at_step_one_reruns_the_prefill(arch):
    loaded = loaded_for(arch)
    session = GenerationSession(loaded, build_prompt(loaded.tokenizer, input_ids=list(PROMPT)),
                                SamplingParams(temperature=0, max_new_tokens=4))
    session.prefill()
    session.step(), session.step()
    session.fork(1, 7)
    assert session.generated == [7]
    assert_payload_logits(session.step(), full_logits(loaded.model, PROMPT + [7]))


def test_mistral_prompt_longer_than_the_window():
    """Prefill itself past the window, then decode and fork past it too."""
    loaded = loaded_for("mistral")
    session, prefill, steps = run_greedy(loaded, LONG_PROMPT, new=6)
    p = len(LONG_PROMPT)
    assert_payload_logits(prefill, full_logits(loaded.model, LONG_PROMPT))
    for n, payload in enumerate(steps, start=1):
        assert_payload_logits(payload, full_logits(loaded.model, session.ids[: p + n - 1]))
        # step 1 reads the prefill's last row (every prompt key); decode queries see the window
        assert payload["attention"]["keys"] == (p if n == 1 else SLIDING_WINDOW)
    attn = unpack(prefill["attention"]["full"])
    q, k = np.indices((p, p))
    assert np.all(attn[..., q - k >= SLIDING_WINDOW] == 0)
    assert not all(type(layer) is DynamicLayer for layer in session.cache.layers)  # exercised the rebuild path
    original = list(session.generated)
    session.fork(2, 11)
    assert session.generated == original[:1] + [11]
    assert_payload_logits(session.step(), full_logits(loaded.model, session.ids[: p + 2]))


@archs
def test_adapter_matches_the_model(arch):
    loaded = loaded_for(arch)
    model, adapter, d = loaded.model, loaded.adapter, loaded.description
    prefill = greedy_run(arch)["prefill"]
    positions = prefill["positions"]
    p = len(PROMPT)
    ids = torch.tensor([PROMPT])
    with torch.no_grad():
        layer0_input = model(input_ids=ids, use_cache=False, output_hidden_states=True).hidden_states[0][0]  # (P, hidden)
        embedded = adapter.embed(model, ids)[0]
        pos = torch.arange(p)
        if arch == "gpt2":
            assert d.position_scheme == positions["scheme"] == "learned"
            assert positions["learned"] is not None and positions["rotary"] is None
            assert unpack(positions["learned"]).shape[0] == p
            embedded = embedded + adapter.position_vectors(model, pos)
            assert adapter.rotary_angles(model, pos) is None
        else:
            assert d.position_scheme == positions["scheme"] == "rotary"
            assert positions["rotary"] is not None and positions["learned"] is None
            assert adapter.position_vectors(model, pos) is None
            # the angles the adapter explains are the ones the model rotates q/k by
            angles = adapter.rotary_angles(model, pos)  # (P, rotary_dim // 2)
            cos, sin = adapter.backbone(model).rotary_emb(layer0_input[None], pos[None])  # (1, P, rotary_dim)
            assert cos.shape[-1] == 2 * angles.shape[1]
            torch.testing.assert_close(torch.cos(angles), cos[0, :, : angles.shape[1]], atol=1e-5, rtol=0)
            torch.testing.assert_close(torch.sin(angles), sin[0, :, : angles.shape[1]], atol=1e-5, rtol=0)
        torch.testing.assert_close(embedded, layer0_input, atol=1e-5, rtol=1e-5)
    assert prefill["embeddings"]["scale"] == pytest.approx(math.sqrt(d.hidden_size) if arch == "gemma" else 1.0)
    # the logit lens at the last layer is the model's own prediction (final norm + LM head)
    last = prefill["lens"][-1]
    assert last["layer"] == d.layers - 1
    top = prefill["logits"]["top"]
    assert last["ids"] == [t["id"] for t in top[:len(last["ids"])]]
    assert last["probs"] == pytest.approx([t["prob"] for t in top[:len(last["ids"])]], abs=2e-4)
    assert unpack(prefill["hidden_norms"]).shape == (d.layers + 1, p)
    assert len(adapter.layers(model)) == d.layers


@archs
@torch.no_grad()
def test_captured_hidden_rows_are_the_residual_stream(arch):
    """Row 0: what layer 0 receives; row i: layer i's output (the last before the final norm)."""
    loaded = loaded_for(arch)
    session = greedy_run(arch)["session"]
    kept = session.kept.get(0, "hidden").float()  # (layers + 1, P, hidden), stored as float16
    reference = loaded.model(input_ids=torch.tensor([PROMPT]), use_cache=False, output_hidden_states=True).hidden_states
    # transformers' last hidden state is after the final norm; the engine's is the last layer's raw output
    for i in range(loaded.description.layers):
        torch.testing.assert_close(kept[i], reference[i][0], atol=2e-2, rtol=2e-3)


def test_description_of_the_families():
    llama = loaded_for("llama").description
    assert llama.kv_heads == 2 < llama.query_heads == 4
    gemma = loaded_for("gemma").description
    assert (gemma.kv_heads, gemma.query_heads, gemma.head_dim) == (1, 4, 8)
    assert loaded_for("mistral").description.sliding_window == SLIDING_WINDOW
    for arch in ARCHITECTURES:
        d = loaded_for(arch).description
        assert d.family == arch and d.layers == 2 and d.vocab_size == 128 and d.context_window == 128
        grouped = arch in ("llama", "qwen2", "mistral", "gemma")  # Llama's eager, KV heads shared: no repeat_kv copies
        assert d.attn_implementation == loaded_for(arch).model.config._attn_implementation == (
            "eager_grouped" if grouped else "eager")
        if arch != "mistral":
            assert d.sliding_window is None


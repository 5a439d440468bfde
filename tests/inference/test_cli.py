"""`python -m inference trace` and `kv`: the exact field names users' scripts depend on.

The commands run in this process (inference.__main__.main, what `python -m inference` calls); one test runs
the real `python -m inference` in a subprocess, exit status and stdout included."""
import contextlib
import io
import json
import subprocess
import sys

import pytest

from pathlib import Path

from tests.inference.conftest import STORIES

DRAFT = Path(__file__).resolve().parents[2] / "inference" / "bundled_draft"


def cli(*args: str) -> list[dict]:
    """`python -m inference ARGS`, run in process: its JSON lines (it must exit 0)."""
    from inference.__main__ import main

    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        returned = main(list(args))
    assert returned == 0, stdout.getvalue() + stderr.getvalue()
    return [json.loads(line) for line in stdout.getvalue().splitlines()]


@pytest.mark.parametrize("source", [["--model", str(STORIES), "--input-ids", "1,403,407"],
                                    ["--model", "bundled", "--prompt", "What does mole mean?"]])
def test_trace_greedy_lines(source):
    lines = cli("trace", *source, "--max-new-tokens", "6", "--temperature", "0")
    assert [l["type"] for l in lines[:2]] == ["session", "prefill"] and lines[-1]["type"] == "done"
    steps = [l for l in lines if l["type"] == "step"]
    assert 1 <= len(steps) <= 6
    for step in steps:
        assert isinstance(step["token"]["id"], int) and isinstance(step["token"]["text"], str)
        top = step["logits"]["top"]
        assert [t["logit"] for t in top] == sorted((t["logit"] for t in top), reverse=True)
        assert {"id", "text", "logit", "prob"} <= set(top[0])
        assert isinstance(step["kv"]["seq_len"], int) and isinstance(step["kv"]["bytes"], int)
        assert isinstance(step["timing"]["forward_ms"], float)
        assert step["token"]["id"] == top[0]["id"]  # temperature 0: argmax of this step's logits
    assert steps[0]["token"]["id"] == lines[1]["logits"]["top"][0]["id"]


def test_trace_input_ids_are_fed_exactly():
    lines = cli("trace", "--model", str(STORIES), "--input-ids", "5,6,7", "--max-new-tokens", "1")
    assert [t["id"] for t in lines[1]["tokens"]] == [5, 6, 7]  # no BOS added


def test_trace_bad_param_is_named_error():
    """The subprocess smoke test: the real `python -m inference`, its exit status and its last line."""
    out = subprocess.run([sys.executable, "-m", "inference", "trace", "--model", str(STORIES), "--input-ids", "1",
                          "--temperature", "3"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2
    error = json.loads(out.stdout.splitlines()[-1])
    assert error["field"] == "temperature" and "[0, 2]" in error["message"]


def test_kv_formula_uses_kv_heads(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                                  "hidden_size": 4096, "max_position_embeddings": 8192}))
    [result] = cli("kv", "--config", str(config), "--dtype", "float16", "--tokens", "1000")
    assert result["bytes_per_token"] == 2 * 32 * 8 * 128 * 2 == 131072  # Llama-3-8B: 128 KiB per token
    assert result["total_bytes"] == 131072 * 1000


def test_kv_opt_13b_matches_vllm_paper(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "opt", "num_hidden_layers": 40, "num_attention_heads": 40,
                                  "hidden_size": 5120, "max_position_embeddings": 2048}))
    [result] = cli("kv", "--config", str(config), "--dtype", "float16", "--tokens", "2048")
    assert result["bytes_per_token"] == 819_200 and result["total_bytes"] == 1_677_721_600


def test_kv_on_spec(tmp_path):
    [result] = cli("kv", "--config", str(STORIES), "--dtype", "float32", "--tokens", "10")
    assert result["bytes_per_token"] == 2 * 5 * 4 * 8 * 4


def test_speculative_cli_fields():
    [r] = cli("speculative", "--target", "bundled", "--draft", str(DRAFT), "--prompt", "What does mole mean?",
              "--max-new-tokens", "12", "--k", "4")
    assert r["tokens"] == r["target_tokens"]
    assert all({"proposed", "accepted"} <= set(round_) for round_ in r["rounds"])
    assert 0 <= r["acceptance_rate"] <= 1 and r["target_forward_passes"] == len(r["rounds"])


def test_batch_cli_fields():
    [r] = cli("batch", "--model", "bundled", "--prompt", "What does mole mean?", "--batch-sizes", "1,2", "--max-new-tokens", "4")
    assert [run["batch_size"] for run in r["runs"]] == [1, 2]
    for run in r["runs"]:
        assert run["tokens_per_s"] > 0 and run["max_abs_logit_diff"] >= 0 and isinstance(run["flipped_tokens"], int)


def test_quantize_cli_fields():
    [r] = cli("quantize", "--model", "bundled", "--bits", "8", "--prompt", "What does mole mean?", "--max-new-tokens", "4")
    assert r["weight_bytes_after"] < r["weight_bytes_before"]
    assert r["decode_speed_ratio"] == pytest.approx(r["decode_tokens_per_s_after"] / r["decode_tokens_per_s_before"], rel=5e-3)
    assert r["max_abs_logit_diff"] >= 0 and 0 <= r["top1_agreement"] <= 1

"""bench/load.py runs end to end against its own Daphne: the JSON has its shape and no visitor failed.

No timing is asserted: the figures depend on the machine.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN_FIELDS = {"visitors", "ttft_p50_ms", "ttft_p95_ms", "itl_p50_ms", "itl_p95_ms", "tokens_per_s", "errors",
              "tokens", "visitor_runs", "tokens_per_s_vs_1", "itl_p95_over_p50", "stop_reasons",
              "mean_batch_size", "greedy_mismatches"}


def test_two_visitors_run_without_errors():
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "bench/load.py", "--visitors", "1,2", "--max-new-tokens", "4", "--repeats", "2", "--json"]
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)  # nothing but the one object on stdout
    assert [run["visitors"] for run in report["runs"]] == [1, 2]
    for run in report["runs"]:
        assert RUN_FIELDS <= set(run), RUN_FIELDS - set(run)
        assert run["errors"] == 0, run["error_kinds"]
        assert run["visitor_runs"] == 2 * run["visitors"]
        assert run["tokens"] == 4 * run["visitor_runs"]  # every visitor got all its tokens (greedy: no early EOS here)
        assert run["ttft_p50_ms"] > 0 and run["itl_p50_ms"] > 0 and run["tokens_per_s"] > 0
        assert 1 <= run["mean_batch_size"] <= run["visitors"] and run["greedy_mismatches"] == 0
    lone, two = report["runs"]
    assert two["tokens_per_s_vs_1"] == pytest.approx(two["tokens_per_s"] / lone["tokens_per_s"])  # against the lone visitor
    assert two["itl_p95_over_p50"] == pytest.approx(two["itl_p95_ms"] / two["itl_p50_ms"])
    assert report["targets"]["at_visitors"] == 2 and set(report["targets"]["met"]) == {
        "errors", "tokens_per_s_vs_1", "itl_p95_over_p50"}
    assert report["targets"]["met"]["errors"] is True
    serving = report["serving_targets"]  # issue 24's, judged at the largest batch against this run's own figures
    assert serving["at_visitors"] == 2 and serving["got"] == {
        "ttft_p50_ms": two["ttft_p50_ms"], "tokens_per_s_vs_1": two["tokens_per_s_vs_1"],
        "tokens_per_s_vs_generate": two["tokens_per_s_vs_generate"]}
    assert serving["met"]["ttft_p50_ms"] == (two["ttft_p50_ms"] <= 1000)
    assert serving["met"]["tokens_per_s_vs_1"] == (two["tokens_per_s_vs_1"] >= 8)
    assert report["prefix_cache_off"]["serving_targets"]["got"]["ttft_p50_ms"] == report["prefix_cache_off"]["runs"][1]["ttft_p50_ms"]
    # Plain generate on the same weights, measured in the same run: the visitors asked different questions, and
    # each one's greedy tokens equal generate's for its question.
    plain = report["plain_generate"]
    assert plain["prompts"] == 2 and plain["ms_per_token_p50"] > 0 and plain["tokens_per_s"] > 0
    assert report["params"]["prompts"] == 32
    for run in report["runs"]:
        assert run["greedy_compared"] == run["visitor_runs"]
        assert run["tokens_per_s_vs_generate"] == pytest.approx(run["tokens_per_s"] / plain["tokens_per_s"])
        assert run["itl_p50_vs_generate"] == pytest.approx(run["itl_p50_ms"] / plain["ms_per_token_p50"])
    # The same batches with the prefix cache off, on fresh servers: every visitor's prompt computed in full there.
    assert report["prefix_cache"] == "on"
    off = report["prefix_cache_off"]["runs"]
    assert [run["visitors"] for run in off] == [1, 2] and all(run["errors"] == 0 for run in off)
    assert all(run["cached_tokens_mean"] == 0 and run["greedy_mismatches"] == 0 for run in off)
    for run in report["runs"]:  # the warm-up's prompt shares the template's start with every question
        assert 0 < run["cached_tokens_mean"] < run["prompt_tokens_mean"]
    for run in report["runs"]:  # vLLM's serving metrics: every request completed, each metric measured
        serving = run["serving"]
        assert serving["completed"] == run["visitor_runs"] and serving["met_slo"] <= serving["completed"]
        for name in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
            assert serving[name]["median"] > 0 and serving[name]["mean"] > 0, name
        assert serving["e2e_ms"]["median"] >= serving["ttft_ms"]["median"]  # the last token comes after the first
        assert serving["slo"] == {"ttft_ms": 1000.0, "tpot_ms": 200.0}

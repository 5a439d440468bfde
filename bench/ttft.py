"""Time to first token of a lone visitor on a long prompt (issue 24, point 2): the wait against the work it needs.

One visitor on Daphne (loopback) sends a ~360-token prompt (SmolLM2 with its template), greedy, and reads its
socket as the page does. Per run it measures, on the client's clock from the `start` frame: the `prefill`
payload, step 1 (the first token: TTFT), and the causal-mask `check`; and from the server's payloads the
prefill's forward pass and one decode step's (step 2's forward). The target compares TTFT with that work,
measured in the same run: TTFT <= 1.2 x (prefill pass + one decode step). Figures only, nothing asserted.
The server runs with the prefix cache off (each run sends the same prompt: with it on, later runs would
prefill one token); bench/load.py measures the cache.

    .venv/bin/python bench/ttft.py                        # SmolLM2, 3 runs after a warm-up
    .venv/bin/python bench/ttft.py --model bundled --sentences 15
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fairness import SENTENCE, connect  # noqa: E402
from load_server import start_server, stop_server  # noqa: E402
from inference.wire.framing import join_message  # noqa: E402

TARGET = 1.2  # TTFT / (prefill pass + one decode step)


async def one_run(url: str, prompt: str, tokens: int) -> dict:
    """A lone visitor's run: client-side arrival times (ms after the start was sent) and the server's timings."""
    ws = await connect(url, "127.0.0.1")
    try:
        sent = time.perf_counter()
        await ws.send({"type": "start", "messages": [{"role": "user", "content": prompt}],
                       "params": {"temperature": 0, "max_new_tokens": tokens, "min_new_tokens": tokens}})
        seen, steps = {}, {}
        # Until the run's after-run checks are in: the weights checksum that follows `done` is device work, and the
        # next run started under it would not be a lone visitor's (it cost the next first chunk ~250 ms).
        while "weights_checked" not in seen:
            message = await ws.recv()
            at = (time.perf_counter() - sent) * 1e3
            if message.get("parts"):  # a message larger than the send cap: its parts follow at once
                message = join_message([message] + [await ws.recv() for _ in range(message["parts"])])
            kind = message["type"]
            if kind == "error":
                raise SystemExit(f"the server refused the run: {message}")
            if kind == "step":
                steps[message["step"]] = message
                seen.setdefault(f"step {message['step']}", at)
            elif kind == "check" and message.get("name") == "causal_mask":
                seen["check"], seen["check_data"] = at, message["data"]
            elif kind == "check" and message.get("name") == "weights_unchanged":
                seen["weights_checked"] = at
            elif kind in ("prefill", "done"):
                seen.setdefault(kind, at)
                seen[f"{kind}_payload"] = message
        prefill = seen["prefill_payload"]
        return {"prompt_tokens": len(prefill["tokens"]), "prefill_arrived_ms": seen["prefill"], "ttft_ms": seen["step 1"],
                "check_arrived_ms": seen.get("check"), "check_ms": (seen.get("check_data") or {}).get("measured_ms"),
                "check_after_steps": sum(1 for k, v in seen.items() if k.startswith("step ") and v < seen.get("check", 0)),
                "prefill_pass_ms": prefill["timing"]["forward_ms"], "prefill_capture_ms": prefill["timing"]["capture_ms"], "decode_step_ms": steps[2]["timing"]["forward_ms"],
                "server_ttft_ms": seen["done_payload"]["timing"]["ttft_ms"]}
    finally:
        await ws.close()


async def main(args) -> dict:
    prompt = SENTENCE * args.sentences
    with tempfile.TemporaryDirectory() as workdir:
        # The prefix cache off: every run's prefill computes the whole prompt (the same prompt is sent each run)
        proc, url = start_server(args, 4, Path(workdir), {"EXPLAINER_PREFIX_CACHE_BYTES": "0"})
        try:
            await one_run(url, "Warm-up. " + prompt, 3)  # the first request pays for lazy loading
            # A prompt of its own each run: a prompt checked lately would have its causal-mask check reused.
            runs = [await one_run(url, f"Run {n + 1}. " + prompt, args.tokens) for n in range(args.repeats)]
        finally:
            stop_server(proc)
    median = {k: statistics.median(r[k] for r in runs) for k in runs[0] if isinstance(runs[0][k], (int, float))}
    work = median["prefill_pass_ms"] + median["decode_step_ms"]
    ratio = median["ttft_ms"] / work
    return {"model": args.model, "runs": runs, "median": median, "work_ms": work, "ratio": round(ratio, 3),
            "target": TARGET, "met": ratio <= TARGET}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--tokens", type=int, default=8, help="new tokens per run (step 2 gives the decode step)")
    p.add_argument("--sentences", type=int, default=20, help="the prompt: this many sentences (20: about 360 SmolLM2 "
                   "tokens with the template; 15 for bundled's tokenizer)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--server-timeout", type=float, default=240)
    return p


def print_table(result: dict) -> None:
    m = result["median"]
    print(f"{result['model']}: {m['prompt_tokens']:.0f}-token prompt, median of {len(result['runs'])} lone runs")
    for key in ("prefill_pass_ms", "prefill_capture_ms", "decode_step_ms", "prefill_arrived_ms", "ttft_ms", "server_ttft_ms", "check_arrived_ms", "check_ms"):
        if key in m:
            print(f"  {key:20} {m[key]:9.1f}")
    print(f"  TTFT / (prefill pass + one decode step) = {m['ttft_ms']:.1f} / {result['work_ms']:.1f} = {result['ratio']:.2f} "
          f"(target <= {result['target']}: {'met' if result['met'] else 'not met'})")


if __name__ == "__main__":
    arguments = parser().parse_args()
    outcome = asyncio.run(main(arguments))
    print_table(outcome)
    print(json.dumps(outcome, indent=2))

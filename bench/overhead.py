"""What the explainer costs: plain ``model.generate`` versus a traced GenerationSession, and frame sizes.

    .venv/bin/python bench/overhead.py [--tokens N] [--prompt-tokens P] [--repeats R]
                                       [--device auto|cpu|cuda] [--model SPEC] [--only ...] [--json]
                                       [--json-out PATH] [--threads T]

For each model the same prompt of P token ids is continued greedily for N new tokens, twice over:

* plain:  ``model.generate(ids, max_new_tokens=N, min_new_tokens=N, do_sample=False)``;
* traced: ``GenerationSession`` prefill + N steps, every payload serialized with
  ``json.dumps(payload, separators=(",", ":"))`` as the websocket would send it.

One warm-up of each, then R alternating plain/traced runs; the medians are printed with their ratio,
the serialized frame sizes, and the engine's own per-step timing (forward / capture / sampling).
A last section prefills a 512-token prompt on the 135M shape and compares the frame sizes with the
wire budget (prefill <= 512 KB, decode <= 64 KB; KB = 1024 bytes).

``--only load`` times loading ``--model`` in fresh processes: first with an empty model cache (for
``smollm2-135m-instruct`` that is the GGUF -> safetensors conversion), then again from the cache.

Models: ``--model`` (default ``bundled``; the real pretrained ``tests/fixtures/models/stories260K`` also
works) and a randomly initialised SmolLM2-135M-shaped Llama.
The script prints figures and never asserts times: it exits 0 whatever the numbers are.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import transformers  # noqa: E402

from inference.discovery import adapter_for  # noqa: E402
from inference.engine import GenerationSession  # noqa: E402
from inference.loading import LoadedModel, as_served, chat_template_source, describe, load_model, resolve_device  # noqa: E402
from inference.prompting import build_prompt  # noqa: E402
from inference.sampling import SamplingParams  # noqa: E402

KB = 1024
PREFILL_BUDGET = 512 * KB
DECODE_BUDGET = 64 * KB
RATIO_TARGET = 1.15  # traced / plain on the 135M shape
SEPARATORS = (",", ":")
RANDOM_SPEC = "random-smollm2-135m-shape"
SMOLLM2_135M_SHAPE = dict(
    vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
    num_key_value_heads=3, max_position_embeddings=2048, tie_word_embeddings=True, rope_theta=100000,
)
PARTS = ("model", "135m", "frames512", "load")


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


# -- models -------------------------------------------------------------------------------------------
def stand_in_tokenizer(vocab_size: int):
    """A WordLevel tokenizer where "<tN>" is id N for every id (the shape of stories260K's tokenizer.json)."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(WordLevel({f"<t{i}>": i for i in range(vocab_size)}, unk_token="<t0>"))
    backend.pre_tokenizer = WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<t0>")


def random_135m(device: str) -> LoadedModel:
    """A randomly initialised SmolLM2-135M-shaped Llama (eager attention; bf16 on CUDA, fp32 on CPU)."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    dev, dtype = resolve_device(device)
    started = time.perf_counter()
    config = LlamaConfig(**SMOLLM2_135M_SHAPE)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    model.to(device=dev, dtype=dtype).eval()
    as_served(model)  # the linear layers' kernel and the attention, as load_model sets them
    tokenizer = stand_in_tokenizer(config.vocab_size)
    template_source = chat_template_source(tokenizer, str(ROOT / "bench"))  # no template: the fallback
    adapter = adapter_for(model)
    description = describe(model, RANDOM_SPEC, adapter, template_source)
    log(f"built {RANDOM_SPEC}: {description.parameters:,} parameters on {dev} ({description.dtype}) "
        f"in {time.perf_counter() - started:.1f}s")
    return LoadedModel(model, tokenizer, description, adapter)


def load_named(spec: str, device: str) -> tuple[LoadedModel | None, str | None]:
    """(the loaded model, None), or (None, why not): any failure to load means skipping this model."""
    try:
        return load_model(spec, device=device, attn_implementation="eager"), None
    except Exception as exc:  # noqa: BLE001
        reason = f"{exc.__class__.__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        hint = " (try --model tests/fixtures/models/stories260K)" if spec == "bundled" else ""
        log(f"skipping model {spec!r}: {reason}{hint}")
        return None, reason


# -- runs ---------------------------------------------------------------------------------------------
def load_times(spec: str, device: str) -> dict:
    """Seconds to load ``spec`` in a fresh process: with an empty cache (conversion), then cached."""
    import os
    import subprocess
    import tempfile

    code = ("import time; t = time.perf_counter(); from inference.loading import load_model; "
            f"load_model({spec!r}, device={device!r}); print(time.perf_counter() - t)")
    times = {}
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "EXPLAINER_CACHE_DIR": cache, "HF_HUB_OFFLINE": "1"}
        for label in ("first_load_s", "cached_load_s"):
            out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
            times[label] = round(float(out.stdout.strip().splitlines()[-1]), 2)
            log(f"{spec}: {label} {times[label]} s")
    return {"model": spec, **times}


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def prompt_ids(vocab_size: int, count: int, seed: int) -> list[int]:
    """count random ids in [3, vocab) (ids 0-2 are usually unk/bos/eos), the same for every run."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(min(3, vocab_size - 1), vocab_size, (count,), generator=generator).tolist()


@torch.no_grad()
def run_plain(loaded: LoadedModel, ids: list[int], new_tokens: int) -> dict:
    model = loaded.model
    input_ids = torch.tensor([ids], device=model.device)
    pad = model.generation_config.pad_token_id
    if pad is None:
        eos = model.generation_config.eos_token_id
        pad = (eos[0] if isinstance(eos, (list, tuple)) else eos) if eos is not None else 0
    sync(model.device)
    t0 = time.perf_counter()
    # Both stop at the model's EOS (min_new_tokens would mask EOS and change the argmax): the same rule
    # the traced session runs under, so both produce the same tokens.
    out = model.generate(input_ids, attention_mask=torch.ones_like(input_ids), max_new_tokens=new_tokens,
                         do_sample=False, pad_token_id=pad)
    sync(model.device)
    ms = (time.perf_counter() - t0) * 1e3
    return {"ms": ms, "tokens": out[0, len(ids):].tolist()}


def run_traced(loaded: LoadedModel, prompt, new_tokens: int, lens: str) -> dict:
    """Prefill + new_tokens steps, every payload serialized; the EOS ids are cleared so it never stops early."""
    device = loaded.model.device
    sync(device)
    t0 = time.perf_counter()
    session = GenerationSession(loaded, prompt, SamplingParams(temperature=0, max_new_tokens=new_tokens), lens=lens)
    payload = session.prefill()
    s0 = time.perf_counter()
    frame = json.dumps(payload, separators=SEPARATORS)
    serialize = [(time.perf_counter() - s0) * 1e3]
    prefill = {"bytes": len(frame.encode("utf-8")), "forward_ms": payload["timing"]["forward_ms"],
               "capture_ms": payload["timing"]["capture_ms"], "attention_mode": payload["attention"]["mode"]}
    steps = []
    while not session.finished:
        payload = session.step()
        s0 = time.perf_counter()
        frame = json.dumps(payload, separators=SEPARATORS)
        serialize.append((time.perf_counter() - s0) * 1e3)
        timing = payload["timing"]
        steps.append({"bytes": len(frame.encode("utf-8")), "forward": payload["forward"],
                      "attention_mode": payload["attention"]["mode"], "forward_ms": timing["forward_ms"],
                      "capture_ms": timing["capture_ms"], "sampling_ms": timing["sampling_ms"]})
    sync(device)
    ms = (time.perf_counter() - t0) * 1e3
    tokens, stop = session.generated, session.finished
    session.close()
    return {"ms": ms, "tokens": tokens, "stop_reason": stop, "prefill": prefill, "steps": steps,
            "serialize_ms": serialize, "lens_layers": len(session.lens_layers)}


def median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def bench_model(loaded: LoadedModel, args) -> dict:
    d = loaded.description
    prompt_len = min(args.prompt_tokens, d.context_window - args.tokens)
    if prompt_len < 1:
        raise SystemExit(f"--tokens {args.tokens} does not fit {d.name}'s context window ({d.context_window})")
    if prompt_len != args.prompt_tokens:
        log(f"{d.name}: prompt cut to {prompt_len} tokens to fit the context window ({d.context_window})")
    ids = prompt_ids(d.vocab_size, prompt_len, args.seed)
    prompt = build_prompt(loaded.tokenizer, input_ids=ids)
    log(f"{d.name}: warm-up ({prompt_len} prompt tokens, {args.tokens} new)")
    run_plain(loaded, ids, args.tokens)
    run_traced(loaded, prompt, args.tokens, args.lens)
    plain, traced = [], []
    for r in range(args.repeats):
        plain.append(run_plain(loaded, ids, args.tokens))
        traced.append(run_traced(loaded, prompt, args.tokens, args.lens))
        log(f"{d.name}: repeat {r + 1}/{args.repeats}: plain {plain[-1]['ms']:.1f} ms, traced {traced[-1]['ms']:.1f} ms")
    plain_ms, traced_ms = median([p["ms"] for p in plain]), median([t["ms"] for t in traced])
    steps = [s for t in traced for s in t["steps"]]
    decode = [s for s in steps if s["forward"] == "decode"]
    last = traced[-1]
    return {
        "model": d.name, "spec": d.spec, "family": d.family, "parameters": d.parameters, "layers": d.layers,
        "vocab_size": d.vocab_size, "device": d.device, "dtype": d.dtype, "attn_implementation": d.attn_implementation,
        "linear_kernel": d.linear_kernel,
        "prompt_tokens": prompt_len, "new_tokens": args.tokens, "repeats": args.repeats,
        "lens": args.lens, "lens_layers": last["lens_layers"],
        "plain_ms": plain_ms, "traced_ms": traced_ms,
        "ratio": round(traced_ms / plain_ms, 3) if plain_ms else None,
        "plain_runs_ms": [round(p["ms"], 3) for p in plain], "traced_runs_ms": [round(t["ms"], 3) for t in traced],
        "tokens": {"plain": len(plain[-1]["tokens"]), "traced": len(last["tokens"]),
                   "identical": plain[-1]["tokens"] == last["tokens"], "traced_stop_reason": last["stop_reason"]},
        "frames": {
            "prefill_bytes": {"median": median([t["prefill"]["bytes"] for t in traced]),
                              "max": max(t["prefill"]["bytes"] for t in traced)},
            "decode_bytes": {"median": median([s["bytes"] for s in steps]), "max": max((s["bytes"] for s in steps), default=None)},
            "prefill_attention_mode": last["prefill"]["attention_mode"],
            "step_attention_modes": sorted({s["attention_mode"] for s in steps}),
        },
        "timing_median_ms": {
            "prefill_forward_ms": median([t["prefill"]["forward_ms"] for t in traced]),
            "prefill_capture_ms": median([t["prefill"]["capture_ms"] for t in traced]),
            "prefill_serialize_ms": median([t["serialize_ms"][0] for t in traced]),
            "step_forward_ms": median([s["forward_ms"] for s in decode]),  # decode forwards (step 1 reuses the prefill)
            "step_capture_ms": median([s["capture_ms"] for s in steps]),
            "step_sampling_ms": median([s["sampling_ms"] for s in steps]),
            "step_serialize_ms": median([x for t in traced for x in t["serialize_ms"][1:]]),
        },
    }


def frames_at(loaded: LoadedModel, prompt_tokens: int, steps: int, seed: int, lens: str) -> dict:
    """One prefill + a few steps at a long prompt, just for frame sizes."""
    d = loaded.description
    prompt = build_prompt(loaded.tokenizer, input_ids=prompt_ids(d.vocab_size, prompt_tokens, seed))
    log(f"{d.name}: frame sizes at a {prompt_tokens}-token prompt ({steps} steps)")
    run = run_traced(loaded, prompt, steps, lens)
    decode = [s["bytes"] for s in run["steps"]]
    prefill_bytes, decode_max = run["prefill"]["bytes"], max(decode)
    return {
        "model": d.name, "prompt_tokens": prompt_tokens, "steps": len(decode),
        "prefill_bytes": prefill_bytes, "prefill_budget": PREFILL_BUDGET,
        "prefill_ok": prefill_bytes <= PREFILL_BUDGET, "prefill_attention_mode": run["prefill"]["attention_mode"],
        "decode_bytes_median": median(decode), "decode_bytes_max": decode_max, "decode_budget": DECODE_BUDGET,
        "decode_ok": decode_max <= DECODE_BUDGET, "step_attention_modes": sorted({s["attention_mode"] for s in run["steps"]}),
        "prefill_forward_ms": run["prefill"]["forward_ms"], "prefill_capture_ms": run["prefill"]["capture_ms"],
        "prefill_serialize_ms": round(run["serialize_ms"][0], 3),
    }


# -- output -------------------------------------------------------------------------------------------
def kb(n) -> str:
    return "-" if n is None else f"{n / KB:.1f} KB"


def ms(x) -> str:
    return "-" if x is None else f"{x:.1f}"


def print_model(r: dict) -> None:
    t, f = r["timing_median_ms"], r["frames"]
    target = f"  (target <= {RATIO_TARGET})" if r["spec"] == RANDOM_SPEC else ""
    tok = r["tokens"]
    print(f"\n== {r['model']}  ({r['parameters']:,} params, {r['layers']} layers, vocab {r['vocab_size']}, "
          f"lens {r['lens_layers']} layers)")
    print(f"  device {r['device']}  dtype {r['dtype']}  attention {r['attn_implementation']}  linear layers {r['linear_kernel']}")
    print(f"  prompt tokens {r['prompt_tokens']}  new tokens {r['new_tokens']}  repeats {r['repeats']} (medians)")
    print(f"  plain generate   {ms(r['plain_ms']):>9} ms   runs {r['plain_runs_ms']}")
    print(f"  traced session   {ms(r['traced_ms']):>9} ms   runs {r['traced_runs_ms']}")
    print(f"  ratio traced/plain  {r['ratio']:.2f}{target}")
    print(f"  tokens: plain {tok['plain']}, traced {tok['traced']} (stop: {tok['traced_stop_reason']}), "
          f"identical: {'yes' if tok['identical'] else 'no'}")
    print(f"  prefill frame  median {kb(f['prefill_bytes']['median'])}  max {kb(f['prefill_bytes']['max'])}  "
          f"(attention {f['prefill_attention_mode']})")
    print(f"  decode frames  median {kb(f['decode_bytes']['median'])}  max {kb(f['decode_bytes']['max'])}  "
          f"(attention {'/'.join(f['step_attention_modes'])})")
    print(f"  prefill ms     forward {ms(t['prefill_forward_ms'])}  capture {ms(t['prefill_capture_ms'])}  "
          f"serialize {ms(t['prefill_serialize_ms'])}")
    print(f"  per step ms    forward {ms(t['step_forward_ms'])}  capture {ms(t['step_capture_ms'])}  "
          f"sampling {ms(t['step_sampling_ms'])}  serialize {ms(t['step_serialize_ms'])}")


def print_frames(r: dict) -> None:
    ok = lambda good: "OK" if good else "OVER"  # noqa: E731
    print(f"\n== frame sizes at a {r['prompt_tokens']}-token prompt ({r['model']}, {r['steps']} steps)")
    print(f"  prefill  {kb(r['prefill_bytes']):>10}  budget {kb(r['prefill_budget'])}  {ok(r['prefill_ok'])}  "
          f"(attention {r['prefill_attention_mode']}; forward {ms(r['prefill_forward_ms'])} ms, "
          f"capture {ms(r['prefill_capture_ms'])} ms, serialize {ms(r['prefill_serialize_ms'])} ms)")
    print(f"  decode   {kb(r['decode_bytes_max']):>10}  budget {kb(r['decode_budget'])}  {ok(r['decode_ok'])}  "
          f"(max; median {kb(r['decode_bytes_median'])}; attention {'/'.join(r['step_attention_modes'])})")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=64, help="new tokens per run (default 64)")
    parser.add_argument("--prompt-tokens", type=int, default=128, help="prompt length in token ids (default 128)")
    parser.add_argument("--repeats", type=int, default=3, help="timed plain/traced pairs after one warm-up (default 3)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--model", default="bundled", help="spec of the first model (default bundled)")
    parser.add_argument("--only", default=",".join(PARTS),
                        help=f"comma-separated parts to run, of {', '.join(PARTS)} (default all)")
    parser.add_argument("--frames-prompt-tokens", type=int, default=512, help="prompt length of the frame-size check (default 512)")
    parser.add_argument("--frames-steps", type=int, default=4, help="steps of the frame-size check (default 4)")
    parser.add_argument("--lens", default="auto", choices=("auto", "all"), help="GenerationSession lens mode (default auto)")
    parser.add_argument("--seed", type=int, default=1234, help="seed of the random prompt ids")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's own)")
    parser.add_argument("--json", action="store_true", help="print one JSON object with every figure instead")
    parser.add_argument("--json-out", metavar="PATH", help="also write that JSON object to PATH")
    args = parser.parse_args(argv)
    parts = {p.strip() for p in args.only.split(",") if p.strip()}
    if parts - set(PARTS) or args.tokens < 1 or args.prompt_tokens < 1 or args.repeats < 1:
        parser.error(f"--only takes {', '.join(PARTS)}; --tokens, --prompt-tokens, --repeats must be >= 1")
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device")

    dev, _ = resolve_device(args.device)
    result = {
        "environment": {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
                        "device": str(dev), "cuda_device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None,
                        "threads": torch.get_num_threads(), "machine": platform.machine()},
        "budgets": {"ratio_target_135m": RATIO_TARGET, "prefill_bytes": PREFILL_BUDGET, "decode_bytes": DECODE_BUDGET},
        "models": [], "skipped": [], "frames512": None,
    }
    if not args.json:
        env = result["environment"]
        print(f"Hit Enter overhead bench: torch {env['torch']}, transformers {env['transformers']}, device {env['device']}"
              f"{' (' + env['cuda_device'] + ')' if env['cuda_device'] else ''}, {env['threads']} threads")

    if "model" in parts:
        loaded, reason = load_named(args.model, args.device)
        if loaded is None:
            result["skipped"].append({"model": args.model, "reason": reason})
            if not args.json:
                print(f"\n== {args.model}: skipped, it could not be loaded ({reason})")
        else:
            r = bench_model(loaded, args)
            result["models"].append(r)
            if not args.json:
                print_model(r)
            del loaded

    if "load" in parts:
        result["load"] = load_times(args.model, args.device)
        if not args.json:
            r = result["load"]
            print(f"\n== loading {r['model']} in a fresh process (imports included): first {r['first_load_s']} s "
                  f"(empty cache: converts a GGUF), cached {r['cached_load_s']} s")

    if parts & {"135m", "frames512"}:
        loaded = random_135m(args.device)
        if "135m" in parts:
            r = bench_model(loaded, args)
            result["models"].append(r)
            if not args.json:
                print_model(r)
        if "frames512" in parts:
            r = frames_at(loaded, args.frames_prompt_tokens, args.frames_steps, args.seed, args.lens)
            result["frames512"] = r
            if not args.json:
                print_frames(r)

    if args.json:
        print(json.dumps(result, indent=2))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2) + "\n")
        log(f"wrote {args.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m inference``: trace a run, size a KV cache, serving experiments, print the payload schema.

    python -m inference trace --model bundled --prompt "What does mole mean?" --max-new-tokens 16
    python -m inference kv --config bundled --dtype float16 --tokens 2048
    python -m inference speculative --target bundled --draft inference/bundled_draft --prompt "What is a mole?" --k 4
    python -m inference speculative --target bundled --draft ngram --prompt "What is a mole?" --k 4
    python -m inference batch --model bundled --prompt "What is a mole?" --batch-sizes 1,2,4,8
    python -m inference quantize --model bundled --bits 8 --prompt "What is a mole?"
    python -m inference compare --model bundled --prompt "What is a mole?" --a temperature=0.2 --b temperature=1.3
    python -m inference compare --model bundled --prompt "What is a mole?" --a temperature=0 --b temperature=0 --b-int8
    python -m inference schema
"""
from __future__ import annotations

import argparse
import json
import sys

from .kvstats import DTYPE_BYTES, known_configs, kv_formula, kv_table, load_config_json


def trace(args) -> int:
    from .engine import GenerationSession
    from .loading import load_model
    from .prompting import build_prompt
    from .sampling import SamplingParams

    loaded = load_model(args.model, device=args.device)
    messages = json.loads(args.messages) if args.messages else None
    if args.prompt is not None:
        messages = [{"role": "user", "content": args.prompt}]
    input_ids = [int(x) for x in args.input_ids.split(",")] if args.input_ids else None
    prompt = build_prompt(loaded.tokenizer, messages=messages, text=args.text, input_ids=input_ids)
    params = SamplingParams.from_dict({"max_new_tokens": args.max_new_tokens, "temperature": args.temperature,
                                       "top_k": args.top_k, "top_p": args.top_p, "min_p": args.min_p,
                                       "repetition_penalty": args.repetition_penalty, "seed": args.seed})
    session = GenerationSession(loaded, prompt, params, lens=args.lens)
    emit(session.session_payload())
    emit(session.prefill())
    while not session.finished:
        emit(session.step())
    emit(session.done_payload())
    return 0


def emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def kv(args) -> int:
    if args.known:
        emit({"dtype": args.dtype, "rows": kv_table(known_configs(), [args.tokens], args.dtype)})
        return 0
    if not args.config:
        raise ValueError("kv needs --config (a config.json, a model folder, or bundled) or --known")
    emit(kv_formula(load_config_json(args.config), args.dtype, args.tokens))
    return 0


def prompt_of(loaded, args):
    """--prompt (one user message) or --messages (JSON), rendered with the model's chat template."""
    from .prompting import build_prompt

    messages = json.loads(args.messages) if args.messages else [{"role": "user", "content": args.prompt}]
    return build_prompt(loaded.tokenizer, messages=messages)


def prompt_ids(loaded, args) -> list[int]:
    return prompt_of(loaded, args).ids


def speculative(args) -> int:
    from .loading import load_model
    from .speculative import speculative_report

    from .speculative import NGRAM

    target = load_model(args.target, device=args.device)
    draft = NGRAM if args.draft == NGRAM else load_model(args.draft, device=args.device)
    emit(speculative_report(target, draft, prompt_ids(target, args), args.max_new_tokens, args.k,
                            temperature=args.temperature, seed=args.seed))
    return 0


def batch(args) -> int:
    from .batching import batch_experiment
    from .loading import load_model

    loaded = load_model(args.model, device=args.device)
    sizes = tuple(int(x) for x in args.batch_sizes.split(","))
    emit(batch_experiment(loaded, prompt_ids(loaded, args), sizes, args.max_new_tokens))
    return 0


def quantize(args) -> int:
    from .loading import load_model
    from .quantize import quantize_experiment

    loaded = load_model(args.model, device=args.device)
    emit(quantize_experiment(loaded, prompt_ids(loaded, args), args.bits, args.max_new_tokens))
    return 0


def compare(args) -> int:
    """Run A and run B step-locked: a line per step (both tokens, KL, JS, largest logit difference), then a summary."""
    from .compare import PairedRun, quantized_copy
    from .engine import GenerationSession
    from .loading import load_model
    from .sampling import SamplingParams

    loaded = load_model(args.model, device=args.device)
    other = load_model(args.b_model, device=args.device) if args.b_model else loaded
    other = quantized_copy(other, 8) if args.b_int8 else other
    sessions = []
    for model, settings in ((loaded, args.a), (other, args.b)):
        params = SamplingParams.from_dict({"max_new_tokens": args.max_new_tokens, "seed": args.seed, **settings})
        sessions.append(GenerationSession(model, prompt_of(model, args), params))
    pair = PairedRun(*sessions)
    pair.prefill()
    while not pair.finished:
        _a, _b, comparison = pair.step()
        if comparison is not None:
            emit({"type": "compare_step", **comparison.to_dict()})
    emit({"type": "compare_summary", **pair.summary()})
    return 0


def settings_arg(text: str) -> dict:
    """name=value,name=value (sampling parameters) as a dict of JSON values: temperature=0.2,seed=3."""
    pairs = [item.split("=", 1) for item in text.split(",") if item.strip()]
    if any(len(pair) != 2 for pair in pairs):
        raise argparse.ArgumentTypeError("use name=value,name=value")
    return {name.strip(): json.loads(value) for name, value in pairs}


def add_prompt(p: argparse.ArgumentParser) -> None:
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", help="one user message, rendered with the chat template")
    source.add_argument("--messages", help='JSON list of {"role", "content"}')
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--device", default="auto")


def schema(_args) -> int:
    from .wire.schema import schema_markdown

    sys.stdout.write(schema_markdown())
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m inference", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("trace", help="run a generation and print one JSON object per line")
    t.add_argument("--model", default=None, help="bundled (default), a local folder, or a hub id")
    source = t.add_mutually_exclusive_group(required=True)
    source.add_argument("--prompt", help="one user message, rendered with the chat template")
    source.add_argument("--messages", help='JSON list of {"role", "content"}')
    source.add_argument("--text", help="raw text, no chat template")
    source.add_argument("--input-ids", help="comma-separated ids fed exactly as given (no template, no BOS)")
    t.add_argument("--max-new-tokens", type=int, default=32)
    t.add_argument("--temperature", type=float, default=1.0)
    t.add_argument("--top-k", type=int, default=0)
    t.add_argument("--top-p", type=float, default=1.0)
    t.add_argument("--min-p", type=float, default=0.0)
    t.add_argument("--repetition-penalty", type=float, default=1.0)
    # The CLI keeps seed 0 by default so a trace is reproducible as typed; the site draws a fresh seed per run.
    t.add_argument("--seed", type=int, default=0, help="dice seed (default 0: the same trace every time; "
                   "the web site instead draws a fresh seed when a start has none)")
    t.add_argument("--device", default="auto")
    t.add_argument("--lens", choices=["auto", "all"], default="auto", help="logit lens on every layer, or a subset on large models")
    t.set_defaults(func=trace)
    k = sub.add_parser("kv", help="KV-cache bytes per token and for N tokens, from a config")
    k.add_argument("--config", help="a config.json, a model folder, or bundled")
    k.add_argument("--known", action="store_true", help="every shipped config (OPT-13B, Llama-2/3, Mistral, a 1M context)")
    k.add_argument("--dtype", default="float16", choices=sorted(DTYPE_BYTES))
    k.add_argument("--tokens", type=int, default=1)
    k.set_defaults(func=kv)
    sp = sub.add_parser("speculative", help="speculative decoding: a draft proposes k tokens, the target checks them")
    sp.add_argument("--target", required=True)
    sp.add_argument("--draft", required=True, help="a draft model (folder or spec) sharing the target's vocabulary, "
                    "or ngram: prompt lookup, proposals copied from earlier in the sequence")
    sp.add_argument("--k", type=int, default=4)
    sp.add_argument("--temperature", type=float, default=0.0)
    sp.add_argument("--seed", type=int, default=0)
    add_prompt(sp)
    sp.set_defaults(func=speculative)
    b = sub.add_parser("batch", help="the same prompt alone and batched: throughput and last-bit differences")
    b.add_argument("--model", default=None)
    b.add_argument("--batch-sizes", default="1,2,4,8")
    add_prompt(b)
    b.set_defaults(func=batch)
    q = sub.add_parser("quantize", help="weight-only quantization: bytes, decode speed, how far the logits move")
    q.add_argument("--model", default=None)
    q.add_argument("--bits", type=int, default=8)
    add_prompt(q)
    q.set_defaults(func=quantize)
    c = sub.add_parser("compare", help="two runs of one prompt, step-locked: where they part, KL, logit differences")
    c.add_argument("--model", default=None)
    c.add_argument("--a", type=settings_arg, default={}, help="run A's sampling parameters: temperature=0.2,top_p=0.9")
    c.add_argument("--b", type=settings_arg, default={}, help="run B's sampling parameters")
    c.add_argument("--b-model", default=None, help="run B on another model (default: the same)")
    c.add_argument("--b-int8", action="store_true", help="run B on the int8-weight copy (python -m inference quantize)")
    c.add_argument("--seed", type=int, default=0, help="both runs' seed unless --a/--b name one")
    add_prompt(c)
    c.set_defaults(func=compare)
    s = sub.add_parser("schema", help="print the payload field tables (docs/protocol.md)")
    s.set_defaults(func=schema)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, LookupError, RuntimeError, OSError) as exc:
        code = getattr(exc, "code", exc.__class__.__name__)
        emit({"type": "error", "code": code, "message": str(exc), "field": getattr(exc, "field", None)})  # the CLI's own line
        return 2


if __name__ == "__main__":
    sys.exit(main())

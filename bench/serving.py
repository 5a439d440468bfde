"""Serving figures on the bundled model, all measured in one run on this machine (never asserted):

- speculative decoding (bundled draft -> bundled target, and n-gram prompt lookup on the target, no draft
  model): acceptance, target passes saved, speed-up against the target's own greedy decoding, and whether
  the output is identical; n-gram on the article's prompt and on one whose reply repeats its text;
- weight-only quantization: int8 and int4 weight bytes and decode speed against float32;
- batching: throughput against batch size 1, and the last-bit logit differences.

    .venv/bin/python bench/serving.py [--target bundled] [--draft FOLDER|none] [--max-new-tokens 48] [--k 4] [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from inference.batching import batch_experiment  # noqa: E402
from inference.loading import load_model  # noqa: E402
from inference.prompting import build_prompt  # noqa: E402
from inference.quantize import quantize_experiment  # noqa: E402
from inference.speculative import NGRAM, speculative_report  # noqa: E402

ARTICLE = [{"role": "user", "content": "The mole on my face may need a biopsy. Explain this simply."}]
REPEATING = [{"role": "user", "content": "Copy this list exactly, one item per line: apples, pears, plums, cherries, "
              "apples, pears, plums, cherries."}]
DRAFT_DIR = Path(__file__).resolve().parents[1] / "inference" / "bundled_draft"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", default="bundled")
    p.add_argument("--draft", default=None, help="draft model folder (default: bundled_draft for the bundled target; "
                   "none: n-gram only)")
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    target = load_model(args.target)
    draft_spec = args.draft or (str(DRAFT_DIR) if args.target == "bundled" else "none")
    ids = build_prompt(target.tokenizer, messages=ARTICLE).ids
    spec = {}
    if draft_spec != "none":
        spec["draft model"] = speculative_report(target, load_model(draft_spec), ids, args.max_new_tokens, args.k)
    spec["n-gram, article prompt"] = speculative_report(target, NGRAM, ids, args.max_new_tokens, args.k)
    repeating = build_prompt(target.tokenizer, messages=REPEATING).ids
    spec["n-gram, repeating reply"] = speculative_report(target, NGRAM, repeating, args.max_new_tokens, args.k)
    quant = {bits: quantize_experiment(target, ids, bits, args.max_new_tokens) for bits in (8, 4)}
    batch = batch_experiment(target, ids, (1, 2, 4, 8), min(args.max_new_tokens, 24))
    result = {"speculative": {name: {k: v for k, v in r.items() if k != "rounds"} for name, r in spec.items()},
              "quantize": quant, "batch": batch}
    if args.json:
        print(json.dumps(result))
        return 0
    for name, r in spec.items():
        print(f"speculative, {name} (k={args.k}, {len(r['tokens'])} tokens): acceptance {r['acceptance_rate']:.2f} "
              f"of {r['proposed']} proposals, target passes {r['target_forward_passes']} vs {len(r['target_tokens'])} "
              f"tokens, speed-up {r['speedup']:.2f}x, identical to target greedy: {r['identical']}")
    for bits, q in quant.items():
        print(f"int{bits}: weights {q['weight_bytes_before']:,} -> {q['weight_bytes_after']:,} bytes "
              f"({q['weight_bytes_after'] / q['weight_bytes_before']:.2f}x), decode speed {q['decode_speed_ratio']:.2f}x "
              f"of float, max |logit diff| {q['max_abs_logit_diff']:.4f}, top-1 agreement {q['top1_agreement']:.3f}")
    for run in batch["runs"]:
        print(f"batch {run['batch_size']}: {run['tokens_per_s']:.1f} tokens/s "
              f"({batch['throughput_ratio'][run['batch_size']]:.2f}x of batch 1), "
              f"max |logit diff| vs batch 1 {run['max_abs_logit_diff']:.2e}, flipped tokens {run['flipped_tokens']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

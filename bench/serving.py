"""Serving figures on the bundled model, all measured in one run on this machine (never asserted):

- speculative decoding (bundled draft -> bundled target): acceptance, target passes saved, speed-up
  against the target's own greedy decoding, and whether the output is identical;
- weight-only quantization: int8 and int4 weight bytes and decode speed against float32;
- batching: throughput against batch size 1, and the last-bit logit differences.

    .venv/bin/python bench/serving.py [--max-new-tokens 48] [--k 4] [--json]
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
from inference.speculative import speculative_report  # noqa: E402

ARTICLE = [{"role": "user", "content": "The mole on my face may need a biopsy. Explain this simply."}]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", default="bundled")
    p.add_argument("--draft", default=str(Path(__file__).resolve().parents[1] / "inference" / "bundled_draft"))
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    target, draft = load_model(args.target), load_model(args.draft)
    ids = build_prompt(target.tokenizer, messages=ARTICLE).ids
    spec = speculative_report(target, draft, ids, args.max_new_tokens, args.k)
    quant = {bits: quantize_experiment(target, ids, bits, args.max_new_tokens) for bits in (8, 4)}
    batch = batch_experiment(target, ids, (1, 2, 4, 8), min(args.max_new_tokens, 24))
    result = {"speculative": {k: v for k, v in spec.items() if k != "rounds"}, "quantize": quant, "batch": batch}
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"speculative (k={args.k}, {len(spec['tokens'])} tokens): acceptance {spec['acceptance_rate']:.2f}, "
          f"target passes {spec['target_forward_passes']} vs {len(spec['target_tokens'])} tokens, "
          f"speed-up {spec['speedup']:.2f}x, identical to target greedy: {spec['identical']}")
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

"""Build the corpus, train tokenizer and model, evaluate, and write the bundled model folder.

    python -m inference.training.train --out inference/bundled            # the default model
    python -m inference.training.train --preset draft --tokenizer-from inference/bundled \
        --out inference/bundled_draft --steps 1400   # the speculative-decoding draft: same vocabulary

Seeded end to end: the same seed, steps and machine give the same weights.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import time
from pathlib import Path

import torch
from transformers import AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM

from .corpus import ARTICLE_PROMPT, build_exchanges
from .model_card import EVAL_PROMPTS, greedy_answers, write_model_card
from .tokenizer import END_TOKEN, PAD_TOKEN, train_tokenizer

PRESETS = {
    # Llama with grouped-query attention: 8 query heads share 2 key/value heads.
    "default": dict(hidden_size=256, intermediate_size=688, num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=2),
    "draft": dict(hidden_size=128, intermediate_size=344, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1),
}
WORDNET_LICENCE = Path("/usr/share/doc/wordnet-base/copyright")
WINDOW = 256  # training window, in tokens
CONTEXT = 512  # max_position_embeddings


def pack(tokenizer, conversations: list[list[dict]], window: int) -> torch.Tensor:
    """Concatenate rendered conversations and cut them into windows of window + 1 tokens."""
    texts = [tokenizer.apply_chat_template(c, tokenize=False) for c in conversations]
    ids = [i for row in tokenizer(texts, add_special_tokens=False)["input_ids"] for i in row]
    usable = (len(ids) // (window + 1)) * (window + 1)
    return torch.tensor(ids[:usable]).view(-1, window + 1)  # (windows, window + 1)


def build_model(tokenizer, preset: str) -> LlamaForCausalLM:
    config = LlamaConfig(
        vocab_size=len(tokenizer), max_position_embeddings=CONTEXT, tie_word_embeddings=True,
        eos_token_id=tokenizer.convert_tokens_to_ids(END_TOKEN), pad_token_id=tokenizer.convert_tokens_to_ids(PAD_TOKEN),
        bos_token_id=None, rms_norm_eps=1e-5, **PRESETS[preset],
    )
    return LlamaForCausalLM(config)


def learning_rate(step: int, steps: int, peak: float, warmup: int = 100) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


@torch.no_grad()
def validation_loss(model, windows: torch.Tensor, batch: int) -> float:
    model.eval()
    losses = [model(input_ids=w[:, :-1], labels=w[:, 1:].contiguous(), shift_labels=w[:, 1:].contiguous()).loss.item()
              for w in windows.split(batch)]
    model.train()
    return sum(losses) / len(losses)


def train(args) -> dict:
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    started = time.time()
    train_convs, valid_convs, held_out = build_exchanges(seed=args.seed)
    if args.max_conversations:
        train_convs = train_convs[: args.max_conversations]
    if args.tokenizer_from:  # reuse another model's tokenizer (a draft must share its target's vocabulary)
        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer_from)
    else:
        tokenizer = train_tokenizer((m["content"] for c in train_convs for m in c), vocab_size=args.vocab_size)
    data, valid = pack(tokenizer, train_convs, WINDOW), pack(tokenizer, valid_convs, WINDOW)[: args.valid_windows]
    model = build_model(tokenizer, args.preset)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    print(f"corpus: {len(train_convs)} train / {len(valid_convs)} valid exchanges, {data.numel():,} train tokens; "
          f"model: {model.num_parameters():,} parameters", flush=True)
    order = torch.randperm(len(data), generator=torch.Generator().manual_seed(args.seed))
    for step in range(args.steps):
        idx = order[(step * args.batch + torch.arange(args.batch)) % len(data)]
        batch = data[idx]  # (batch, window + 1)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, args.steps, args.lr)
        loss = model(input_ids=batch[:, :-1], shift_labels=batch[:, 1:].contiguous(), labels=batch[:, 1:].contiguous()).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % 50 == 0 or step == args.steps - 1:
            print(f"step {step}/{args.steps} loss {loss.item():.3f} ({time.time() - started:.0f}s)", flush=True)
    stats = {
        "seed": args.seed, "preset": args.preset, "tokenizer_from": args.tokenizer_from,
        "steps": args.steps, "batch": args.batch, "window": WINDOW,
        "tokens_seen": args.steps * args.batch * WINDOW, "train_tokens": data.numel(),
        "train_exchanges": len(train_convs), "valid_exchanges": len(valid_convs), "held_out_words": len(held_out),
        "valid_loss": round(validation_loss(model, valid, args.batch), 4),
        "parameters": model.num_parameters(), "training_seconds": round(time.time() - started),
    }
    save(model, tokenizer, Path(args.out))
    answers = greedy_answers(model, tokenizer, EVAL_PROMPTS + [f"What does {w} mean?" for w in held_out[:: max(1, len(held_out) // 4)][:4]])
    write_model_card(Path(args.out), stats, answers)
    print(json.dumps(stats), flush=True)
    print(f"{ARTICLE_PROMPT!r} -> {answers[0]['answer']!r} (ends with EOS: {answers[0]['ended_with_eos']})")
    return stats


def save(model, tokenizer, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    model.generation_config = GenerationConfig(eos_token_id=model.config.eos_token_id, pad_token_id=model.config.pad_token_id)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out, save_jinja_files=False)  # the template lives in tokenizer_config.json
    if WORDNET_LICENCE.exists():  # WordNet's licence asks for its notice on every copy
        shutil.copyfile(WORDNET_LICENCE, out / "LICENSE-WordNet")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="inference/bundled")
    p.add_argument("--preset", choices=sorted(PRESETS), default="default")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--vocab-size", type=int, default=4096)
    p.add_argument("--tokenizer-from", default=None, metavar="PATH",
                   help="load the tokenizer from this model folder instead of training one (--vocab-size is then unused)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--valid-windows", type=int, default=256)
    p.add_argument("--max-conversations", type=int, default=0, help="limit the corpus (for a quick smoke run)")
    train(p.parse_args(argv))


if __name__ == "__main__":
    main()

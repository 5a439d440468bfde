"""Greedy evaluation answers and the model card written beside the bundled weights."""
from __future__ import annotations

import json
from pathlib import Path

import torch

from .corpus import ARTICLE_PROMPT

EVAL_PROMPTS = [
    ARTICLE_PROMPT,
    "What does mole mean?",
    "Explain biopsy simply.",
    "What is a river bank?",
    "What does bank mean?",
    "Explain photosynthesis simply.",
    "What is a volcano?",
    "The rash on my arm may need a skin test. Explain this simply.",
    "She sat on the bank of the river. Explain this simply.",
    "Define happiness.",
]


@torch.no_grad()
def greedy_answers(model, tokenizer, prompts: list[str], max_new_tokens: int = 96) -> list[dict]:
    model.eval()
    rows = []
    for prompt in prompts:
        ids = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                            return_tensors="pt", return_dict=True)["input_ids"]
        out = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False,
                             eos_token_id=model.config.eos_token_id, pad_token_id=model.config.pad_token_id)
        new = out[0, ids.shape[1]:].tolist()
        rows.append({"prompt": prompt, "answer": tokenizer.decode(new, skip_special_tokens=True).strip(),
                     "ended_with_eos": bool(new) and new[-1] == model.config.eos_token_id})
    return rows


def write_model_card(out: Path, stats: dict, answers: list[dict]) -> None:
    rows = "\n".join(f"| {a['prompt']} | {a['answer'].replace('|', '/')} | {'yes' if a['ended_with_eos'] else 'no'} |"
                     for a in answers)
    (out / "training_stats.json").write_text(json.dumps({**stats, "answers": answers}, indent=2) + "\n")
    (out / "README.md").write_text(f"""# Hit Enter's bundled model: a tiny dictionary that chats

A {stats['parameters']:,}-parameter Llama (RMSNorm, rotary positions, SwiGLU, grouped-query attention),
trained from scratch on CPU by `python -m inference.training.train` (seed {stats['seed']}, preset `{stats['preset']}`).

## Data and licence
Chat exchanges generated from **WordNet 3.0** (Debian's `wordnet-base`): "What does *word* mean?",
"Explain *word* simply.", WordNet's example sentences asked about in context, and prompts shaped like the
article's own ("The *spot* on my *body part* may need a *procedure*. Explain this simply."), each answered
from WordNet's glosses. The article's exact prompt and {stats['held_out_words']:,} held-out words are kept
out of training. WordNet's licence permits redistribution with its notice: see `LICENSE-WordNet` beside
this file. The model and code are released with the project.

## Size and training
| | |
|---|---|
| parameters | {stats['parameters']:,} |
| training windows | {stats['window']} tokens, batch {stats['batch']}, {stats['steps']:,} steps |
| tokens seen | {stats['tokens_seen']:,} (corpus: {stats['train_tokens']:,} tokens, {stats['train_exchanges']:,} exchanges) |
| training time | {stats['training_seconds']:,} s on 2 CPU cores |
| validation loss | {stats['valid_loss']} (held-out words + 1% of exchanges, {stats['valid_exchanges']:,} exchanges) |

## Greedy answers
| prompt | answer | ends with `<|end|>` |
|---|---|---|
{rows}
""")

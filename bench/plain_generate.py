"""The baseline bench/load.py measures in the same run: plain `model.generate` on the same weights, no server.

The model is loaded as the server loads it (inference.loading.load_model: the same attention implementation,
device and dtype), each prompt is built with the same chat template, and generation is greedy with exactly
`max_new_tokens` new tokens (min_new_tokens too, as the load bench's visitors ask). Its tokens are the greedy
reference the served runs are compared with. Figures only.
"""
from __future__ import annotations

import gc
import statistics
import time
from dataclasses import dataclass, field

import torch

# 32 short questions, one per visitor: they share only the chat template's system prompt (issue 24).
QUESTIONS = [
    "How do rainbows form?", "Why is the sky blue?", "What is a black hole?", "How do bees make honey?",
    "Why do cats purr?", "What causes thunder?", "How does a vaccine work?", "Why do leaves change colour?",
    "What is photosynthesis?", "How do airplanes stay up?", "Why is the ocean salty?", "What are tides?",
    "How do magnets work?", "What is a volcano?", "Why do we dream?", "How does the heart pump blood?",
    "What is an atom?", "Why do stars twinkle?", "How do plants drink water?", "What is gravity?",
    "How is glass made?", "Why do onions make you cry?", "What is a rainforest?", "How do fish breathe?",
    "What makes a desert?", "Why does ice float?", "How do birds migrate?", "What is electricity?",
    "How are clouds formed?", "Why do we sneeze?", "What is a comet?", "How does soap clean?",
]


@dataclass
class PlainGenerate:
    """What plain generate measured: per prompt, the whole call and its decode share."""
    attn_implementation: str
    max_new_tokens: int
    linear_kernel: str = "default"  # what the linear layers ran on, as the server's (inference/cpu_linear.py)
    seconds: list[float] = field(default_factory=list)  # one generate(max_new_tokens) per prompt
    first_seconds: list[float] = field(default_factory=list)  # one generate(1 token) per prompt: prefill + 1
    tokens: list[list[int]] = field(default_factory=list)  # the greedy reference of each prompt

    def summary(self) -> dict:
        n = self.max_new_tokens
        decode_ms = [1000 * (t - f) / (n - 1) for t, f in zip(self.seconds, self.first_seconds)] if n > 1 else []
        return {"attn_implementation": self.attn_implementation, "linear_kernel": self.linear_kernel,
                "prompts": len(self.seconds),
                "ms_per_token_p50": statistics.median(decode_ms) if decode_ms else None,
                "first_token_ms_p50": 1000 * statistics.median(self.first_seconds),
                "tokens_per_s": n * len(self.seconds) / sum(self.seconds)}


@torch.no_grad()
def measure(spec: str, prompts: list[str], max_new_tokens: int, warmup: int = 1) -> PlainGenerate:
    """Greedy generate over each prompt, alone, on the server's way of loading `spec`; frees the model after."""
    from inference.loading import load_model
    from inference.prompting import build_prompt

    loaded = load_model(spec, device="auto")
    model, tokenizer = loaded.model, loaded.tokenizer
    result = PlainGenerate(model.config._attn_implementation, max_new_tokens, loaded.description.linear_kernel)
    try:
        def generate(ids: torch.Tensor, n: int) -> tuple[float, list[int]]:
            started = time.perf_counter()
            out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=n,
                                 min_new_tokens=n, pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id)
            if ids.device.type == "cuda":
                torch.cuda.synchronize()
            return time.perf_counter() - started, out[0, ids.shape[1]:].tolist()

        for k, text in enumerate(prompts):
            prompt = build_prompt(tokenizer, messages=[{"role": "user", "content": text}])
            ids = torch.tensor([prompt.ids], device=model.device)
            for _ in range(warmup if k == 0 else 0):
                generate(ids, max_new_tokens)
            result.first_seconds.append(generate(ids, 1)[0])
            seconds, tokens = generate(ids, max_new_tokens)
            result.seconds.append(seconds)
            result.tokens.append(tokens)
    finally:
        del model, loaded
        gc.collect()
    return result

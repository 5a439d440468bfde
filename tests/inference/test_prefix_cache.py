"""The prefix cache (issue 24 point 3): a prefill that starts from a cached prefix sends what a full prefill
sends, and the run goes on exactly: greedy tokens identical, logits within 1e-4 (float32 CPU)."""
import asyncio
from dataclasses import replace

import pytest
import torch

from inference import batched_prefill as bp
from inference.engine import GenerationSession
from inference.prefix_cache import PrefixCache
from inference.prompting import build_prompt, content_ranges
from inference.sampling import SamplingParams
from inference.scheduler import StepScheduler
from tests.inference.arch_helpers import arch_config, tiny_loaded
from tests.inference.test_scheduler import DEVICE, close

STEPS = 10
BUDGET = 64 * 2**20
SHARED = [1, 40, 47, 26, 30, 31, 32, 34, 35, 36, 37, 38]  # ids every test vocabulary has (the tiny ones: 128)


def with_cache(loaded, budget: int = BUDGET):
    return replace(loaded, prefix_cache=PrefixCache(budget))


def run(loaded, prompt, steps: int = STEPS):
    """Prefill and greedy steps: (session, prefill payload, step payloads, each forward's logits)."""
    s = GenerationSession(loaded, prompt, SamplingParams(max_new_tokens=steps, temperature=0.0))
    prefill = s.prefill()
    logits = [s.pending.logits.clone()]
    payloads = []
    while not s.finished:
        payloads.append(s.step())
        if s.pending is not None and not s.finished:
            logits.append(s.pending.logits.clone())
    return s, prefill, payloads, logits


def same_run(cached, plain) -> None:
    """The cached run's prefill, steps and logits equal the plain run's."""
    (s, prefill, steps, logits), (p, prefill0, steps0, logits0) = cached, plain
    assert s.generated == p.generated
    for a, b in zip(logits, logits0):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-4)
    strip = ("cached_tokens", "prefix_cache")
    close({k: v for k, v in prefill.items() if k not in strip}, {k: v for k, v in prefill0.items() if k not in strip}, "prefill")
    torch.testing.assert_close(s.kept.get(0, "attn").float(), p.kept.get(0, "attn").float(), rtol=1e-2, atol=1e-3)
    for n, (a, b) in enumerate(zip(steps, steps0)):
        close(untied(a), untied(b), f"step {n + 1}")


def untied(payload):
    """The payload with each lens row's tokens in (probability, id) order, without the row's lowest probability:
    rows of tiny models hold exact ties (0.0039, 0.0039) whose order, and which of them make the top 5, a
    last-bit difference may swap (the logits themselves are compared within 1e-4)."""
    if isinstance(payload, dict):
        if "ids" in payload and "probs" in payload:  # and the lists that run beside them (texts)
            floor = min(payload["probs"], default=0)  # a tie at the cut decides which tokens make the list: left out
            order = sorted((n for n, p in enumerate(payload["probs"]) if p > floor),
                           key=lambda n: (-payload["probs"][n], payload["ids"][n]))
            beside = [k for k, v in payload.items() if isinstance(v, list) and len(v) == len(payload["ids"])]
            return {**payload, **{k: [payload[k][n] for n in order] for k in beside}}
        return {k: untied(v) for k, v in payload.items()}
    return [untied(v) for v in payload] if isinstance(payload, list) else payload


def ids_prompt(loaded, ids):
    return build_prompt(loaded.tokenizer, input_ids=ids)


@pytest.mark.parametrize("name", ["llama", "gpt2", "qwen2"])
def test_a_prefill_from_a_shared_prefix_is_exact_on_tiny_architectures(name):
    plain = tiny_loaded(arch_config(name))
    cached = with_cache(plain)
    first = run(cached, ids_prompt(plain, SHARED + [20, 21, 22]))
    assert first[1]["cached_tokens"] == 0 and first[1]["prefix_cache"]["hits"] == 0
    prompt = ids_prompt(plain, SHARED + [30, 31, 32, 33])
    second = run(cached, prompt)
    assert second[1]["cached_tokens"] == len(SHARED)  # computed once, by the first visitor's prefill
    assert second[0].prefill_chunked == [len(SHARED), 4] and second[0].prefill_hidden is None  # the check: lone passes
    assert second[1]["prefix_cache"]["hits"] == 1 and second[1]["prefix_cache"]["tokens_saved"] == len(SHARED)
    same_run(second, run(plain, prompt))


def test_a_repeated_prompt_computes_only_its_last_token(stories):
    cached = with_cache(stories)
    prompt = ids_prompt(stories, SHARED)
    run(cached, prompt)
    again = run(cached, prompt)
    assert again[1]["cached_tokens"] == len(SHARED) - 1  # the last prompt token's logits are always computed
    same_run(again, run(stories, prompt))


def test_smollm2_visitors_share_the_templates_system_prompt(smollm2):
    """Two different questions share only the template's system prompt: the second prefill computes the rest,
    and its greedy reply and logits equal a prefill without the cache."""
    cached = with_cache(smollm2)
    first = build_prompt(smollm2.tokenizer, messages=[{"role": "user", "content": "How do rainbows form?"}])
    second = build_prompt(smollm2.tokenizer, messages=[{"role": "user", "content": "Why is the sky blue?"}])
    shared = next(i for i, (a, b) in enumerate(zip(first.ids, second.ids)) if a != b)
    (typed_at, _), = content_ranges(second)
    assert shared >= 20 and second.offsets[shared][0] == typed_at  # the system prompt and the user header: all template
    run(cached, first, steps=1)
    again = run(cached, second, steps=6)
    assert again[1]["cached_tokens"] == shared  # every token of the template before the visitor's words
    same_run(again, run(smollm2, second, steps=6))


def test_a_sliding_window_model_keeps_no_prefixes():
    """Mistral's sliding window: its cache is not plain positions, so nothing is kept or reused."""
    cached = with_cache(tiny_loaded(arch_config("mistral")))
    run(cached, ids_prompt(cached, SHARED + [5]))
    again = run(cached, ids_prompt(cached, SHARED + [6]))
    assert again[1]["cached_tokens"] == 0 and cached.prefix_cache.stats().entries == 0


def test_the_cache_stays_within_its_bytes_and_drops_the_least_recently_used(stories):
    one = with_cache(stories)
    run(one, ids_prompt(stories, SHARED), steps=1)
    block = one.prefix_cache.bytes  # what one 12-token prompt holds
    cached = with_cache(stories, budget=int(block * 2.5))
    prompts = [[1] + [100 + 20 * n + i for i in range(11)] for n in range(3)]  # share only the first token
    for ids in prompts:
        run(cached, ids_prompt(stories, ids), steps=1)
        assert cached.prefix_cache.bytes <= cached.prefix_cache.budget_bytes
    stats = cached.prefix_cache.stats()
    assert stats.evicted_tokens > 0
    oldest, newest = (run(cached, ids_prompt(stories, ids + [7]), steps=1)[1]["cached_tokens"] for ids in (prompts[0], prompts[2]))
    assert oldest == 1 and newest == len(prompts[2])  # the first prompt's own tokens went first; the shared <s> stayed


def test_off_at_zero_bytes_and_never_shared_across_models(stories, bundled):
    off = with_cache(stories, budget=0)
    run(off, ids_prompt(stories, SHARED), steps=1)
    again = run(off, ids_prompt(stories, SHARED), steps=1)
    assert again[1]["cached_tokens"] == 0 and again[1]["prefix_cache"] is None
    a, b = with_cache(stories), with_cache(bundled)
    run(a, ids_prompt(stories, SHARED), steps=1)
    assert run(b, ids_prompt(bundled, SHARED), steps=1)[1]["cached_tokens"] == 0  # each model its own cache


def test_a_fork_at_step_1_prefills_from_the_cache_and_stays_exact(stories):
    cached = with_cache(stories)
    s = GenerationSession(cached, ids_prompt(stories, SHARED), SamplingParams(max_new_tokens=4, temperature=0.0))
    s.prefill()
    s.step()
    forked = s.fork(1, 500)
    assert s.cached_tokens == len(SHARED) - 1 and forked["token"]["id"] == 500
    p = GenerationSession(stories, ids_prompt(stories, SHARED), SamplingParams(max_new_tokens=4, temperature=0.0))
    p.prefill()
    p.step()
    close(forked, p.fork(1, 500), "forked step 1")


@pytest.mark.parametrize("name", ["stories", "gpt2"])
def test_visitors_prefilled_together_from_their_cached_prefixes_match_their_lone_runs(name, request):
    """A batched prefill where some rows start from cached prefixes of different lengths and one from nothing:
    each row's prefill and steps equal its lone run without the cache."""
    plain = request.getfixturevalue("stories") if name == "stories" else tiny_loaded(arch_config(name))
    cached = with_cache(plain)
    run(cached, ids_prompt(plain, SHARED), steps=1)
    run(cached, ids_prompt(plain, [1, 50, 51, 52, 53]), steps=1)
    prompts = [SHARED + [60, 61], SHARED[:5] + [62], [1, 50, 51, 52, 53, 54, 55, 56], [70, 71, 72]]
    params = SamplingParams(max_new_tokens=6, temperature=0.0)
    sessions = [GenerationSession(cached, ids_prompt(plain, ids), params) for ids in prompts]
    payloads = bp.prefill_all(sessions)
    assert not any(isinstance(p, Exception) for p in payloads), payloads
    assert [p["cached_tokens"] for p in payloads] == [len(SHARED), 5, 5, 0]
    assert [p["batch_size"] for p in payloads] == [4] * 4  # one pass for all four
    strip = ("cached_tokens", "prefix_cache", "batch_size")
    for ids, s, payload in zip(prompts, sessions, payloads):
        lone = GenerationSession(plain, ids_prompt(plain, ids), params)
        alone = lone.prefill()
        assert s.cache.get_seq_length() == len(ids)  # its prefix and its new tokens, no padding kept
        close({k: v for k, v in payload.items() if k not in strip}, {k: v for k, v in alone.items() if k not in strip}, "prefill")
        torch.testing.assert_close(s.pending.logits, lone.pending.logits, rtol=0, atol=1e-4)
        while not lone.finished:
            close(untied(s.step()), untied(lone.step()), f"step {lone.step_index}")
        assert s.generated == lone.generated


def test_the_saving_is_measured_on_a_private_cache_with_the_visitors_prefix(stories):
    from inference.prefix_saving import prefix_saving
    cached = with_cache(stories)
    ids = SHARED + [60, 61, 62]
    data = prefix_saving(cached, ids, cached=len(SHARED), repeats=2)
    assert data["cached_tokens"] == len(SHARED) and data["prompt_tokens"] == len(ids) and data["repeats"] == 2
    assert data["with_ms"] > 0 and data["without_ms"] > 0 and data["with_forward_ms"] > 0
    assert data["saved_ms"] == pytest.approx(data["without_ms"] - data["with_ms"], abs=2e-3)
    assert cached.prefix_cache.stats().lookups == 0  # the server's own cache (and its figures) untouched
    assert prefix_saving(cached, ids, cached=0, repeats=1)["cached_tokens"] == 0  # nothing cached: nothing taken
    assert prefix_saving(cached, ids, cached=len(ids) + 5, repeats=1)["cached_tokens"] == len(ids) - 1  # the last is computed


async def test_a_prefill_pass_counts_only_the_positions_it_computes_after_each_cached_prefix(stories):
    """The pass budget (EXPLAINER_PREFILL_BATCH_TOKENS) counts rows x the longest part left after each prompt's cached
    prefix: two visitors who share a cached 12-token prefix and add 2 and 3 tokens of their own fit a budget of 6
    (2 rows x 3) in one pass; counting whole prompts (2 x 15) would have split them."""
    cached = with_cache(stories)
    run(cached, ids_prompt(stories, SHARED), steps=1)
    visitors = [GenerationSession(cached, ids_prompt(stories, SHARED + extra), SamplingParams(max_new_tokens=2, temperature=0.0))
                for extra in ([20, 21], [30, 31, 32])]
    assert [v.prompt_left() for v in visitors] == [2, 3]
    loop = asyncio.get_running_loop()
    scheduler = StepScheduler(lambda fn: loop.run_in_executor(DEVICE, fn), max_batch=8, max_wait_s=0.001, prefill_tokens=6)
    prefills = await asyncio.gather(*(scheduler.prefill(v) for v in visitors))
    assert [p["batch_size"] for p in prefills] == [2, 2] and scheduler.prefill_passes == 1
    assert [p["cached_tokens"] for p in prefills] == [len(SHARED)] * 2
    lone = StepScheduler(lambda fn: loop.run_in_executor(DEVICE, fn), max_batch=8, max_wait_s=0.001, prefill_tokens=5)
    again = [GenerationSession(cached, ids_prompt(stories, SHARED + extra), SamplingParams(max_new_tokens=2, temperature=0.0))
             for extra in ([40, 41], [50, 51, 52])]
    assert [p["batch_size"] for p in await asyncio.gather(*(lone.prefill(v) for v in again))] == [1, 1]  # 2 x 3 > 5
    for v in visitors + again:
        v.close()

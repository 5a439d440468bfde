"""Visitors who press Enter together are prefilled in one batched pass (issue 14): each one's prefill, check
and steps equal its lone run."""
import asyncio

import pytest
import torch

from inference import batched_prefill as bp
from inference.article_checks import causal_change, causal_mask_check
from inference.scheduler import StepScheduler
from tests.inference.arch_helpers import arch_config, tiny_loaded
from tests.inference.test_scheduler import DEVICE, PROMPTS, close, session

WORDY = [1, 403, 407, 260, 300, 301, 302, 340, 341, 342]  # has a later word-like token for the causal check


def prefilled_together(loaded, prompts):
    sessions = [session(loaded, ids, temperature=0.0) for ids in prompts]
    payloads = bp.prefill_all(sessions)
    assert not any(isinstance(p, Exception) for p in payloads), payloads
    return sessions, payloads


@pytest.mark.parametrize("model", ["stories", "bundled"])
def test_prompts_of_different_lengths_prefilled_together_match_their_lone_runs(model, request):
    loaded = request.getfixturevalue(model)
    prompts = PROMPTS + [WORDY]
    sessions, payloads = prefilled_together(loaded, prompts)
    for ids, s, payload in zip(prompts, sessions, payloads):
        lone = session(loaded, ids, temperature=0.0)
        alone = lone.prefill()
        assert payload["batch_size"] == len(prompts) and alone["batch_size"] == 1
        assert payload["mask"]["size"] == len(ids) and s.cache.get_seq_length() == len(ids)  # no padding kept
        close({k: v for k, v in payload.items() if k != "batch_size"}, {k: v for k, v in alone.items() if k != "batch_size"}, "prefill")
        torch.testing.assert_close(s.kept.get(0, "attn").float(), lone.kept.get(0, "attn").float(), rtol=1e-2, atol=1e-3)
        while not lone.finished:  # and the run goes on from its own cache exactly as alone
            close(s.step(), lone.step(), f"step {lone.step_index}")
        assert s.generated == lone.generated


@pytest.mark.parametrize("model", ["stories", "bundled"])
def test_the_pass_holds_only_the_visitors_prompts_and_their_checks_hold_later(model, request):
    """No causal-mask twin rides in the pass (issue 24: it doubled the work before a lone visitor's first token):
    a batch of several keeps no residuals for the check (its rows may differ from a lone pass in the last bit),
    a batch of one keeps them, and the check (run after the first token, on lone passes) holds either way."""
    loaded = request.getfixturevalue(model)
    sessions, payloads = prefilled_together(loaded, [PROMPTS[1], WORDY, PROMPTS[2]])
    assert [p["batch_size"] for p in payloads] == [3, 3, 3]
    assert all(s.prefill_batched and s.prefill_hidden is None for s in sessions)
    (alone,), _ = prefilled_together(loaded, [WORDY])
    assert alone.prefill_batched and alone.prefill_hidden is not None
    for s in sessions + [alone]:
        position, replacement = causal_change(s.prompt.ids, s.special_ids, s.tokenizer.decode, s.description.vocab_size)
        check = causal_mask_check(loaded, s.prompt.ids, position, replacement, s.prefill_hidden)
        fresh = causal_mask_check(loaded, s.prompt.ids, position, replacement)  # two lone passes
        assert fresh["earlier_unchanged"] and fresh["max_abs_change"][:position] == [0.0] * position
        assert check["max_abs_change"][position:] == pytest.approx(fresh["max_abs_change"][position:], rel=1e-3, abs=1e-4)


def test_a_model_whose_cache_slides_prefills_alone():
    loaded = tiny_loaded(arch_config("mistral"))
    prompts = [[1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14], [1, 5, 6]]
    sessions, payloads = prefilled_together(loaded, prompts)
    assert [p["batch_size"] for p in payloads] == [1, 1] and loaded.model in bp._alone
    lone = session(loaded, prompts[0], temperature=0.0)
    close(payloads[0], lone.prefill(), "prefill")


def test_a_long_prompt_is_not_batched_and_a_failed_pass_falls_back(stories, monkeypatch):
    long_one = session(stories, [1] + list(range(300, 300 + bp.MOST_PROMPT_TOKENS)), temperature=0.0)
    short = session(stories, PROMPTS[1], temperature=0.0)
    assert not long_one.prefill_fits_one_pass(bp.MOST_PROMPT_TOKENS) and short.prefill_fits_one_pass(bp.MOST_PROMPT_TOKENS)

    def out_of_memory(_sessions):
        raise RuntimeError("out of memory")
    monkeypatch.setattr(bp, "batched_prefill", out_of_memory)
    payloads = bp.prefill_all([long_one, short])
    assert [p["batch_size"] for p in payloads] == [1, 1] and short.cache.get_seq_length() == len(PROMPTS[1])


async def test_the_scheduler_prefills_waiting_visitors_in_one_pass_within_its_token_budget(stories):
    loop = asyncio.get_running_loop()
    scheduler = StepScheduler(lambda fn: loop.run_in_executor(DEVICE, fn), max_batch=8, max_wait_s=0.001,
                              prefill_tokens=2 * len(PROMPTS[2]))  # two sessions of the longest
    sessions = [session(stories, ids, temperature=0.0) for ids in PROMPTS + [PROMPTS[2]]]
    payloads = await asyncio.gather(*(scheduler.prefill(s) for s in sessions))
    assert [p["batch_size"] for p in payloads] == [2, 2, 2, 2] and scheduler.prefill_passes == 2
    steps = await asyncio.gather(*(scheduler.step(s) for s in sessions))  # step 1 samples from each own prefill
    assert [p["step"] for p in steps] == [1, 1, 1, 1] and scheduler.prefilled == 4

"""The sampling pipeline is transformers' own processors, in transformers' order, validated like vLLM."""
import math

import pytest
import torch
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

from inference.sampling import (
    FrequencyPenaltyLogitsProcessor,
    ParamError,
    PresencePenaltyLogitsProcessor,
    SamplingParams,
    dice_roll,
    run_stages,
    sample_token,
)


@pytest.fixture(scope="module")
def tiny_model():
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
    return LlamaForCausalLM(config).eval()


@pytest.mark.parametrize("params", [
    dict(temperature=0.7, top_k=10, top_p=0.9, min_p=0.05, repetition_penalty=1.3),
    dict(temperature=1.5, top_k=3),
    dict(temperature=0.5, top_p=0.5),
    dict(temperature=1.0, min_p=0.2, repetition_penalty=0.8),
])
def test_final_distribution_equals_generate_processors(tiny_model, params):
    torch.manual_seed(1)
    logits = torch.randn(1, 64) * 3
    input_ids = torch.tensor([[3, 5, 5, 9, 12]])
    expected_list = tiny_model._get_logits_processor(
        GenerationConfig(do_sample=True, **params), input_ids_seq_length=input_ids.shape[1], device="cpu")
    expected = expected_list(input_ids, logits.clone())
    ours, stages = run_stages(input_ids, logits[0], SamplingParams(**params), prompt_length=2)
    assert torch.equal(torch.isfinite(ours), torch.isfinite(expected))
    finite = torch.isfinite(expected)
    assert torch.allclose(ours[finite], expected[finite])
    assert [s["name"] for s in stages] == ["repetition_penalty", "presence_penalty", "frequency_penalty",
                                          "temperature", "top_k", "top_p", "min_p"]
    assert stages[-1]["survivors"] == int(finite.sum())
    survivors = [s["survivors"] for s in stages]
    assert survivors == sorted(survivors, reverse=True)  # each stage only removes candidates


def test_presence_and_frequency_follow_openai_definition():
    input_ids = torch.tensor([[1, 2, 7, 7, 7, 4]])  # prompt = first 2 tokens; 7 generated three times, 4 once
    scores = torch.zeros(1, 10)
    presence = PresencePenaltyLogitsProcessor(0.5, prompt_length=2)(input_ids, scores)
    frequency = FrequencyPenaltyLogitsProcessor(0.25, prompt_length=2)(input_ids, scores)
    assert presence[0, 7] == -0.5 and presence[0, 4] == -0.5 and presence[0, 1] == 0  # prompt tokens don't count
    assert frequency[0, 7] == -0.75 and frequency[0, 4] == -0.25 and frequency[0, 2] == 0


def test_draw_lands_where_u_falls_on_the_cumulative_distribution():
    logits = torch.tensor([2.0, 1.0, 0.5, -1.0])
    result = sample_token(torch.tensor([[0]]), logits, SamplingParams(temperature=1.0, seed=42), prompt_length=1, step=1)
    u = dice_roll(42, 1)
    probs = torch.softmax(logits.double(), -1)
    order = torch.argsort(probs, descending=True)
    cumulative = torch.cumsum(probs[order], 0)
    expected = int(order[int((cumulative <= u).sum())])
    assert result.token_id == expected
    assert result.draw["cumulative_before"] <= u < result.draw["cumulative_after"] + 1e-9
    assert math.isclose(result.prob, float(probs[expected]), rel_tol=1e-6)  # float32 softmax


def test_greedy_takes_argmax_and_rolls_no_dice():
    logits = torch.tensor([0.1, 3.0, 2.9])
    result = sample_token(torch.tensor([[0]]), logits, SamplingParams(temperature=0), prompt_length=1, step=1)
    assert result.token_id == 1 and result.draw is None


@pytest.mark.parametrize("field,value,code", [
    ("temperature", 2.5, "out_of_range"), ("temperature", -0.1, "out_of_range"), ("temperature", "hot", "wrong_type"),
    ("temperature", float("nan"), "out_of_range"), ("top_p", 0.0, "out_of_range"), ("top_p", 1.5, "out_of_range"),
    ("top_k", -1, "out_of_range"), ("top_k", 2.5, "wrong_type"), ("min_p", 1.1, "out_of_range"),
    ("repetition_penalty", 0.0, "out_of_range"), ("repetition_penalty", 1e-39, "out_of_range"),
    ("repetition_penalty", 0.0099, "out_of_range"), ("presence_penalty", 3.0, "out_of_range"),
    ("frequency_penalty", -2.5, "out_of_range"), ("max_new_tokens", 0, "out_of_range"),
    ("seed", 1.5, "wrong_type"), ("seed", True, "wrong_type"), ("bogus", 1, "unknown_param"),
])
def test_bad_params_name_field_and_range(field, value, code):
    with pytest.raises(ParamError) as info:
        SamplingParams.from_dict({field: value})
    assert info.value.field == field and info.value.code == code
    assert field in str(info.value)


def test_max_new_tokens_cap():
    with pytest.raises(ParamError, match=r"max_new_tokens: must be \[1, 100\]"):
        SamplingParams.from_dict({"max_new_tokens": 101}, max_new_tokens_cap=100)


def test_the_repetition_penalty_message_names_the_field_and_range():
    with pytest.raises(ParamError, match=r"repetition_penalty: must be in \[0\.01, 10\], got 1e-39"):
        SamplingParams.from_dict({"repetition_penalty": 1e-39})


@pytest.mark.parametrize("extreme", [
    dict(repetition_penalty=0.01, temperature=0.01, top_p=5e-324, presence_penalty=-2.0, frequency_penalty=-2.0),
    dict(repetition_penalty=10.0, temperature=2.0, min_p=1.0, presence_penalty=2.0, frequency_penalty=2.0),
    dict(repetition_penalty=0.01, temperature=2.0, top_k=1, min_p=0.0),
])
def test_every_number_stays_finite_at_the_edges_of_the_ranges(stories, extreme):
    """The ranges are chosen so no allowed combination yields NaN or infinity (strict JSON encodes)."""
    import json

    from inference.engine import GenerationSession
    from inference.prompting import build_prompt

    prompt = build_prompt(stories.tokenizer, text="<t403> <t407> <t403> <t403>")
    session = GenerationSession(stories, prompt, SamplingParams.from_dict({**extreme, "max_new_tokens": 4}))
    payloads = [session.prefill()] + [session.step() for _ in range(4)]
    for payload in payloads:
        json.dumps(payload, allow_nan=False)  # raises on NaN or infinity anywhere


@pytest.mark.parametrize("params, message", [
    ({"max_new_tokens": 8, "min_new_tokens": 9}, r"min_new_tokens: must be \[0, 8\], got 9"),
    ({"min_new_tokens": -1}, r"min_new_tokens: must be \[0, 64\], got -1"),
    ({"min_new_tokens": 2.5}, r"min_new_tokens: must be an integer, not float"),
])
def test_min_new_tokens_is_validated_with_its_name_and_range(params, message):
    with pytest.raises(ParamError, match=message):
        SamplingParams.from_dict(params)


def test_min_new_tokens_keeps_eos_from_ending_the_reply_early(bundled):
    """The reply the bundled model ends by EOS runs on to max_new_tokens when min_new_tokens asks for it
    (the browser control tests rely on it: a run that cannot end before the test presses its button)."""
    from inference.engine import GenerationSession
    from inference.prompting import build_prompt

    def run(**params):
        prompt = build_prompt(bundled.tokenizer, messages=[{"role": "user", "content": "Hello"}])
        session = GenerationSession(bundled, prompt, SamplingParams.from_dict({"temperature": 0, **params}))
        session.prefill()
        while not session.finished:
            session.step()
        return session

    free = run(max_new_tokens=200)
    assert free.finished == "eos", "the bundled model ends this reply by EOS"
    held = run(max_new_tokens=len(free.generated) + 8, min_new_tokens=len(free.generated) + 8)
    assert held.finished == "max_new_tokens" and len(held.generated) == len(free.generated) + 8
    assert not set(held.generated) & held.eos_ids
    assert held.generated[: len(free.generated) - 1] == free.generated[:-1]  # the same reply up to where EOS was


def test_tied_top_logits_rank_in_id_order_so_greedy_takes_the_first_and_the_top_row_agrees():
    """bf16 logits on CUDA tie often; topk orders ties as it likes (on the CPU too: [30000, 500, 40000, 10] here),
    which made the greedy token and the payload's top row disagree on the GPU."""
    from inference.capture import top_tokens

    logits = torch.zeros(50_000)
    logits[[40_000, 10, 500, 30_000]] = 3.0
    result = sample_token(torch.tensor([[0]]), logits, SamplingParams(temperature=0), prompt_length=1, step=1)
    assert result.token_id == int(logits.argmax()) == 10
    assert result.probs_top[0] == (10, 1.0)  # temperature 0: all the mass on argmax's pick
    assert [row[0] for row in top_tokens(logits[None], 4)[0]] == [10, 500, 30_000, 40_000]


@pytest.mark.parametrize("generated", [0, 3, 4, 9])
def test_min_new_tokens_masks_exactly_as_transformers_processor_with_its_mask_made_once(generated):
    """MinNewTokens keeps transformers' MinNewTokensLengthLogitsProcessor's scores, its EOS mask made once per
    vocabulary (transformers builds it at every call); past min_new_tokens the scores are a copy, as there."""
    from transformers import MinNewTokensLengthLogitsProcessor

    from inference.sampling import MinNewTokens
    prompt, eos = 5, [2, 7, 40]
    input_ids = torch.arange(prompt + generated)[None] % 50  # (1, prompt + generated)
    scores = torch.randn(1, 50)
    theirs = MinNewTokensLengthLogitsProcessor(prompt, 4, eos)(input_ids, scores)
    for _ in range(2):  # the second call reads the mask made by the first
        ours = MinNewTokens(prompt, 4, eos)(input_ids, scores)
        assert torch.equal(ours, theirs) and ours is not scores
    assert torch.isinf(ours[0, eos]).all() == (generated < 4)
    with pytest.raises(ValueError, match="min_new_tokens"):
        MinNewTokens(prompt, -1, eos)  # transformers' own validation


@pytest.mark.parametrize("row", [
    torch.randn(50), torch.full((50,), -math.inf), torch.tensor([1.0, -math.inf, 2.0, math.nan, 3.0]),
    torch.tensor([3e38, 3e38, 1.0]),  # finite entries whose sum is not: counted
    torch.tensor([math.inf, -math.inf]), torch.tensor([-math.inf] * 7 + [0.5])])
def test_a_stages_survivors_are_its_finite_entries(row):
    from inference.sampling import finite_count
    assert finite_count(row) == int(torch.isfinite(row).sum())

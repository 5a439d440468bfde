"""A token count as the visitor types (issue 24, point 5): `tokenize` is answered by the tokenizer alone, with the
server's cap and the model's context window, without a slot or a run; what the template adds is counted apart from
what was typed; a prompt past the cap is refused at start with a message that tells the two limits apart."""
import pytest

from explainer.services.admission.capacity import generating
from inference.loading import load_model
from inference.prompting import build_prompt, typed_tokens
from tests.support import connect, stories_spec, until

TYPED = "How do rainbows form?"


async def counted(comm, **fields) -> dict:
    await comm.send_json_to({"type": "tokenize", **fields})
    return (await until(comm, "tokenized"))[-1]


async def test_tokenize_counts_the_prompt_as_the_model_reads_it(stories_model):
    comm = await connect()
    try:
        answer = await counted(comm, messages=[{"role": "user", "content": TYPED}], seq=7)
        loaded = load_model(stories_spec(), device="cpu")
        prompt = build_prompt(loaded.tokenizer, messages=[{"role": "user", "content": TYPED}])
        assert answer["seq"] == 7 and answer["tokens"] == len(prompt.ids)
        assert answer["typed_tokens"] + answer["template_tokens"] == answer["tokens"] and answer["template_tokens"] > 0
        assert answer["limit"] == stories_model.EXPLAINER_MAX_PROMPT_TOKENS
        assert answer["context_window"] == loaded.description.context_window
        assert generating.active == 0  # no slot, no run
        raw = await counted(comm, text=TYPED, seq=8)
        assert raw["template_tokens"] == len(build_prompt(loaded.tokenizer, text=TYPED).ids) - raw["typed_tokens"]
    finally:
        await comm.disconnect()


async def test_a_prompt_it_cannot_count_is_answered_in_the_count_not_as_an_error(stories_model):
    comm = await connect()
    try:
        answer = await counted(comm, messages=[{"role": "wizard", "content": TYPED}], seq=1)
        assert answer["tokens"] is None and answer["error"]["code"] and answer["seq"] == 1
        far = await counted(comm, text="x" * (stories_model.EXPLAINER_MAX_PROMPT_TOKENS * 64 + 1), seq=2)
        assert far["error"]["code"] == "out_of_range" and "characters" in far["error"]["message"]
    finally:
        await comm.disconnect()


async def test_counting_is_rate_limited_on_its_own(stories_model):
    stories_model.EXPLAINER_RATE_PER_S = 0  # the socket's own limit off: this is the count's
    comm = await connect()
    try:
        answers = [await counted(comm, text=TYPED, seq=n) for n in range(12)]
        refused = [a for a in answers if a.get("error")]
        assert refused and all(a["error"]["code"] == "rate_limited" for a in refused), answers
        assert len(answers) - len(refused) >= 8  # the burst
    finally:
        await comm.disconnect()


async def test_a_start_past_the_cap_says_which_limit_it_is(stories_model):
    stories_model.EXPLAINER_MAX_PROMPT_TOKENS = 20
    comm = await connect()
    try:
        await comm.send_json_to({"type": "start", "messages": [{"role": "user", "content": "<t403> " * 30}]})
        error = (await until(comm, "error"))[-1]
        assert error["code"] == "out_of_range"
        assert "added by the chat template" in error["message"] and "at most 20 prompt tokens" in error["message"]
        assert "context window is" in error["message"]
    finally:
        await comm.disconnect()


@pytest.mark.parametrize("messages, typed", [
    ([{"role": "user", "content": TYPED}], TYPED),
    ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": TYPED}], "Be brief." + TYPED),
])
def test_typed_tokens_are_the_tokens_of_the_typed_words(messages, typed):
    loaded = load_model(stories_spec(), device="cpu")
    prompt = build_prompt(loaded.tokenizer, messages=messages)
    alone = sum(len(loaded.tokenizer(m["content"], add_special_tokens=False)["input_ids"]) for m in messages)
    assert abs(typed_tokens(prompt) - alone) <= len(messages)  # a merge across a turn's edge may shift one token
    assert typed_tokens(prompt) < len(prompt.ids)

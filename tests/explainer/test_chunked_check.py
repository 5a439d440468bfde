"""The causal-mask check of a prompt prefilled in chunks (issue 22, N2b): the twin goes through the chunks the
run's own prefill went through, one device call each, and positions before the change still move by exactly 0."""
import pytest

from explainer.services.run import after_run_checks
from inference.engine import GenerationSession
from inference.loading import load_model
from inference.prompting import build_prompt
from inference.sampling import SamplingParams
from tests.support import stories_spec


@pytest.fixture(scope="module")
def stories():
    return load_model(stories_spec(), device="cpu")


def test_a_chunked_prefills_check_feeds_its_twin_through_the_same_chunks(stories):
    ids = [1] + [403 + (n * 7) % 90 for n in range(37)]
    session = GenerationSession(stories, build_prompt(stories.tokenizer, input_ids=ids),
                                SamplingParams.from_dict({"max_new_tokens": 2}), prefill_chunk=16)
    for tokens in (5, 16, 7):  # sizes as a busy device chooses them (executors.chunk_tokens)
        assert session.prefill_part(tokens)
    session.prefill()
    assert session.prefill_chunked == [5, 16, 7, 10]
    calls = after_run_checks.causal_calls(session)
    fed = []
    call = next(calls)
    try:
        while True:
            fed.append(getattr(call, "tokens", None))
            call = calls.send(call())
    except StopIteration as done:
        check = done.value
    assert fed == [5, 16, 7, 10, None]  # the twin's chunks, then the comparison: no call runs a whole prompt
    data = check["data"]
    assert check["passed"] and data["max_abs_change"][:data["change_at"]] == [0.0] * data["change_at"]
    assert max(data["max_abs_change"][data["change_at"]:]) > 0  # the change itself moved what comes after


def test_a_prompt_checked_lately_is_not_run_again(stories):
    """A room on one prompt (the article's default, a broadcast) runs the check once: later visitors get the same
    result, marked reused, with no device call."""
    ids = [1] + [403 + (n * 7) % 90 for n in range(20)]
    first, second = (GenerationSession(stories, build_prompt(stories.tokenizer, input_ids=ids),
                                       SamplingParams.from_dict({"max_new_tokens": 2})) for _ in range(2))
    for s in (first, second):
        s.prefill()
    measured = after_run_checks.causal_mask(first)
    calls = after_run_checks.causal_calls(second)
    with pytest.raises(StopIteration) as done:
        next(calls)  # no device call: the generator returns at once
    reused = done.value.value
    assert (measured["data"]["reused"], reused["data"]["reused"]) == (False, True)
    assert {k: v for k, v in reused["data"].items() if k != "reused"} == {k: v for k, v in measured["data"].items() if k != "reused"}
    assert reused["passed"] and second.prefill_hidden is None  # its own residuals are freed all the same

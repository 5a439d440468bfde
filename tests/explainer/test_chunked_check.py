"""The causal-mask check of a prompt prefilled in chunks (issue 22, N2b): the twin goes through the chunks the
run's own prefill went through, one device call each, and positions before the change still move by exactly 0."""
import contextlib
from dataclasses import replace

import pytest
from torch.overrides import TorchFunctionMode

from explainer.services.run import after_run_checks
from inference.engine import GenerationSession
from inference.loading import load_model
from inference.prefix_cache import PrefixCache
from inference.prompting import build_prompt
from inference.sampling import SamplingParams
from tests.inference.test_prefix_cache import SHARED
from tests.support import stories_spec


@pytest.fixture(scope="module")
def stories():
    return load_model(stories_spec(), device="cpu")


@pytest.fixture(scope="module")
def smollm2():
    return load_model("smollm2-135m-instruct", device="cpu")


def test_a_chunked_prefills_check_feeds_its_twin_through_the_same_chunks(stories):
    ids = [1] + [403 + (n * 7) % 90 for n in range(37)]
    session = GenerationSession(stories, build_prompt(stories.tokenizer, input_ids=ids),
                                SamplingParams.from_dict({"max_new_tokens": 2}), prefill_chunk=16)
    for tokens in (5, 16, 7):  # sizes as a busy device chooses them (executors.chunk_tokens)
        assert session.prefill_part(tokens)
    session.prefill()
    assert session.prefill_chunked == [5, 16, 7, 10]
    fed, check = device_calls(after_run_checks.causal_calls(session))
    assert fed == [5, 16, 7, 10, "result", None]  # the twin's chunks, joined, then the comparison: none a whole prompt
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


class TorchCalls(TorchFunctionMode):
    """Every torch operation called while it is on (on this thread: torch's function modes are per thread)."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__qualname__", None) or repr(func)
        if not name.endswith("__get__"):  # an attribute read (a tensor's shape, device): no operation runs
            self.names.append(name)
        return func(*args, **(kwargs or {}))


def device_calls(calls, between: TorchCalls | None = None) -> tuple[list, dict]:
    """Run the check's device calls one by one: (the prompt tokens each fed, "result" for the join of a pass's
    chunks, None for the comparison), the check. `between`: on while the check's own code runs between its calls,
    as it does on the event loop (after_run_checks.causal_mask_on)."""
    between = between or contextlib.nullcontext()
    fed = []
    try:
        with between:
            call = next(calls)
        while True:
            fed.append(getattr(call, "tokens", None) or getattr(call, "__name__", None))
            done = call()
            with between:
                call = calls.send(done)
    except StopIteration as done:
        return fed, done.value


@pytest.mark.parametrize("how", ["chunked", "from_prefix"])
def test_a_check_runs_torch_only_in_its_device_calls_never_on_the_event_loop(stories, how):
    """Between its device calls a check's code runs on the event loop (causal_mask_on), which must not run torch: an
    operation run there in parallel gives the loop's thread a helper team of its own for good, and with more helper
    threads than cores the device's helpers sleep between operations (a class's decode forward on 2 cores: +25%). The
    join of a pass's chunks (torch.cat) ran there."""
    after_run_checks.CHECKED.clear()
    if how == "chunked":
        ids = [1] + [403 + (n * 7) % 90 for n in range(37)]
        session = GenerationSession(stories, build_prompt(stories.tokenizer, input_ids=ids),
                                    SamplingParams.from_dict({"max_new_tokens": 2}), prefill_chunk=16)
        session.prefill()
    else:
        session = prefix_then(stories, SHARED + [60, 61], SHARED + [62, 63, 64], 2)
    between = TorchCalls()
    fed, check = device_calls(after_run_checks.causal_calls(session), between)
    assert between.names == []
    assert fed.count("result") == (1 if how == "chunked" else 2) and check["passed"]  # each pass joined on the device


def prefix_then(loaded, first: list[int], second: list[int], chunk: int | None = None):
    """`second`'s session, prefilled after `first`'s on a prefix cache: it starts from their shared prefix."""
    cached = replace(loaded, prefix_cache=PrefixCache(64 * 2**20))
    params = SamplingParams.from_dict({"max_new_tokens": 2, "temperature": 0})
    GenerationSession(cached, build_prompt(loaded.tokenizer, input_ids=first), params).prefill()
    session = GenerationSession(cached, build_prompt(loaded.tokenizer, input_ids=second), params, prefill_chunk=chunk)
    session.prefill()
    return session


@pytest.mark.parametrize("model", ["stories", "smollm2"])
def test_a_check_after_a_prefix_cache_hit_runs_only_the_positions_after_the_prefix(model, request):
    """A class shares the template's system prompt: each visitor's prefill computes only the rest, and so does their
    check (the prompt and its twin, each from the same cached keys and values), not two whole prompts. Positions
    before the change still move by exactly 0, and what the change moves matches a check of two whole passes."""
    loaded = request.getfixturevalue(model)
    if model == "stories":
        first, second, chunk = SHARED + [60, 61], SHARED + [62, 63, 64], 2
    else:
        first, second = (build_prompt(loaded.tokenizer, messages=[{"role": "user", "content": q}]).ids
                         for q in ("How do rainbows form?", "Why is the sky blue? Explain it simply."))
        chunk = None
    session = prefix_then(loaded, first, second, chunk)
    shared = session.cached_tokens
    assert shared == next(i for i, (a, b) in enumerate(zip(first, second)) if a != b) and shared > 8
    fed, check = device_calls(after_run_checks.causal_calls(session))
    rest = len(second) - shared
    sizes = [2, 1] if model == "stories" else [rest]
    assert sum(sizes) == rest and fed == sizes + ["result"] + sizes + ["result", None]  # two passes of the rest, none whole
    data = check["data"]
    at = data["change_at"]
    assert data["from_prefix_cache"] == shared < at and session.prefix is None  # the prefix's tensors are let go
    assert check["passed"] and data["max_abs_change"][:at] == [0.0] * at
    assert min(data["max_abs_change"][at:]) > 0  # the change moved itself and everything after it
    after_run_checks.CHECKED.clear()  # the lone check below must run, not be reused
    lone = GenerationSession(loaded, build_prompt(loaded.tokenizer, input_ids=second), SamplingParams.from_dict({"max_new_tokens": 2}))
    lone.prefill()
    whole = after_run_checks.causal_mask(lone)["data"]
    assert (whole["change_at"], whole["replacement"], "from_prefix_cache" in whole) == (at, data["replacement"], False)
    assert whole["max_abs_change"][at:] == pytest.approx(data["max_abs_change"][at:], rel=1e-3, abs=1e-4)

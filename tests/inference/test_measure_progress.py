"""Each serving experiment says what it is measuring as it goes (`progress(done, total, label)`), so the page can
show the server's own progress (issue 13, item 7): every part announced once, in order, before it runs."""
from inference.batching import batch_experiment
from inference.prompting import build_prompt
from inference.quantize import quantize_experiment
from inference.serving import TTFT_LENGTHS, prefill_decode
from inference.speculative import NGRAM, speculative_report


def recorded():
    calls = []
    return calls, lambda done, total, label: calls.append((done, total, label))


def ids(bundled):
    return build_prompt(bundled.tokenizer, messages=[{"role": "user", "content": "Why is the sky blue?"}]).ids


def assert_in_order(calls, total):
    assert [(d, t) for d, t, _ in calls] == [(i, total) for i in range(total)]
    assert all(isinstance(label, str) and label for _, _, label in calls)


def test_prefill_decode_announces_the_warm_up_then_each_length(bundled):
    calls, progress = recorded()
    data = prefill_decode(bundled, progress=progress)
    assert_in_order(calls, len(data["rows"]) + 1)
    assert [label for _, _, label in calls[1:]] == [f"a prefill of {r['prompt_tokens']} tokens, then one decode step" for r in data["rows"]]
    assert len(data["rows"]) <= len(TTFT_LENGTHS)


def test_batch_announces_the_reference_then_each_batch_size(bundled):
    calls, progress = recorded()
    data = batch_experiment(bundled, ids(bundled), (1, 2, 4), 4, progress=progress)
    assert_in_order(calls, 4)
    assert [label for _, _, label in calls[1:]] == ["batch size 1 of 4", "batch size 2 of 4", "batch size 4 of 4"]
    assert [r["batch_size"] for r in data["runs"]] == [1, 2, 4]


def test_quantize_and_speculative_announce_their_parts(bundled):
    calls, progress = recorded()
    quantize_experiment(bundled, ids(bundled), 8, 4, progress=progress)
    assert_in_order(calls, 4)
    calls, progress = recorded()
    speculative_report(bundled, NGRAM, ids(bundled), 8, 3, progress=progress)
    assert_in_order(calls, 2)


def test_without_a_callback_nothing_changes(bundled):
    assert batch_experiment(bundled, ids(bundled), (1,), 2)["runs"][0]["batch_size"] == 1

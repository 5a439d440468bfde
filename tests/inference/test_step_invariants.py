"""One truth at every step (issue 23): over random runs, each step's payload agrees with the prompt, the step
before it and the cache figures `kvstats.cache_stats` promises. The article's sections read exactly these
figures at the page's step k (tests/browser/test_one_step.py checks what they display)."""
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inference.engine import GenerationSession
from inference.prompting import build_prompt
from inference.sampling import SamplingParams

RUNS = st.fixed_dictionaries({
    "prompt": st.lists(st.integers(min_value=3, max_value=500), min_size=1, max_size=12),
    "max_new_tokens": st.integers(min_value=1, max_value=10),
    "temperature": st.sampled_from([0.0, 0.7, 1.3]),
    "seed": st.integers(min_value=0, max_value=2**31 - 1),
})


def run_payloads(loaded, case):
    prompt = build_prompt(loaded.tokenizer, input_ids=[1, *case["prompt"]])
    params = {k: case[k] for k in ("max_new_tokens", "temperature", "seed")}
    session = GenerationSession(loaded, prompt, SamplingParams(**params))
    try:
        prefill = session.prefill()
        steps = []
        while not session.finished:
            steps.append(session.step())
        return prefill, steps, session.done_payload()
    finally:
        session.close()


def check_cache(kv):
    """What cache_stats promises of any cache figure: bytes summed from the layers, per token floored."""
    assert kv["stored_tokens"] <= kv["seq_len"] <= kv["context_window"]
    assert kv["bytes"] == sum(layer["bytes"] for layer in kv["layers"])
    assert kv["bytes_per_token"] == (kv["bytes"] // kv["stored_tokens"] if kv["stored_tokens"] else 0)
    # A full-attention cache holds the same bytes for every position: the product is exact.
    assert kv["bytes"] == kv["bytes_per_token"] * kv["stored_tokens"]


def check_rankings(step, layers: int, greedy: bool):
    """The sections that rank the same logits rank them alike: the lens's last layer is the logits' top, the first
    sampling stage (no penalty, nothing held off here) lists the same ids, and temperature 0 takes the first."""
    top = step["logits"]["top"]
    last = next((row for row in step["lens"] if row["layer"] == layers - 1), None)
    if last is not None:
        assert last["ids"] == [t["id"] for t in top[:len(last["ids"])]]
        assert all(abs(p - t["prob"]) <= 5.1e-5 for p, t in zip(last["probs"], top))  # 4 decimals there, 6 here
    assert [t["id"] for t in step["stages"][0]["top"]] == [t["id"] for t in top]
    if greedy:
        assert step["token"]["id"] == top[0]["id"] and step["token"]["prob"] == 1.0
        assert step["probs"][0] == {"id": top[0]["id"], "text": top[0]["text"], "prob": 1.0}
        assert all(p["prob"] == 0.0 for p in step["probs"][1:])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=RUNS)
def test_every_step_agrees_with_the_run(stories, case):
    prefill, steps, done = run_payloads(stories, case)
    P = len(prefill["tokens"])
    assert prefill["kv"]["seq_len"] == P
    check_cache(prefill["kv"])
    assert [s["step"] for s in steps] == list(range(1, len(steps) + 1))  # consecutive, from 1
    assert done["steps"] == len(steps) <= case["max_new_tokens"]
    for k, s in enumerate(steps, start=1):
        kv = s["kv"]
        # Step k samples from the pass before it: the cache holds the prompt and the k - 1 tokens fed back.
        assert kv["seq_len"] == P + k - 1
        check_cache(kv)
        assert kv["context_window"] == prefill["kv"]["context_window"]
        # Step k's input is the token at position P + k - 2 (step 1's is the prompt's last token).
        assert s["input"]["position"] == P + k - 2
        expected_input = prefill["tokens"][-1]["id"] if k == 1 else steps[k - 2]["token"]["id"]
        assert s["input"]["id"] == expected_input
        assert s["forward"] == ("prefill" if k == 1 else "decode")
        check_rankings(s, layers=len(s["hidden_norms"]) - 1, greedy=case["temperature"] == 0)
        if k > 1:  # the cache grows by one position, and by its bytes per position, each step
            before = steps[k - 2]["kv"]
            assert kv["bytes"] - before["bytes"] == kv["bytes_per_token"]
    assert "".join(s["text_delta"] for s in steps) == done["text"] or done["stop_reason"] == "stop_string"

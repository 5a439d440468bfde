"""Issue 23: temperature re-applied to a step's kept logits means the same thing at every value. At T -> 0
the distribution is the argmax at p = 1 (temperature 0 = greedy), and the top probability only falls as T rises."""
import pytest

from inference.engine import GenerationSession
from inference.ondemand import retemper
from inference.prompting import build_prompt
from inference.sampling import SamplingParams

SWEEP = [0, 0.1, 0.5, 1, 2]
RAINBOWS = [{"role": "user", "content": "How do rainbows form?"}]


def session_at(loaded, steps=3, **params):
    session = GenerationSession(loaded, build_prompt(loaded.tokenizer, messages=RAINBOWS),
                                SamplingParams(max_new_tokens=8, **params))
    session.prefill()
    payloads = [session.step() for _ in range(steps)]
    return session, payloads


@pytest.mark.parametrize("model", ["smollm2", "bundled"])
def test_top_probability_falls_with_temperature_and_is_one_at_zero(model, request):
    session, payloads = session_at(request.getfixturevalue(model), temperature=0.7, seed=1234)
    argmax = payloads[1]["logits"]["top"][0]["id"]
    answers = [retemper(session, 2, temperature=t) for t in SWEEP]
    tops = [a["probs"][0]["prob"] for a in answers]
    assert tops[0] == 1.0 and answers[0]["probs"][0]["id"] == argmax
    assert all(a >= b for a, b in zip(tops, tops[1:])), tops
    assert answers[0]["token"] == {"id": argmax, "text": answers[0]["token"]["text"], "prob": 1.0}
    assert answers[0]["stages"][3]["name"] == "temperature" and answers[0]["stages"][3]["survivors"] == 1


def test_a_greedy_step_shows_the_argmax_at_one(bundled):
    _, payloads = session_at(bundled, steps=2, temperature=0.0)
    for step in payloads:
        assert step["token"]["id"] == step["logits"]["top"][0]["id"] and step["token"]["prob"] == 1.0

"""Two runs step-locked (issue 29, the engine's part): where they part, each run's probability of the other's token,
KL and JS between the final distributions, and the int8 copy's logit difference against `quantize`'s own figures."""
import json
import math

import pytest
import torch
import torch.nn.functional as F

from inference.__main__ import main
from inference.compare import PairedRun, divergences, quantized_copy
from inference.engine import GenerationSession
from inference.prompting import build_prompt
from inference.quantize import quantize_experiment
from inference.sampling import SamplingParams

MESSAGES = [{"role": "user", "content": "What does mole mean?"}]


def paired(loaded, params_a: dict, params_b: dict, other=None, steps: int = 10) -> PairedRun:
    sessions = [GenerationSession(model, build_prompt(model.tokenizer, messages=MESSAGES),
                                  SamplingParams.from_dict({"max_new_tokens": steps, "min_new_tokens": steps, **params}))
                for model, params in ((loaded, params_a), (other or loaded, params_b))]
    pair = PairedRun(*sessions)
    pair.prefill()
    while not pair.finished:
        pair.step()
    return pair


def test_kl_and_each_runs_probability_of_the_others_token_recomputed_from_the_raw_logits(bundled):
    """Temperature 0.2 against 1.3: the figures are those of softmax(logits / T), computed here another way."""
    pair = paired(bundled, {"temperature": 0.2, "seed": 1}, {"temperature": 1.3, "seed": 1})
    assert len(pair.comparisons) == 10
    for c in pair.comparisons:
        log_a = F.log_softmax(pair.a.kept.get(c.step, "logits").double() / 0.2, dim=-1)  # (vocab,)
        log_b = F.log_softmax(pair.b.kept.get(c.step, "logits").double() / 1.3, dim=-1)  # (vocab,)
        kl = F.kl_div(log_b, log_a, log_target=True, reduction="sum").item()  # KL(A ‖ B)
        assert c.kl == pytest.approx(kl, rel=1e-4, abs=1e-6)
        assert c.a_prob_of_b == pytest.approx(log_a[c.token_b.id].exp().item(), rel=1e-4, abs=1e-9)
        assert c.b_prob_of_a == pytest.approx(log_b[c.token_a.id].exp().item(), rel=1e-4, abs=1e-9)
        assert 0 <= c.js <= math.log(2) + 1e-9
        assert c.token_a.id == pair.a.ids[pair.a.prompt_length + c.step - 1]  # the step's own token, not a neighbour's
    parting = pair.first_parting
    assert parting is not None and all(not c.parted for c in pair.comparisons[:parting.step - 1])
    assert pair.summary()["first_parting_step"] == parting.step


def test_the_same_settings_never_part(bundled):
    pair = paired(bundled, {"temperature": 0.8, "seed": 7}, {"temperature": 0.8, "seed": 7}, steps=8)
    assert pair.first_parting is None
    assert all(c.kl == 0 and c.js == 0 and c.max_logit_diff == 0 for c in pair.comparisons)


def test_a_token_the_other_run_filtered_out_makes_kl_infinite_and_js_finite():
    p, q = torch.tensor([0.5, 0.5, 0.0]), torch.tensor([1.0, 0.0, 0.0])
    kl, js = divergences(p, q)
    assert kl is None and 0 < js <= math.log(2)
    assert divergences(q, p)[0] == pytest.approx(math.log(2))


@pytest.mark.parametrize("model", ["bundled", "smollm2"])
def test_the_int8_copys_logit_difference_per_step_is_quantizes_own(model, request):
    """Greedy float against greedy int8 (SmolLM2, the article's model, and bundled): while their tokens agree, each
    step's largest logit difference is the figure `python -m inference quantize` computes at that position
    (teacher-forced over the float reply), within 1e-4."""
    loaded, steps = request.getfixturevalue(model), 8
    pair = paired(loaded, {"temperature": 0}, {"temperature": 0}, other=quantized_copy(loaded, 8), steps=steps)
    report = quantize_experiment(loaded, pair.a.prompt.ids, 8, steps)
    agreeing = [c for c in pair.comparisons if pair.first_parting is None or c.step <= pair.first_parting.step]
    assert agreeing and all(c.max_logit_diff > 0 for c in agreeing)  # the copy really is another set of weights
    for c in agreeing:
        assert c.max_logit_diff == pytest.approx(report["max_abs_logit_diff_per_step"][c.step - 1], abs=1e-4)
    assert pair.b.loaded.description.name.endswith("(int8 weights)") and pair.a.loaded.model is loaded.model


def test_the_cli_prints_a_line_per_step_and_where_the_runs_part(capsys):
    assert main(["compare", "--model", "bundled", "--prompt", "What does mole mean?", "--a", "temperature=0.2",
                 "--b", "temperature=1.3", "--max-new-tokens", "6", "--device", "cpu"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    rows = [json.loads(line) for line in lines]
    assert [r["type"] for r in rows][-1] == "compare_summary"
    steps = [r for r in rows if r["type"] == "compare_step"]
    assert 1 <= len(steps) <= 6 and {"kl", "js", "a_prob_of_b", "max_logit_diff", "parted"} <= set(steps[0])

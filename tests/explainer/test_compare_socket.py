"""Compare mode over the socket (issue 29): two runs of one prompt, stepped together, and what parts them."""
import math

import pytest
import torch

from explainer.services.admission.capacity import generating
from inference.compare import divergences
from tests.support import connect, until

PROMPT = [{"role": "user", "content": "<t403> <t407>"}]
pytestmark = pytest.mark.usefixtures("stories_model")  # tests/explainer/conftest.py


def start(compare, paused=False, **params):
    message = {"type": "start", "messages": PROMPT, "compare": compare,
               "params": {"temperature": 0.2, "seed": 3, "max_new_tokens": 12, "min_new_tokens": 12, **params}}
    return {**message, "paused": True} if paused else message


def finished(m):
    return m["type"] == "status" and m["state"] == "finished"


def of(seen, kind, run=None):
    return [m for m in seen if m["type"] == kind and m.get("run") == run]


async def test_two_temperatures_step_together_and_each_step_is_compared():
    """A's and B's steps come in pairs, each pair followed by its compare; B's messages say run b."""
    comm = await connect()
    await comm.send_json_to(start({"params": {"temperature": 1.3}}))
    seen = await until(comm, finished)
    b_session = of(seen, "session", "b")[0]
    assert b_session["params"]["temperature"] == 1.3 and b_session["params"]["seed"] == 3
    assert b_session["compare"] == {"weights": "float", "model": b_session["model"]["spec"], "changed": {"temperature": 1.3}}
    a_steps, b_steps, compares = of(seen, "step"), of(seen, "step", "b"), of(seen, "compare")
    assert [s["step"] for s in a_steps] == [s["step"] for s in b_steps] == [c["step"] for c in compares] == list(range(1, 13))
    for a, b, c in zip(a_steps, b_steps, compares):
        assert seen.index(a) < seen.index(b) < seen.index(c)  # each tick: A's step, B's, then the compare
        assert (c["token_a"]["id"], c["token_b"]["id"]) == (a["token"]["id"], b["token"]["id"])
        assert c["parted"] == (a["token"]["id"] != b["token"]["id"])
        assert c["token_a"]["prob"] == pytest.approx(a["token"]["prob"], abs=1e-6)
        assert c["kl"] is not None and c["kl"] >= 0 and 0 <= c["js"] <= math.log(2) + 1e-9
    parted = [c["step"] for c in compares if c["parted"]]
    assert compares[-1]["first_parting_step"] == (parted[0] if parted else None)
    assert [d.get("run") for d in seen if d["type"] == "done"] == [None, "b"]
    assert generating.active == 0
    await comm.disconnect()


async def test_the_int8_copy_changes_only_the_weights():
    """Same parameters, int8 weights: B's model says so and every compare names the largest logit difference."""
    comm = await connect()
    await comm.send_json_to(start({"weights": "int8"}, temperature=0))
    seen = await until(comm, finished)
    b_session = of(seen, "session", "b")[0]
    assert "int8" in b_session["model"]["spec"] and b_session["compare"]["changed"] == {}
    compares = of(seen, "compare")
    # Until they part, both read the same context: the difference is the weights' alone (stories260K is tiny, so
    # int8 parts it early; after that each run reads its own tokens and the logits differ by far more).
    agreeing = compares[:compares[-1]["first_parting_step"] or 12]
    assert len(compares) == 12 and all(0 < c["max_logit_diff"] < 1.0 for c in agreeing), agreeing
    await comm.disconnect()


def test_kl_is_the_divergence_of_the_two_final_distributions():
    """The compare's KL is KL(A || B) of the distributions (checked another way: terms summed in float64)."""
    p = torch.softmax(torch.tensor([2.0, 1.0, 0.5, -1.0]) / 0.2, -1)
    q = torch.softmax(torch.tensor([2.0, 1.0, 0.5, -1.0]) / 1.3, -1)
    kl, js = divergences(p, q)
    expected = sum(float(a) * math.log(float(a) / float(b)) for a, b in zip(p.double(), q.double()))
    assert kl == pytest.approx(expected, rel=1e-9) and 0 < js < kl


async def test_pause_step_and_fork_act_on_both_runs():
    """Paused: one step is a step of each; a fork of B at step 2 re-steps A from its own step 2 (still locked)."""
    comm = await connect()
    await comm.send_json_to(start({"params": {"temperature": 1.3}}, paused=True))
    await until(comm, lambda m: m["type"] == "status" and m["state"] == "paused")
    for n in (1, 2, 3):
        await comm.send_json_to({"type": "step"})
        seen = await until(comm, lambda m: m["type"] == "compare")
        assert [s["step"] for s in seen if s["type"] == "step"] == [n, n]
    await comm.send_json_to({"type": "fork", "step": 2, "token_id": 5, "run": "b"})
    seen = await until(comm, lambda m: m["type"] == "status" and m["state"] == "paused")
    a, b, c = of(seen, "step")[0], of(seen, "step", "b")[0], of(seen, "compare")[0]
    assert (a["step"], b["step"], c["step"]) == (2, 2, 2)
    assert b["forced"] and b["token"]["id"] == 5 and not a["forced"]
    await comm.send_json_to({"type": "fork", "step": 1, "token_id": 7, "run": "both"})
    seen = await until(comm, lambda m: m["type"] == "status" and m["state"] == "paused")
    c = of(seen, "compare")[0]
    assert c["step"] == 1 and not c["parted"] and c["token_a"]["id"] == c["token_b"]["id"] == 7
    await comm.send_json_to({"type": "detail", "what": "lens", "step": 1, "run": "b"})
    detail = (await until(comm, lambda m: m["type"] == "detail"))[-1]
    assert detail["run"] == "b"
    await comm.send_json_to({"type": "stop"})
    seen = await until(comm, finished)
    assert len(of(seen, "done")) == len(of(seen, "done", "b")) == 1
    await comm.disconnect()


async def test_a_compare_needs_two_slots_and_says_so(settings, monkeypatch):
    """One slot left for this address: the compare start is refused by name, no slot stays taken, and the slot it
    gave back unused teaches the start line no run length (the line's wait estimate comes from real runs only)."""
    from explainer.services.admission.start_queue import run_lengths

    monkeypatch.setattr(run_lengths, "mean_s", None)
    settings.EXPLAINER_MAX_RUNS_PER_ADDRESS = 1
    comm = await connect("10.1.2.3")
    await comm.send_json_to(start({"params": {"temperature": 1.3}}))
    busy = (await until(comm, lambda m: m["type"] == "busy"))[-1]
    assert "two of your generation slots" in busy["reason"]
    assert generating.active == 0 and not generating.by_address
    assert run_lengths.mean_s is None
    settings.EXPLAINER_MAX_RUNS_PER_ADDRESS = 2  # two slots: the same start runs, and holds both while it runs
    await comm.send_json_to(start({"params": {"temperature": 1.3}}, max_new_tokens=200, min_new_tokens=200))
    await until(comm, lambda m: m["type"] == "compare" and m["step"] == 2)
    assert generating.by_address["10.1.2.3"] == 2
    await comm.send_json_to({"type": "pause"})
    await until(comm, lambda m: m["type"] == "status" and m["state"] == "paused")
    assert generating.active == 0  # paused: a pair holds no slot, like a lone run
    await comm.send_json_to({"type": "stop"})
    await until(comm, finished)
    await comm.disconnect()


@pytest.mark.parametrize("compare, field", [
    ("hot", "compare"), ({"weights": "int4"}, "compare.weights"), ({}, "compare"),
    ({"params": {"temperature": 9}}, "temperature"), ({"model": "nope"}, "compare.model"), ({"colour": 1}, "compare"),
])
async def test_a_bad_compare_is_refused_by_name(compare, field):
    comm = await connect()
    await comm.send_json_to(start(compare))
    error = (await until(comm, lambda m: m["type"] == "error"))[-1]
    assert error["field"] == field, error
    assert generating.active == 0
    await comm.disconnect()


async def test_closing_mid_compare_frees_both_slots():
    comm = await connect()
    await comm.send_json_to(start({"params": {"temperature": 1.3}}, max_new_tokens=200, min_new_tokens=200))
    await until(comm, lambda m: m["type"] == "compare" and m["step"] == 2)
    await comm.disconnect()
    from tests.support import settled
    await settled(lambda: generating.active == 0, "both slots back")


async def test_on_smollm2_the_int8_pairs_logit_difference_is_quantizes_own(settings):
    """The article's model over the socket, greedy float against greedy int8: while the two replies agree, each
    compare's largest logit difference is `python -m inference quantize`'s figure at that step, within 1e-4."""
    from explainer.services.device import model_registry
    from inference.quantize import quantize_experiment

    settings.EXPLAINER_MODEL = settings.DEFAULT_MODEL
    model_registry.reset()
    comm = await connect()
    message = start({"weights": "int8"}, temperature=0, max_new_tokens=6, min_new_tokens=6)
    await comm.send_json_to({**message, "messages": [{"role": "user", "content": "How do rainbows form?"}]})
    seen = await until(comm, finished)
    await comm.disconnect()
    prompt_ids = [t["id"] for t in of(seen, "prefill")[0]["tokens"]]
    report = quantize_experiment(model_registry.get_model(), prompt_ids, 8, 6)
    compares = of(seen, "compare")
    agreeing = compares[:compares[-1]["first_parting_step"] or 6]
    assert len(agreeing) >= 3, "int8 SmolLM2 parts from float within 3 greedy steps"
    for c in agreeing:
        assert c["max_logit_diff"] == pytest.approx(report["max_abs_logit_diff_per_step"][c["step"] - 1], abs=1e-4)


@pytest.mark.django_db(transaction=True)
async def test_a_saved_pair_is_one_recording_made_on_this_server(settings):
    """Save run posts both runs and their compares in order: validated, replayed as posted, and "recorded on this
    server"; a changed KL is not."""
    from explainer.services.run.provenance import RECORDED
    from tests.explainer.test_recorded_details import save
    from tests.explainer.test_recording_abuse import as_a_browser_sends

    settings.EXPLAINER_MAX_RUNS_PER_ADDRESS = 2  # the pair's two slots
    comm = await connect("203.0.113.15")
    message = start({"params": {"temperature": 1.3}})
    await comm.send_json_to(message)
    seen = await until(comm, finished)
    await comm.disconnect()
    payloads = as_a_browser_sends([m for m in seen if m["type"] in RECORDED])
    assert {p.get("run") for p in payloads} == {None, "b"} and any(p["type"] == "compare" for p in payloads)
    data = {"messages": message["messages"], "params": message["params"], "seed": 3,
            "model_spec": payloads[0]["model"]["spec"], "payloads": payloads}
    created, api = await save(data)
    assert created["recorded_on_this_server"] is True
    assert api["payloads"] == payloads  # replayed as posted: both runs, and what parted them
    n = next(i for i, p in enumerate(payloads) if p["type"] == "compare")
    forged = payloads[:n] + [{**payloads[n], "kl": payloads[n]["kl"] + 1}] + payloads[n + 1:]
    created, _ = await save({**data, "payloads": forged})
    assert created["recorded_on_this_server"] is False


@pytest.mark.parametrize("close_after", ["session", "prefill", "compare"])
async def test_a_socket_closed_at_any_moment_of_a_pair_closes_both_sessions(monkeypatch, close_after):
    """Closed as run B's session arrives (its prefill under way), after B's prefill, or mid-run: both slots come
    back and run B's session is closed too, not only A's (the leak check counts runs, so B is counted here)."""
    from explainer.services.run import compared
    from inference.engine import GenerationSession
    from tests.support import settled

    opened, closed, close = [], [], GenerationSession.close
    real_open = compared.RunB.open.__func__

    def open_b(cls, *args):
        run = real_open(cls, *args)
        opened.append(run.session)
        return run

    def closing(session):
        closed.append(session)
        close(session)

    monkeypatch.setattr(compared.RunB, "open", classmethod(open_b))
    monkeypatch.setattr(GenerationSession, "close", closing)
    comm = await connect()
    await comm.send_json_to(start({"params": {"temperature": 1.3}}, max_new_tokens=200, min_new_tokens=200))
    await until(comm, lambda m: m["type"] == close_after and (m.get("run") == "b" or close_after == "compare"))
    await comm.disconnect()
    await settled(lambda: generating.active == 0, "both slots back")
    await settled(lambda: len(opened) == 1 and opened[0] in closed, "run B's session closed")


async def test_another_model_with_another_tokenizer_compares_its_top_5(settings):
    """A listed compare model (EXPLAINER_COMPARE_MODELS) reads the prompt with its own tokenizer: each compare gives
    both tokens and both top 5s; the figures that need one vocabulary are null. An unlisted one is refused by name."""
    settings.EXPLAINER_COMPARE_MODELS = ["bundled"]
    comm = await connect()
    await comm.send_json_to(start({"model": "bundled"}))
    seen = await until(comm, finished)
    b_session, b_prefill = of(seen, "session", "b")[0], of(seen, "prefill", "b")[0]
    assert b_session["model"]["name"] != of(seen, "session")[0]["model"]["name"]
    assert b_session["compare"]["model"] == b_session["model"]["spec"]
    assert [t["id"] for t in b_prefill["tokens"]] != [t["id"] for t in of(seen, "prefill")[0]["tokens"]]
    compares = of(seen, "compare")
    assert len(compares) == 12
    for c, a, b in zip(compares, of(seen, "step"), of(seen, "step", "b")):
        assert not c["same_tokenizer"] and c["kl"] is None and c["a_prob_of_b"] is None and c["max_logit_diff"] is None
        assert len(c["top_a"]) == len(c["top_b"]) == 5 and c["token_b"]["text"] == b["token"]["text"]
        assert c["parted"] == (a["token"]["text"] != b["token"]["text"])
    await comm.send_json_to(start({"model": "smollm2-135m-instruct"}))
    error = (await until(comm, lambda m: m["type"] == "error"))[-1]
    assert error["field"] == "compare.model" and "not one of this server's compare models" in error["message"]
    await comm.disconnect()

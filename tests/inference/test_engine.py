"""The step engine on real pretrained models: exact tokens, exact logits, every stage captured."""
import torch
import pytest

from inference.article_checks import causal_mask_check
from inference.engine import ContextWindowError, GenerationSession, SessionError
from inference.kvstats import kv_formula
from inference.ondemand import detail, retemper
from inference.wire.packing import unpack
from inference.wire.schema import validate_payload
from inference.prompting import build_prompt
from inference.sampling import SamplingParams

ARTICLE = [{"role": "user", "content": "The mole on my face may need a biopsy. Explain this simply."}]


def run(loaded, prompt, **params):
    session = GenerationSession(loaded, prompt, SamplingParams(**params))
    payloads = [session.prefill()]
    while not session.finished:
        payloads.append(session.step())
    return session, payloads


@pytest.fixture(params=["stories", "bundled"])
def case(request):
    loaded = request.getfixturevalue(request.param)
    if request.param == "stories":
        return loaded, build_prompt(loaded.tokenizer, input_ids=[1, 403, 407])
    return loaded, build_prompt(loaded.tokenizer, messages=ARTICLE)


def test_greedy_ids_equal_generate(case):
    loaded, prompt = case
    session, _ = run(loaded, prompt, temperature=0, max_new_tokens=24)
    ref = loaded.model.generate(torch.tensor([prompt.ids]), max_new_tokens=24, do_sample=False,
                                pad_token_id=loaded.tokenizer.pad_token_id or 0)[0, len(prompt.ids):].tolist()
    assert session.generated == ref[: len(session.generated)]
    assert len(session.generated) == len(ref) or session.finished == "eos"


def test_cached_logits_equal_full_forward(case):
    loaded, prompt = case
    session, payloads = run(loaded, prompt, temperature=0.8, seed=5, max_new_tokens=12)
    for step in payloads[1:]:
        prefix = session.ids[: len(prompt.ids) + step["step"] - 1]
        with torch.no_grad():
            full = loaded.model(torch.tensor([prefix])).logits[0, -1]
        ids = [t["id"] for t in step["logits"]["top"]]
        assert torch.allclose(torch.tensor([t["logit"] for t in step["logits"]["top"]]), full[ids], atol=2e-4)
        assert ids == full.topk(len(ids)).indices.tolist()
        assert step["input"]["position"] == len(prefix) - 1


def test_first_step_is_argmax_of_prefill_logits(case):
    loaded, prompt = case
    _, payloads = run(loaded, prompt, temperature=0, max_new_tokens=3)
    assert payloads[1]["token"]["id"] == payloads[0]["logits"]["top"][0]["id"]
    assert payloads[1]["forward"] == "prefill" and payloads[2]["forward"] == "decode"


def test_payloads_match_schema(case):
    loaded, prompt = case
    _, payloads = run(loaded, prompt, temperature=1.0, top_k=20, top_p=0.9, max_new_tokens=6)
    for p in payloads:
        validate_payload(p)


def test_same_seed_same_run_different_seed_differs(stories):
    prompt = build_prompt(stories.tokenizer, input_ids=[1])
    a, _ = run(stories, prompt, temperature=1.0, seed=7, max_new_tokens=30)
    b, _ = run(stories, prompt, temperature=1.0, seed=7, max_new_tokens=30)
    c, _ = run(stories, prompt, temperature=1.0, seed=8, max_new_tokens=30)
    assert a.generated == b.generated
    assert a.generated != c.generated


def test_kv_bytes_equal_tensors_and_formula(case):
    loaded, prompt = case
    session, payloads = run(loaded, prompt, temperature=0, max_new_tokens=5)
    last = payloads[-1]["kv"]
    tensors = sum(layer.keys.nbytes + layer.values.nbytes for layer in session.cache.layers)
    formula = kv_formula(loaded.model.config, "float32", last["seq_len"])["total_bytes"]
    assert last["bytes"] == tensors == formula
    assert last["seq_len"] == len(session.ids) - 1  # the newest token is not cached until it is fed


def test_causal_mask_mole_cannot_see_face(bundled):
    ids = bundled.tokenizer("The mole on my face", add_special_tokens=False)["input_ids"]
    face = len(bundled.tokenizer("The mole on my", add_special_tokens=False)["input_ids"])
    check = causal_mask_check(bundled, ids, change_at=face, replacement=bundled.tokenizer(" hand", add_special_tokens=False)["input_ids"][0])
    assert check["earlier_unchanged"]
    assert all(x == 0 for x in check["max_abs_change"][:face])
    assert check["max_abs_change"][face] > 0


@pytest.mark.parametrize("model", ["stories", "bundled"])
def test_causal_mask_check_on_the_runs_own_prefill_matches_two_fresh_passes(model, request):
    loaded = request.getfixturevalue(model)
    ids = [1] + list(range(300, 320))
    session = GenerationSession(loaded, build_prompt(loaded.tokenizer, input_ids=ids), SamplingParams(max_new_tokens=2))
    session.prefill()
    assert session.prefill_hidden.dtype == torch.float32 and session.prefill_hidden.shape[1] == len(ids)
    own = causal_mask_check(loaded, ids, 12, 400, session.prefill_hidden)  # one forward: the changed prompt
    fresh = causal_mask_check(loaded, ids, 12, 400)  # two forwards, as before
    assert own["earlier_unchanged"] and fresh["earlier_unchanged"]
    assert own["max_abs_change"][:12] == [0.0] * 12 and min(own["max_abs_change"][12:]) > 0
    assert own["max_abs_change"] == pytest.approx(fresh["max_abs_change"], rel=1e-3, abs=1e-4)


def test_prompt_beyond_context_window_is_named_error(stories):
    prompt = build_prompt(stories.tokenizer, input_ids=[1] * 500)
    with pytest.raises(ContextWindowError) as info:
        GenerationSession(stories, prompt, SamplingParams(max_new_tokens=20))
    assert info.value.field == "max_new_tokens" and "512" in str(info.value)


def test_fork_continues_with_chosen_token(stories):
    prompt = build_prompt(stories.tokenizer, input_ids=[1])
    session, _ = run(stories, prompt, temperature=0.9, seed=3, max_new_tokens=10)
    original = session.generated
    payload = session.fork(4, 100)
    assert payload["forced"] and payload["step"] == 4 and session.generated == original[:3] + [100]
    nxt = session.step()
    with torch.no_grad():
        full = stories.model(torch.tensor([session.ids[:-1]])).logits[0, -1]
    assert nxt["logits"]["top"][0]["id"] == int(full.argmax())
    assert session.kv()["seq_len"] == len(session.ids) - 1
    first = session.fork(1, 50)
    assert session.generated == [50] and first["step"] == 1


def test_stop_and_finished_state(stories):
    session = GenerationSession(stories, build_prompt(stories.tokenizer, input_ids=[1]), SamplingParams(max_new_tokens=50))
    session.prefill()
    session.step()
    session.stop()
    assert session.finished == "stopped"
    with pytest.raises(SessionError):
        session.step()


def test_detail_and_retemper_from_kept_data(stories):
    session, payloads = run(stories, build_prompt(stories.tokenizer, input_ids=[1, 403, 407]), temperature=1.0, seed=2, max_new_tokens=4)
    matrix = unpack(detail(session, "attention", step=0, layer=2, head=3)["data"])
    assert matrix.shape == (3, 3) and abs(matrix[2].sum() - 1) < 1e-2 and matrix[0, 1] == 0  # causal
    row = unpack(detail(session, "attention", step=3, layer=2, head=3)["data"])
    heads = unpack(payloads[3]["attention"]["heads"])
    assert row.shape == (5,) and (abs(row - heads[2, 3]) < 1e-3).all()
    again = retemper(session, 2, temperature=1.0)
    assert again["token"]["id"] == payloads[2]["token"]["id"]  # same logits, same dice -> same token
    cold = retemper(session, 2, temperature=0.05)
    assert cold["token"]["id"] == payloads[2]["logits"]["top"][0]["id"]
    lens = detail(session, "lens", step=2)["lens"]
    assert [r["layer"] for r in lens] == list(range(5))


def test_utf8_is_held_back_until_complete(bundled):
    emoji = bundled.tokenizer("\U0001F600", add_special_tokens=False)["input_ids"]
    assert len(emoji) > 1  # byte-level BPE splits it into byte tokens
    session = GenerationSession(bundled, build_prompt(bundled.tokenizer, messages=ARTICLE), SamplingParams(max_new_tokens=10))
    session.prefill()
    deltas = [session.step(forced_token=t)["text_delta"] for t in emoji]
    assert deltas[:-1] == [""] * (len(emoji) - 1) and deltas[-1] == "\U0001F600"


def test_bundled_answers_article_prompt_on_topic_and_ends_with_eos(bundled):
    session, payloads = run(bundled, build_prompt(bundled.tokenizer, messages=ARTICLE), temperature=0, max_new_tokens=120)
    assert session.finished == "eos"
    text = session.reply_text().lower()
    assert any(word in text for word in ("skin", "spot", "tissue", "disease"))

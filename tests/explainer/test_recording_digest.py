"""A recording's digest (explainer/services/run/provenance.py) hashes each payload as a browser writes it back:
integral floats as ints. A step's top keys and weights come as PlainLists, built without integral floats, which
the digest takes as they are: the bytes are the ones a full walk gives, so recordings stored before still verify."""
import json

import pytest
import torch
from hypothesis import given, settings

from explainer.services.run import provenance
from inference.capture import head_top_keys
from tests.explainer.test_consumer import START
from tests.inference.test_top_keys_bytes import attention_rows
from tests.support import connect


@settings(max_examples=100, deadline=None)
@given(attention_rows())
def test_the_top_lists_are_plain_so_a_recordings_digest_takes_them_as_they_are(attn):
    top = head_top_keys(attn)
    flat = [w for layer in top.weights for head in layer for w in head]
    assert not any(isinstance(w, float) and w.is_integer() for w in flat)
    step = {"attention": {"top_keys": top.keys, "top_weights": top.weights}, "prob": 1.0}
    walked = {"attention": {"top_keys": list(top.keys), "top_weights": [list(x) for x in top.weights]}, "prob": 1.0}
    assert provenance.canonical(step) == provenance.canonical(walked)


@pytest.mark.usefixtures("stories_model")  # tests/explainer/conftest.py
async def test_a_recorded_message_goes_out_as_the_text_its_digest_read_and_the_run_verifies():
    """One encoding per recorded message: its frame's text is its canonical text (sorted keys, no spaces, integral
    floats as ints), and the run's digest, remembered at its done, is the one a page posting these payloads gets."""
    comm = await connect()
    await comm.send_json_to(START)
    texts = []
    while True:
        text = await comm.receive_from(timeout=30)
        texts.append(text)
        if json.loads(text)["type"] == "done":
            break
    recorded = [t for t in texts if json.loads(t)["type"] in provenance.RECORDED]
    assert [json.loads(t)["type"] for t in recorded].count("step") == 6
    assert all(t == provenance.canonical_text(json.loads(t)) for t in recorded)
    payloads = [json.loads(t) for t in recorded]
    assert provenance.produced_here(payloads)  # this server sent exactly these
    payloads[-2]["token"]["prob"] = 0.5  # a changed figure: a digest never sent
    assert not provenance.produced_here(payloads)
    await comm.disconnect()


def test_whole_weights_of_any_size_are_written_as_ints():
    """A row that is not an attention row's (weights summed over heads, a model's odd output) keeps the PlainList
    promise too: 2.0 goes out as 2, as a browser writes it back, so the digest's skip stays exact."""
    attn = torch.full((1, 2, 4), 0.25)
    attn[0, 1] = torch.tensor([2.0, 3.0, -0.0, 0.5])
    top = head_top_keys(attn)
    flat = [w for layer in top.weights for head in layer for w in head]
    assert not any(isinstance(w, float) and w.is_integer() for w in flat) and 2 in flat and 3 in flat
    walked = {"w": [[list(h) for h in layer] for layer in top.weights]}
    assert provenance.canonical({"w": top.weights}) == provenance.canonical(walked)

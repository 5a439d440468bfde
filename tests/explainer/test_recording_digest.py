"""A recording's digest (explainer/services/run/provenance.py) hashes each payload as a browser writes it back:
integral floats as ints. A step's top keys and weights come as PlainLists, built without integral floats, which
the digest takes as they are: the bytes are the ones a full walk gives, so recordings stored before still verify."""
import json
import threading

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from explainer.services.run import provenance
from inference.capture import head_top_keys
from inference.wire import builders
from inference.wire.framing import join_message
from tests.explainer.test_consumer import START
from tests.support import connect


@st.composite
def attention_rows(draw):
    """(layers, heads, keys) rows of weights in [0, 1], with the values whose writing is easy to get wrong."""
    layers, heads, keys = draw(st.integers(1, 4)), draw(st.integers(1, 4)), draw(st.integers(1, 120))
    special = st.sampled_from([0.0, 1.0, 0.5, 0.1, 0.12, 0.00005, 0.00004999, 0.99995, 0.999949, 1e-9, 0.1234])
    value = st.one_of(special, st.floats(0.0, 1.0, allow_nan=False, width=32))
    flat = draw(st.lists(value, min_size=layers * heads * keys, max_size=layers * heads * keys))
    return torch.tensor(flat, dtype=torch.float32).reshape(layers, heads, keys)


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


@pytest.mark.usefixtures("stories_model")  # tests/explainer/conftest.py
async def test_a_ticks_steps_get_their_canonical_text_on_the_device_thread_not_on_the_event_loop(monkeypatch):
    """A step is written where it is made (builders.step_payload, in a decode tick between two forward passes), once:
    the event loop, which runs beside the next forward pass, neither writes it again nor hashes a second text."""
    made = []
    original = provenance.canonical_text

    def spy(where):
        def canonical_text(payload):
            made.append((where, payload.get("type"), threading.current_thread() is threading.main_thread()))
            return original(payload)
        return canonical_text

    monkeypatch.setattr(provenance, "canonical_text", spy("web"))
    monkeypatch.setattr(builders, "canonical_text", spy("wire"))
    comm = await connect()
    await comm.send_json_to(START)
    steps = []
    while (message := json.loads(text := await comm.receive_from(timeout=30)))["type"] != "done":
        if message["type"] == "step":
            steps.append(text)
    assert len(steps) == 6 and all(t == original(json.loads(t)) for t in steps)
    ticks = [on_loop for where, kind, on_loop in made if kind == "step"]
    assert len(ticks) == 6 and not any(ticks)  # each once (step 1 too: sampled in a tick), none on the event loop
    assert {where for where, kind, _ in made if kind == "step"} == {"wire"}  # where it was built: never again
    assert {"session", "prefill"} <= {kind for where, kind, on_loop in made if on_loop}  # what no tick makes: on the loop
    await comm.disconnect()


@pytest.mark.usefixtures("stories_model")
async def test_a_ticks_step_over_the_send_cap_is_cut_into_parts_that_join_back_and_verify(settings):
    """A step encoded on the device's thread but larger than the send cap goes out as a head and parts cut from
    json.dumps (their sizes are json.dumps sizes), which join back to the step; the run still verifies."""
    settings.EXPLAINER_MAX_SEND_BYTES = 3000
    comm = await connect()
    await comm.send_json_to(START)
    recorded, frames, cut = [], [], 0
    while True:
        text = await comm.receive_from(timeout=30)
        assert len(text) <= 3000
        message = json.loads(text)
        if frames or message.get("parts"):
            frames.append(message)
            if len(frames) < frames[0]["parts"] + 1:
                continue
            message, frames, cut = join_message(frames), [], cut + (message["type"] == "part")
        if message["type"] in provenance.RECORDED:
            recorded.append(message)
        if message["type"] == "done":
            break
    steps = [m for m in recorded if m["type"] == "step"]
    assert len(steps) == 6 and cut >= 6  # every step was cut, and joined back
    assert provenance.produced_here(recorded)
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

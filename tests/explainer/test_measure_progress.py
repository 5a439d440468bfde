"""A measurement says what it measures as it goes (`serving_progress`), runs beside the socket's other verbs,
and the article's prompt gives every visitor the same cached result (issue 13, item 7)."""
import threading

import pytest

from explainer.services.device import measurements
from inference.wire.schema import validate_payload
from tests.support import connect, until

pytestmark = pytest.mark.usefixtures("stories_model")  # tests/explainer/conftest.py


@pytest.fixture(autouse=True)
def fresh_cache():
    measurements.forget()
    yield
    measurements.forget()


async def test_a_fresh_measurement_reports_each_part_then_the_cached_one_comes_at_once():
    comm = await connect("198.51.100.40")
    await comm.send_json_to({"type": "measure", "what": "batch", "prompt": "article"})
    seen = await until(comm, lambda m: m["type"] == "serving", timeout=300)
    progress = [m for m in seen if m["type"] == "serving_progress"]
    for m in progress + [seen[-1]]:
        validate_payload(m)
    # the reference run, then each batch size, in order, each announced before it ran
    assert [(m["done"], m["total"]) for m in progress] == [(i, 5) for i in range(5)]
    assert progress[0]["label"].startswith("the reference") and progress[-1]["label"] == "batch size 8 of 8"
    assert {m["what"] for m in progress} == {"batch"}
    first = seen[-1]
    assert first["cached"] is False and first["prompt"] == "article" and first["measured_at"]
    await comm.send_json_to({"type": "measure", "what": "kv", "prompt": "article"})
    kv = (await until(comm, "serving"))[-1]  # arithmetic on the config: no prompt, no date, never cached
    assert (kv["prompt"], kv["measured_at"], kv["cached"]) == ("none", None, False)
    validate_payload(kv)
    other = await connect("198.51.100.41")  # the next visitor: no progress, the same result and date at once
    await other.send_json_to({"type": "measure", "what": "batch", "prompt": "article"})
    again = await other.receive_json_from(timeout=10)
    assert again["type"] == "serving" and again["cached"] is True
    assert (again["measured_at"], again["data"]) == (first["measured_at"], first["data"])
    for c in (comm, other):
        await c.disconnect()


async def test_the_socket_reads_other_verbs_while_it_measures(monkeypatch):
    gate, real = threading.Event(), measurements.measure
    monkeypatch.setattr(measurements, "measure", lambda *a: (gate.wait(60), real(*a))[1])
    comm = await connect("198.51.100.42")
    await comm.send_json_to({"type": "measure", "what": "prefill_decode"})
    await comm.send_json_to({"type": "pause"})  # answered by the control state, no model call
    answer = (await until(comm, "error", timeout=10))[-1]  # before the measurement, which still waits
    assert answer["code"] == "no_run" and not gate.is_set()
    gate.set()
    seen = await until(comm, lambda m: m["type"] == "serving", timeout=300)
    assert seen[-1]["what"] == "prefill_decode"
    await comm.disconnect()


async def test_a_bad_prompt_choice_is_refused_by_name():
    comm = await connect("198.51.100.43")
    await comm.send_json_to({"type": "measure", "what": "batch", "prompt": "theirs"})
    error = await comm.receive_json_from(timeout=10)
    assert error["type"] == "error" and error["code"] == "invalid_value" and error["field"] == "prompt"
    await comm.disconnect()

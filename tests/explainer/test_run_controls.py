"""Stop, pause and step under the timings people cause (issue 11), over Channels' test communicator."""
import json

import pytest

from explainer.services.admission.capacity import generating
from tests.support import connect, until

LONG = {"type": "start", "messages": [{"role": "user", "content": "<t403> <t407>"}],
        "params": {"temperature": 0.8, "seed": 1, "max_new_tokens": 200}}

pytestmark = pytest.mark.usefixtures("stories_model")  # tests/explainer/conftest.py


def is_step(n):
    return lambda m: m["type"] == "step" and m["step"] == n


def refuse(constant):
    raise AssertionError(f"a frame carried {constant}")


def is_type(kind):
    return lambda m: m["type"] == kind


async def rest_of_run(comm):
    """Everything up to the run's closing `status: finished`, then nothing more for a moment."""
    seen = await until(comm, lambda m: m["type"] == "status" and m["state"] == "finished")
    assert await comm.receive_nothing(timeout=0.3), "the run sent more after it finished"
    return seen


async def test_stop_at_step_3_of_a_long_run_stops_within_one_step():
    """The page's stop names the last step it drew: the run keeps at most one step more."""
    comm = await connect()
    await comm.send_json_to(LONG)
    await until(comm, is_step(3))
    await comm.send_json_to({"type": "stop", "step": 3})
    seen = await rest_of_run(comm)
    done = next(m for m in seen if m["type"] == "done")
    assert done["stop_reason"] == "stopped", done["stop_reason"]
    assert done["steps"] <= 4 and len(done["token_ids"]) == done["steps"]
    assert generating.active == 0
    await comm.disconnect()


async def test_a_plain_stop_ends_the_run_as_stopped():
    """A script's bare stop: `done` says stopped (it used to run on to eos, or never come)."""
    comm = await connect()
    await comm.send_json_to(LONG)
    await until(comm, is_step(3))
    await comm.send_json_to({"type": "stop"})
    seen = await rest_of_run(comm)
    steps = [m["step"] for m in seen if m["type"] == "step"]
    done = next(m for m in seen if m["type"] == "done")
    assert done["stop_reason"] == "stopped" and done["steps"] == (steps or [3])[-1]
    assert seen.index(done) > max((i for i, m in enumerate(seen) if m["type"] == "step"), default=-1)
    await comm.disconnect()


async def test_pause_step_stop_lets_at_most_one_step_through():
    comm = await connect()
    await comm.send_json_to(LONG)
    await until(comm, is_step(2))
    await comm.send_json_to({"type": "pause"})
    seen = await until(comm, lambda m: m["type"] == "status" and m["state"] == "paused")
    last = max([2] + [m["step"] for m in seen if m["type"] == "step"])
    assert await comm.receive_nothing(timeout=0.3)  # paused holds
    await comm.send_json_to({"type": "step"})
    await comm.send_json_to({"type": "stop"})
    seen = await rest_of_run(comm)
    steps = [m["step"] for m in seen if m["type"] == "step"]
    done = next(m for m in seen if m["type"] == "done")
    assert steps in ([], [last + 1]), steps  # the asked-for step at most
    assert done["stop_reason"] == "stopped" and done["steps"] <= last + 1
    await comm.disconnect()


async def test_stop_while_held_by_flow_control_answers(settings):
    settings.EXPLAINER_OUTBOUND_WINDOW = 4
    comm = await connect()
    await comm.send_json_to({"type": "ack", "received": 1})  # an acking client: the window holds from now
    await comm.send_json_to(LONG)
    await until(comm, lambda m: m["type"] == "status" and "ack" in m.get("message", ""))
    await comm.send_json_to({"type": "stop"})
    seen = await rest_of_run(comm)
    done = next(m for m in seen if m["type"] == "done")
    assert done["stop_reason"] == "stopped"
    assert len([m for m in seen if m["type"] == "step"]) <= 1
    await comm.send_json_to({"type": "resume"})
    error = await comm.receive_json_from(timeout=5)
    assert (error["type"], error["code"]) == ("error", "finished")
    await comm.disconnect()


async def test_a_stop_that_names_the_last_step_seen_cuts_the_run_there():
    """Steps already on the wire when the stop is read are dropped from the run; `done` is the truth."""
    comm = await connect()
    await comm.send_json_to(LONG)
    seen = await until(comm, is_step(6))  # the client "saw" step 3 only: steps 4-6 were on their way
    await comm.send_json_to({"type": "stop", "step": 3})
    seen = await rest_of_run(comm)
    done = next(m for m in seen if m["type"] == "done")
    assert done["stop_reason"] == "stopped" and done["steps"] == 4 and len(done["token_ids"]) == 4
    await comm.send_json_to({"type": "retemper", "step": 5, "temperature": 0.5})
    error = await comm.receive_json_from(timeout=5)
    assert (error["code"], error["field"]) == ("out_of_range", "step")  # the run ends at step 4
    await comm.send_json_to({"type": "fork", "step": 4, "token_id": 42})
    forked = await until(comm, is_type("step"))
    assert forked[-1]["step"] == 4 and forked[-1]["token"]["id"] == 42
    await comm.disconnect()


async def test_resume_and_step_on_a_finished_run_get_named_errors():
    comm = await connect()
    await comm.send_json_to({**LONG, "params": {**LONG["params"], "max_new_tokens": 3}})
    await rest_of_run(comm)
    for verb in ("resume", "step", "pause", "stop"):
        await comm.send_json_to({"type": verb})
        error = await comm.receive_json_from(timeout=5)
        assert (error["type"], error["code"]) == ("error", "finished"), error
    assert generating.active == 0
    await comm.disconnect()


async def test_a_non_finite_number_becomes_a_named_error_not_a_frame(monkeypatch):
    """Strict JSON out: a NaN in a payload (forced here, in the record a step is built from) is a `non_finite` error in
    its place, and the run goes on."""
    from dataclasses import replace

    from inference.wire import builders

    real_step_payload = builders.step_payload

    def step_payload_with_nan(record, capture_started):
        if record.step == 2:
            record = replace(record, timing=replace(record.timing, sampling_ms=float("nan")))
        return real_step_payload(record, capture_started)

    monkeypatch.setattr(builders, "step_payload", step_payload_with_nan)
    comm = await connect()
    await comm.send_json_to({**LONG, "params": {**LONG["params"], "max_new_tokens": 3}})
    raw = []
    while not raw or '"finished"' not in raw[-1]:
        raw.append(await comm.receive_from(timeout=30))
    seen = [json.loads(text, parse_constant=refuse) for text in raw]  # no bare NaN/Infinity token anywhere
    errors = [m for m in seen if m["type"] == "error"]
    assert [(e["code"], e["field"]) for e in errors] == [("non_finite", "type")] and "step" in errors[0]["message"]
    assert [m["step"] for m in seen if m["type"] == "step"] == [1, 3]
    assert next(m for m in seen if m["type"] == "done")["steps"] == 3
    await comm.disconnect()


async def test_a_tiny_repetition_penalty_is_refused_with_its_range():
    comm = await connect()
    await comm.send_json_to({**LONG, "params": {"repetition_penalty": 1e-39}})
    error = await comm.receive_json_from(timeout=30)
    assert (error["code"], error["field"]) == ("out_of_range", "repetition_penalty")
    assert "[0.01, 10]" in error["message"]
    await comm.disconnect()

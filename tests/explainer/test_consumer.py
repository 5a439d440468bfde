"""The visitor's socket, driven with Channels' WebsocketCommunicator against the real model."""
import asyncio
import json

import pytest
from channels.testing import WebsocketCommunicator

from explainer.asgi import application
from explainer.services.admission.capacity import generating
from tests.support import connect, until

ORIGIN = [(b"origin", b"http://127.0.0.1")]
START = {"type": "start", "messages": [{"role": "user", "content": "<t403> <t407>"}],
         "params": {"temperature": 0.8, "seed": 1, "max_new_tokens": 6}}


pytestmark = pytest.mark.usefixtures("stories_model")  # tests/explainer/conftest.py


async def test_full_run():
    comm = await connect()
    await comm.send_json_to(START)
    seen = await until(comm, "done")
    kinds = [m["type"] for m in seen if m["type"] != "status"]
    assert kinds[:2] == ["session", "prefill"] and kinds.count("step") == 6
    assert next(m for m in seen if m["type"] == "check")["name"] == "causal_mask"
    checks = [await comm.receive_json_from(timeout=30) for _ in range(2)]
    assert {c["name"]: c["passed"] for c in checks} == {"embedding_rows_unchanged": True, "weights_unchanged": True}
    assert (await comm.receive_json_from())["state"] == "finished"
    steps = [m for m in seen if m["type"] == "step"]
    assert seen[-1]["token_ids"] == [s["token"]["id"] for s in steps]
    assert generating.active == 0
    await comm.disconnect()


async def test_pause_step_resume():
    comm = await connect()
    await comm.send_json_to({**START, "paused": True, "params": {**START["params"], "max_new_tokens": 4}})
    seen = await until(comm, "status")
    while seen[-1]["state"] != "paused":
        seen += await until(comm, "status")
    if not any(m["type"] == "check" for m in seen):  # the causal-mask check runs off the first token's path
        seen += await until(comm, "check")
    assert await comm.receive_nothing(timeout=0.3)  # paused: nothing streams
    await comm.send_json_to({"type": "step"})
    assert (await comm.receive_json_from())["step"] == 1
    await comm.send_json_to({"type": "step"})
    assert (await comm.receive_json_from())["step"] == 2
    await comm.send_json_to({"type": "resume"})
    rest = await until(comm, "done")
    assert [m["step"] for m in rest if m["type"] == "step"] == [3, 4]
    await comm.disconnect()


async def test_stop():
    comm = await connect()
    await comm.send_json_to({**START, "paused": True, "params": {**START["params"], "max_new_tokens": 50}})
    await until(comm, "check")
    await comm.send_json_to({"type": "step"})
    await until(comm, "step")
    await comm.send_json_to({"type": "stop"})
    done = (await until(comm, "done"))[-1]
    assert done["stop_reason"] == "stopped" and done["steps"] == 1
    await comm.disconnect()


async def test_fork_detail_retemper():
    comm = await connect()
    await comm.send_json_to(START)
    steps = [m for m in await until(comm, "done") if m["type"] == "step"]
    await comm.send_json_to({"type": "retemper", "step": 2, "temperature": 0.8})
    same = (await until(comm, "retemper"))[-1]
    assert same["token"]["id"] == steps[1]["token"]["id"]  # same logits and dice: same token
    await comm.send_json_to({"type": "detail", "what": "attention", "step": 3, "layer": 1, "head": 2})
    detail = (await until(comm, "detail"))[-1]
    assert detail["data"]["shape"] == [steps[2]["attention"]["keys"]]
    await comm.send_json_to({"type": "fork", "step": 3, "token_id": 42})
    forked = (await until(comm, "step"))[-1]
    assert forked["forced"] and forked["step"] == 3 and forked["token"]["id"] == 42
    await comm.send_json_to({"type": "resume"})
    rest = await until(comm, "done")
    assert rest[-1]["token_ids"][:3] == [steps[0]["token"]["id"], steps[1]["token"]["id"], 42]
    await comm.disconnect()


@pytest.mark.parametrize("frame,code,field", [
    ("{not json", "bad_json", None),
    ("[1, 2]", "bad_json", None),
    ('{"type": 5}', "missing_field", "type"),
    ('{"type": "dance"}', "unknown_type", "type"),
    ('{"type": "start", "messages": [{"role": "user", "content": "hi"}], "params": {"temperature": "hot"}}', "wrong_type", "temperature"),
    ('{"type": "start", "messages": [{"role": "user", "content": "hi"}], "params": {"top_p": 1.5}}', "out_of_range", "top_p"),
    ('{"type": "start", "messages": [{"role": "user", "content": "hi"}], "params": {"temperature": NaN}}', "bad_json", None),
    ('{"type": "start", "messages": [{"role": "wizard", "content": "hi"}]}', "wrong_type", "messages[0]"),
    ('{"type": "start"}', "missing_field", "messages"),
    ('{"type": "start", "messages": [{"role": "user", "content": "hi"}], "params": {"max_new_tokens": 100000}}', "out_of_range", "max_new_tokens"),
    ('{"type": "step"}', "no_run", None),
    ('{"type": "detail", "what": "attention"}', "no_run", None),
    ("x" * 70000, "frame_too_large", None),
])
async def test_bad_frames_get_named_errors_and_socket_stays_usable(frame, code, field):
    comm = await connect()
    await comm.send_to(text_data=frame)
    error = await comm.receive_json_from(timeout=30)
    assert (error["type"], error["code"], error["field"]) == ("error", code, field), error
    await comm.send_json_to({**START, "params": {"max_new_tokens": 2, "min_new_tokens": 2}})  # a fresh seed: no EOS at 1
    assert (await until(comm, "done"))[-1]["steps"] == 2
    await comm.disconnect()


async def test_binary_frame_and_bad_fork():
    comm = await connect()
    await comm.send_to(bytes_data=b"\x00\x01")
    assert (await comm.receive_json_from())["code"] == "binary_frame"
    await comm.send_json_to({**START, "params": {"max_new_tokens": 2}})
    await until(comm, "done")
    await comm.send_json_to({"type": "fork", "step": 9, "token_id": 1})
    error = (await until(comm, "error"))[-1]
    assert error["code"] == "out_of_range" and error["field"] == "step"
    await comm.send_json_to({"type": "detail", "what": "soul", "step": 1})
    assert (await until(comm, "error"))[-1]["code"] == "invalid_value"
    await comm.disconnect()


async def test_disconnect_mid_run_frees_the_session():
    comm = await connect()
    await comm.send_json_to({**START, "params": {"max_new_tokens": 200}})
    await until(comm, "step")
    assert generating.active == 1
    await comm.disconnect()
    for _ in range(300):  # within one step of the disconnect; up to 30 s on a loaded machine
        if generating.active == 0:
            break
        await asyncio.sleep(0.1)
    assert generating.active == 0


async def test_busy_past_capacity_when_the_line_takes_no_one(settings):
    settings.EXPLAINER_OUTBOUND_WINDOW = 4  # a reader that acks nothing more holds its running run (and slot)
    settings.EXPLAINER_START_QUEUE = 0  # no line (tests/explainer/test_start_queue.py has the line)
    first, second, third = await connect(), await connect(), await connect()
    long = {**START, "params": {"max_new_tokens": 100}}
    for comm in (first, second):
        await comm.send_json_to({"type": "ack", "received": 1})
        await comm.send_json_to(long)
        await until(comm, lambda m: m["type"] == "status" and m.get("run_state") == "held")
    await third.send_json_to(long)
    busy = await third.receive_json_from(timeout=10)
    assert busy["type"] == "busy" and busy["retry_after_s"] > 0 and "2 visitors" in busy["reason"]
    for comm in (first, second, third):
        await comm.disconnect()


async def test_foreign_origin_is_refused():
    comm = WebsocketCommunicator(application, "/ws/session/", headers=[(b"origin", b"http://evil.example")])
    connected, _ = await comm.connect()
    assert not connected


@pytest.mark.parametrize("what", ["prefill_decode", "kv", "capacity"])
async def test_measure_serving_figures(what):
    comm = await connect()
    await comm.send_json_to({"type": "measure", "what": what})
    reply = (await until(comm, "serving"))[-1]
    assert reply["what"] == what and reply["data"]
    if what == "kv":
        assert {r["key"]: r["bytes_per_token"] for r in reply["data"]["rows"]}["opt-13b"] == 819_200
    await comm.send_json_to({"type": "measure", "what": "horoscope"})
    assert (await until(comm, "error"))[-1]["code"] == "invalid_value"
    await comm.disconnect()

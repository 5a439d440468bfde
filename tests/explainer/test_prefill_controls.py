"""A prefill you can see and stop (issue 24, point 1): the start's prefill runs in the run's task, so the socket
reads a stop or a pause while it computes. The server says `status: prefilling` with its progress at once and
after every chunk; a stop read between chunks ends the run after the current chunk (`done`, stop_reason
"stopped", 0 steps) and gives back the slot. The device is held between two chunks by the test (an Event), so
nothing here races the model."""
import threading

import pytest

from explainer.services.admission.capacity import generating
from explainer.services.run.opening import OPEN_RUNS
from inference.engine import GenerationSession
from tests.support import connect, settled, until

PROMPT = [{"role": "user", "content": "<t403> <t407> <t411> " * 12}]
CHUNK = 8


@pytest.fixture
def gated(stories_model, monkeypatch):
    """Chunks of 8 tokens; the second chunk waits until the test opens the gate."""
    stories_model.EXPLAINER_PREFILL_CHUNK = CHUNK
    stories_model.EXPLAINER_RATE_PER_S = 0
    gate, calls = threading.Event(), []
    part = GenerationSession.prefill_part

    def gated_part(session, tokens=None):
        calls.append(tokens)
        if len(calls) == 2:
            assert gate.wait(60), "the test never opened the gate"
        return part(session, tokens)

    monkeypatch.setattr(GenerationSession, "prefill_part", gated_part)
    yield gate
    gate.set()


def progress(messages: list[dict]) -> list[tuple[int, int]]:
    return [(m["prefilled_tokens"], m["prompt_tokens"]) for m in messages
            if m["type"] == "status" and m.get("run_state") == "prefilling"]


async def test_stop_during_a_chunked_prefill_ends_it_after_the_current_chunk(gated):
    comm = await connect()
    try:
        await comm.send_json_to({"type": "start", "messages": PROMPT, "params": {"max_new_tokens": 8, "seed": 1}})
        seen = await until(comm, lambda m: m["type"] == "status" and m.get("prefilled_tokens") == CHUNK)
        seen = seen[[m["type"] for m in seen].index("session"):]  # after the model's `loading`, if it loaded now
        (first, total), (after_one, _) = progress(seen)
        assert seen[0]["type"] == "session" and first == 0 and after_one == CHUNK and total > 4 * CHUNK
        assert seen[1]["state"] == "prefilling" and seen[1]["message"] == f"reading the prompt: 0 of {total} tokens"
        await comm.send_json_to({"type": "stop", "step": 0})  # read while the second chunk is on the device
        await settled(lambda: [r.control.state for r in OPEN_RUNS] == ["stopping"], "the stop being read")
        gated.set()
        rest = await until(comm, lambda m: m["type"] == "status" and m["state"] == "finished")
        kinds = [m["type"] for m in rest]
        assert "prefill" not in kinds and "step" not in kinds and "check" not in kinds, kinds
        done = next(m for m in rest if m["type"] == "done")
        assert (done["stop_reason"], done["steps"], done["text"]) == ("stopped", 0, "")
        assert progress(rest) == []  # the chunk that was computing when the stop came is the last: no more progress
        assert generating.active == 0
        await comm.send_json_to({"type": "start", "messages": [{"role": "user", "content": "<t403>"}],
                                 "params": {"max_new_tokens": 2}})  # the slot came back: a new run starts
        assert (await until(comm, {"prefill", "busy"}))[-1]["type"] == "prefill"
        await until(comm, "done")
    finally:
        await comm.disconnect()


async def test_pause_during_the_prefill_is_answered_after_it_and_the_run_waits_paused(gated):
    comm = await connect()
    try:
        await comm.send_json_to({"type": "start", "messages": PROMPT, "params": {"max_new_tokens": 8, "seed": 1}})
        await until(comm, lambda m: m["type"] == "status" and m.get("prefilled_tokens") == CHUNK)
        await comm.send_json_to({"type": "pause"})
        await comm.send_json_to({"type": "no-such-verb"})  # answered after the start's answers, in order
        await settled(lambda: [r.control.after_prefill for r in OPEN_RUNS] == ["paused"], "the pause being read")
        gated.set()
        rest = await until(comm, lambda m: m["type"] == "error")
        kinds = [m["type"] for m in rest]
        assert kinds.index("prefill") < kinds.index("error") and "step" not in kinds, kinds
        assert [m["run_state"] for m in rest if m["type"] == "status" and m["run_state"] != "prefilling"][-1] == "paused"
        fed = [done for done, _ in progress(rest)]
        assert fed == sorted(fed) and all(n % CHUNK == 0 for n in fed), fed  # one status per chunk, in order
        await comm.send_json_to({"type": "step"})
        assert (await until(comm, "step"))[-1]["step"] == 1
    finally:
        await comm.disconnect()


async def test_a_disconnect_during_the_prefill_is_read_at_once_and_frees_the_slot(gated):
    comm = await connect()
    await comm.send_json_to({"type": "start", "messages": PROMPT, "params": {"max_new_tokens": 8}})
    await until(comm, lambda m: m["type"] == "status" and m.get("prefilled_tokens") == CHUNK)
    assert generating.active == 1
    await comm.send_input({"type": "websocket.disconnect", "code": 1000})
    # the device is still held in the second chunk: the close is read, and the slot given back, without it
    await settled(lambda: generating.active == 0, "the slot coming back while the device is busy")
    gated.set()
    await comm.wait(30)
    await settled(lambda: not OPEN_RUNS, "the run's session closing once the device is free")

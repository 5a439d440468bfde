"""Every device call is bounded and a refused start takes nothing (issue 22, N2, N2b, N4), asserted on what the
device thread was asked to run for each visitor, never on times: a fork at step 1 re-prefills a long prompt in
chunks, a long prompt's causal-mask check goes in the same chunks, a prompt past the cap is refused before it
holds a slot, and the device serves the address with the least recent use first."""
import threading

import pytest

from explainer.services.admission.capacity import generating
from explainer.services.device import executors
from explainer.services.device.executors import STEP, DeviceExecutor
from tests.support import connect, until

pytestmark = pytest.mark.usefixtures("stories_model")  # tests/explainer/conftest.py
ADDRESS = "198.51.100.40"
LONG = "<t403> <t407> " * 30  # about 60 stories260K tokens: several chunks of 8


@pytest.fixture
def calls(monkeypatch, stories_model):
    """(owner, fn name, prompt tokens) of every call submitted to a device, in order."""
    stories_model.EXPLAINER_PREFILL_CHUNK = 8
    seen, submit = [], DeviceExecutor.submit_at

    def logged(executor, priority, fn, owner=None, tokens=0):
        name = getattr(getattr(fn, "func", fn), "__name__", "?")
        seen.append((owner, name, tokens))
        return submit(executor, priority, fn, owner, tokens)

    monkeypatch.setattr(DeviceExecutor, "submit_at", logged)
    return seen


def mine(calls: list) -> list:
    return [(name, tokens) for owner, name, tokens in calls if owner == ADDRESS]


@pytest.mark.parametrize("prefix_cache", ["off", "on"])
async def test_a_fork_at_step_1_re_prefills_in_chunks(calls, stories_model, prefix_cache):
    """Off: the prompt again, in chunks of at most 8. On: the prompt's prefill put it in the prefix cache, so the
    fork takes all but its last token from there and computes that one."""
    if prefix_cache == "off":
        stories_model.EXPLAINER_PREFIX_CACHE_BYTES = 0  # read when the model loads, at the first connect
    comm = await connect(ADDRESS)
    await comm.send_json_to({"type": "start", "messages": [{"role": "user", "content": LONG}], "paused": True,
                             "params": {"max_new_tokens": 4}})
    await until(comm, lambda m: m["type"] == "status" and m["state"] == "paused")
    await comm.send_json_to({"type": "step"})
    first = (await until(comm, "step"))[-1]
    del calls[:]
    await comm.send_json_to({"type": "fork", "step": 1, "token_id": first["token"]["id"]})
    assert (await until(comm, "step"))[-1]["forced"]
    fork_calls = mine(calls)
    fed = [tokens for name, tokens in fork_calls if name in ("prefill_part", "forked_step")]
    if prefix_cache == "off":
        assert len(fed) >= 5 and max(fed) <= 8, fork_calls  # the old fork: one call with the whole prompt in it
    else:
        assert fed[-1] == 1 and max(fed) <= 8, fork_calls  # the forked step computes the prompt's last token only
    assert "fork" not in [name for name, _ in fork_calls]
    await comm.disconnect()


async def test_a_long_prompts_check_goes_in_the_prefills_chunks(calls):
    comm = await connect(ADDRESS)
    await comm.send_json_to({"type": "start", "messages": [{"role": "user", "content": LONG}], "paused": True,
                             "params": {"max_new_tokens": 4}})
    check = (await until(comm, "check"))[-1]
    assert check["name"] == "causal_mask" and check["passed"]
    chunks = [tokens for name, tokens in mine(calls) if tokens]
    prompt = sum(chunks) // 2  # the prompt's chunks, then its twin's
    assert chunks[:len(chunks) // 2] == chunks[len(chunks) // 2:] and max(chunks) <= 8 and prompt > 40, chunks
    await comm.disconnect()


async def test_a_prompt_past_the_cap_is_refused_by_name_even_when_every_slot_is_taken(calls, stories_model):
    """N4: a flood of 60 KB starts got 2,628 `busy` (a slot was taken before the length was checked)."""
    stories_model.EXPLAINER_MAX_PROMPT_TOKENS, stories_model.EXPLAINER_OUTBOUND_WINDOW = 16, 4
    holders = [await connect(f"203.0.113.{n}") for n in (1, 2)]
    for comm in holders:  # every slot taken by a running run (its reader acks nothing more: held)
        await comm.send_json_to({"type": "ack", "received": 1})
        await comm.send_json_to({"type": "start", "messages": [{"role": "user", "content": "<t403>"}],
                                 "params": {"max_new_tokens": 200}})
        await until(comm, lambda m: m["type"] == "status" and m.get("run_state") == "held")
    assert generating.active == 2
    comm = await connect(ADDRESS)
    for content in (LONG, "x" * 60_000):  # past the cap; far past it
        del calls[:]
        await comm.send_json_to({"type": "start", "messages": [{"role": "user", "content": content}]})
        error = (await until(comm, lambda m: m["type"] in ("error", "busy")))[-1]
        assert error["type"] == "error" and error["code"] == "out_of_range" and error["field"] == "messages"
    assert calls == []  # 60,000 characters: refused before any device call (not even tokenized)
    for other in (comm, *holders):
        await other.disconnect()


def test_the_address_with_least_recent_use_goes_first(monkeypatch):
    monkeypatch.setattr(executors, "QUIET_S", 0.0)
    device = DeviceExecutor("test-fair")
    order, gate = [], threading.Event()
    device.submit_at(STEP, gate.wait)  # the device is busy while the queue fills
    device.usage.add("flooder", 5.0)  # an address that used 5 s of device time just now
    futures = [device.submit_at(STEP, lambda o=owner: order.append(o), owner)
               for owner in ("flooder", "flooder", "visitor", "flooder", "other")]
    gate.set()
    for future in futures:
        future.result(timeout=10)
    assert order[:2] == ["visitor", "other"] and order[2:] == ["flooder"] * 3

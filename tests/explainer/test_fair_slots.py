"""Fair and safe under load (issue 14, item 3; issue 22, N4): per-address slot caps, the idle timeout of paused/held
runs, paused runs holding no slot but only their cache within EXPLAINER_PAUSED_BYTES."""
import asyncio

import pytest

from explainer.services.admission.capacity import Capacity, generating
from explainer.services.run import paused
from tests.support import connect, settled, until

MESSAGES = [{"role": "user", "content": "<t403> <t407>"}]
pytestmark = pytest.mark.usefixtures("stories_model")  # tests/explainer/conftest.py


def start(paused: bool = True, steps: int = 200) -> dict:
    return {"type": "start", "messages": MESSAGES, "paused": paused, "params": {"seed": 3, "max_new_tokens": steps}}


def is_status(state):
    return lambda m: m["type"] == "status" and m["state"] == state


def is_held(m) -> bool:
    return m["type"] == "status" and m.get("run_state") == "held"


async def start_held(comm) -> None:
    """A running run that keeps its slot: its reader acks one message and no more, so the window holds it."""
    await comm.send_json_to({"type": "ack", "received": 1})
    await comm.send_json_to(start(paused=False))
    await until(comm, is_held)


def test_per_address_cap_defaults_to_half_the_slots_and_zero_lifts_it(settings):
    settings.EXPLAINER_MAX_SESSIONS, settings.EXPLAINER_MAX_RUNS_PER_ADDRESS = 8, None
    slots = Capacity()
    assert [slots.refusal(address="10.0.0.1") for _ in range(4)] == [None] * 4
    assert "one address" in slots.refusal(address="10.0.0.1")
    assert slots.refusal(address="10.0.0.2") is None  # another address still gets a slot
    slots.release("10.0.0.1")
    assert slots.refusal(address="10.0.0.1") is None  # a released slot counts for its address again
    settings.EXPLAINER_MAX_RUNS_PER_ADDRESS = 0  # make workshop: a classroom behind NAT
    assert [slots.refusal(address="10.0.0.1") for _ in range(3)] == [None] * 3 and slots.active == 8
    assert "8 visitors" in slots.refusal(address="10.0.0.3")  # the total limit still holds


async def test_one_address_cannot_take_every_slot(settings):
    settings.EXPLAINER_MAX_SESSIONS, settings.EXPLAINER_MAX_RUNS_PER_ADDRESS = 4, None  # 2 per address
    settings.EXPLAINER_OUTBOUND_WINDOW = 4
    crowd = [await connect("198.51.100.9") for _ in range(3)]
    for comm in crowd[:2]:
        await start_held(comm)
    await crowd[2].send_json_to({"type": "ack", "received": 1})
    await crowd[2].send_json_to(start(paused=False))
    busy = await crowd[2].receive_json_from(timeout=10)
    assert busy["type"] == "busy" and "one address" in busy["reason"] and busy["retry_after_s"] > 0
    other = await connect("203.0.113.5")  # a visitor from elsewhere still gets a slot
    await start_held(other)
    await crowd[0].disconnect()  # a closed socket gives its address's slot back
    await crowd[2].send_json_to(start(paused=False))
    await until(crowd[2], is_held)
    for comm in crowd[1:] + [other]:
        await comm.disconnect()
    assert generating.active == 0 and not generating.by_address


async def test_a_paused_run_past_the_idle_timeout_ends_with_done_and_frees_its_slot(settings):
    settings.EXPLAINER_IDLE_RUN_S = 0.5
    comm = await connect("198.51.100.10")
    await comm.send_json_to(start())
    await until(comm, is_status("paused"))
    seen = await until(comm, is_status("finished"), timeout=10)
    kinds = [m["type"] for m in seen]
    assert "done" in kinds and kinds.index("done") < len(kinds) - 1
    assert next(m for m in seen if m["type"] == "done")["stop_reason"] == "stopped"
    assert seen[-1]["reason"] == "idle_timeout" and seen[-1]["run_state"] == "finished"
    assert generating.active == 0 and not generating.by_address
    await comm.send_json_to({"type": "step"})
    assert (await comm.receive_json_from(timeout=5))["code"] == "finished"
    await comm.disconnect()


async def test_a_held_run_whose_reader_never_acks_times_out(settings):
    settings.EXPLAINER_IDLE_RUN_S, settings.EXPLAINER_OUTBOUND_WINDOW = 0.5, 4
    comm = await connect()
    await comm.send_json_to({"type": "ack", "received": 1})  # an acking client: the window holds from now
    await comm.send_json_to(start(paused=False))
    await until(comm, lambda m: m["type"] == "status" and m.get("run_state") == "held")
    seen = await until(comm, is_status("finished"), timeout=10)
    assert seen[-1]["reason"] == "idle_timeout" and any(m["type"] == "done" for m in seen)
    assert generating.active == 0
    await comm.disconnect()


async def test_a_paused_run_that_keeps_stepping_is_not_idle(settings):
    settings.EXPLAINER_IDLE_RUN_S = 1.5
    comm = await connect()
    await comm.send_json_to(start())
    await until(comm, is_status("paused"))
    for n in range(1, 6):  # 5 steps, 0.6 s apart: 3 s in all, each wait well under the timeout
        await asyncio.sleep(0.6)
        await comm.send_json_to({"type": "step"})
        seen = await until(comm, lambda m: m["type"] == "step", timeout=10)
        assert seen[-1]["step"] == n and not any(m["type"] == "done" for m in seen)
    await comm.send_json_to({"type": "stop"})
    seen = await until(comm, is_status("finished"))
    assert "reason" not in seen[-1]
    await comm.disconnect()


async def test_paused_runs_hold_no_slot_and_resume_takes_one_again(settings):
    """N4: 8 runs held paused by 2 addresses kept every slot; now a paused run keeps only its cache."""
    settings.EXPLAINER_MAX_SESSIONS, settings.EXPLAINER_MAX_RUNS_PER_ADDRESS, settings.EXPLAINER_OUTBOUND_WINDOW = 2, 0, 4
    learners = [await connect("198.51.100.20") for _ in range(3)]
    for comm in learners:  # three paused runs on two slots: each started, none refused
        await comm.send_json_to(start())
        await until(comm, is_status("paused"))
    await settled(lambda: generating.active == 0 and paused.paused_bytes() > 0, "the paused runs giving back their slots")
    for comm in learners:  # stepping slowly needs no slot
        await comm.send_json_to({"type": "step"})
        assert (await until(comm, lambda m: m["type"] == "step"))[-1]["step"] == 1
    for comm in learners[:2]:
        await comm.send_json_to({"type": "ack", "received": 10**6})
        await comm.send_json_to({"type": "resume"})
        await until(comm, is_status("running"))
    await learners[2].send_json_to({"type": "resume"})
    busy = await until(learners[2], lambda m: m["type"] in ("busy", "status"))
    assert busy[-1]["type"] == "busy" and "Step still works" in busy[-1]["reason"]
    await learners[2].send_json_to({"type": "step"})  # still a learner's run: one more step
    assert (await until(learners[2], lambda m: m["type"] == "step"))[-1]["step"] == 2
    for comm in learners:
        await comm.disconnect()
    assert generating.active == 0
    await settled(lambda: paused.paused_bytes() == 0, "the closed runs leaving the paused budget")


async def test_past_the_paused_memory_the_least_recently_active_paused_run_ends(settings):
    first, second = await connect("198.51.100.21"), await connect("198.51.100.22")
    await first.send_json_to(start())
    await until(first, is_status("paused"))
    await settled(lambda: paused.paused_bytes() > 0, "the paused run counting its cache")
    one_run = paused.paused_bytes()
    settings.EXPLAINER_PAUSED_BYTES = int(one_run * 1.5)  # room for one paused run, not two
    await second.send_json_to(start())
    await until(second, is_status("paused"))
    seen = await until(first, is_status("finished"), timeout=10)
    assert seen[-1]["reason"] == "paused_memory" and "memory for paused runs" in seen[-1]["message"]
    assert next(m for m in seen if m["type"] == "done")["stop_reason"] == "stopped"
    await second.send_json_to({"type": "step"})  # the newer one goes on
    assert (await until(second, lambda m: m["type"] == "step"))[-1]["step"] == 1
    await first.disconnect()
    await second.disconnect()

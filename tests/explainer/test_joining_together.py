"""Visitors who press Enter while the model is busy join in one batched prefill (issue 14): each gets its own
prefill, causal-mask check and tokens, as a lone visitor would."""
import asyncio
import threading

from explainer.services.device.executors import arrivals, executor_for, prefill_pass_tokens, scheduler_for
from tests.support import connect, until

PROMPTS = ["What does bank mean?", "Define a mole in chemistry.", "What does bank mean?"]  # the bundled model


def start(content: str) -> dict:
    return {"type": "start", "messages": [{"role": "user", "content": content}],
            "params": {"temperature": 0, "max_new_tokens": 6}}


def finished(m) -> bool:
    return m["type"] == "status" and m["state"] == "finished"


async def run_alone(content: str) -> list[dict]:
    comm = await connect()
    await comm.send_json_to(start(content))
    seen = await until(comm, finished, timeout=60)
    await comm.disconnect()
    return seen


async def test_visitors_who_start_while_the_device_is_busy_share_one_prefill_pass(settings):
    settings.EXPLAINER_MAX_SESSIONS = len(PROMPTS)
    alone = [await run_alone(content) for content in PROMPTS]
    scheduler = scheduler_for("cpu")
    gate = threading.Event()
    blocked = executor_for("cpu").submit(gate.wait, 30)  # the model thread is busy (another visitor's pass)
    crowd = [await connect(f"198.51.100.{n + 20}") for n in range(len(PROMPTS))]  # one slot per address
    for comm, content in zip(crowd, PROMPTS):
        await comm.send_json_to(start(content))
    for _ in range(200):  # every prefill has asked for the device
        if len(scheduler.prefilling) == len(PROMPTS):
            break
        await asyncio.sleep(0.05)
    passes = scheduler.prefill_passes
    gate.set()
    await asyncio.wrap_future(blocked)
    try:
        together = [await until(comm, finished, timeout=60) for comm in crowd]
    finally:
        for comm in crowd:
            await comm.disconnect()
    assert scheduler.prefill_passes == passes + 1  # one pass for the three
    for mine, lone in zip(together, alone):
        prefill = next(m for m in mine if m["type"] == "prefill")
        lone_prefill = next(m for m in lone if m["type"] == "prefill")
        assert prefill["batch_size"] == 3 and lone_prefill["batch_size"] == 1
        assert prefill["tokens"] == lone_prefill["tokens"]
        check = next(m for m in mine if m["type"] == "check" and m["name"] == "causal_mask")
        lone_check = next(m for m in lone if m["type"] == "check" and m["name"] == "causal_mask")
        assert check["passed"] and check["data"]["change_at"] == lone_check["data"]["change_at"]
        assert check["data"]["max_abs_change"][:check["data"]["change_at"]] == [0.0] * check["data"]["change_at"]
        assert [m["token"]["id"] for m in mine if m["type"] == "step"] == [m["token"]["id"] for m in lone if m["type"] == "step"]


async def test_a_class_pressing_enter_together_on_an_idle_device_shares_one_prefill_pass(settings, monkeypatch):
    """The device is idle: the first start's prefill would go at once, alone. The starts already being read (checked,
    tokenized) are on their way (Arrivals): the pass waits for them. JOIN_WAIT_S is an hour: the wait ends on the
    arrivals, never on the clock. Each visitor still gets the tokens it gets alone."""
    monkeypatch.setattr("inference.scheduler.JOIN_WAIT_S", 3600)
    settings.EXPLAINER_MAX_SESSIONS = len(PROMPTS)
    alone = [await run_alone(content) for content in PROMPTS]
    scheduler = scheduler_for("cpu")
    passes = scheduler.prefill_passes
    crowd = [await connect(f"198.51.100.{n + 40}") for n in range(len(PROMPTS))]
    try:
        for comm, content in zip(crowd, PROMPTS):
            await comm.send_json_to(start(content))
        together = [await until(comm, finished, timeout=60) for comm in crowd]
    finally:
        for comm in crowd:
            await comm.disconnect()
    assert scheduler.prefill_passes == passes + 1 and scheduler.arrivals.count == 0
    for mine, lone in zip(together, alone):
        assert next(m for m in mine if m["type"] == "prefill")["batch_size"] == len(PROMPTS)
        assert [m["token"]["id"] for m in mine if m["type"] == "step"] == [m["token"]["id"] for m in lone if m["type"] == "step"]


def test_a_cpu_prefill_pass_computes_fewer_positions_than_a_gpus(settings):
    """EXPLAINER_PREFILL_BATCH_TOKENS unset: 256 positions a pass on a CPU (a class of 32 on SmolLM2 goes in two
    passes), 4,096 on a GPU; set, it is the budget everywhere."""
    settings.EXPLAINER_PREFILL_BATCH_TOKENS = None
    assert (prefill_pass_tokens("cpu"), prefill_pass_tokens("cuda:0")) == (256, 4096)
    settings.EXPLAINER_PREFILL_BATCH_TOKENS = 1000
    assert (prefill_pass_tokens("cpu"), prefill_pass_tokens("cuda:1")) == (1000, 1000)


async def test_starts_cut_short_leave_no_arrival_behind():
    """A start restarted at once (its run's task cancelled before it ever ran), one whose socket closes mid-start, and a
    refused one: none stays counted as on its way, or every later prefill pass would wait for it."""
    comm = await connect("198.51.100.60")
    for content in PROMPTS:  # each start ends the one before it, most before their task has run
        await comm.send_json_to(start(content))
    await comm.send_json_to({"type": "start", "messages": [], "params": {}})  # refused: no message
    await comm.disconnect()
    other = await connect("198.51.100.61")
    await other.send_json_to(start(PROMPTS[0]))
    await other.disconnect()  # mid-start
    for _ in range(500):
        if arrivals().count == 0:
            break
        await asyncio.sleep(0.01)
    assert arrivals().count == 0

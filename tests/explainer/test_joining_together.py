"""Visitors who press Enter while the model is busy join in one batched prefill (issue 14): each gets its own
prefill, causal-mask check and tokens, as a lone visitor would."""
import asyncio
import threading

from explainer.services.device.executors import executor_for, scheduler_for
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

"""Timing figures leave paused time out: a run stepped by hand (a workshop host's) is not "1 token/s"."""
import asyncio

from channels.testing import WebsocketCommunicator

from explainer.asgi import application
from tests.explainer.conftest import stories_model  # noqa: F401 (fixture)
from tests.support import until

PAUSE_S = 1.5


async def test_paused_time_is_not_in_tokens_per_s_or_total(stories_model):  # noqa: F811
    comm = WebsocketCommunicator(application, "/ws/session/", headers=[(b"origin", b"http://127.0.0.1")])
    assert (await comm.connect())[0]
    await comm.send_json_to({"type": "start", "text": "Once upon a time", "paused": True,
                             "params": {"temperature": 0, "max_new_tokens": 4}})
    await until(comm, "prefill")
    for _ in range(2):
        await asyncio.sleep(PAUSE_S)  # the host talks about the step before pressing Step
        await comm.send_json_to({"type": "step"})
        step = (await until(comm, "step"))[-1]
        assert step["timing"]["elapsed_ms"] < PAUSE_S * 1e3, step["timing"]
    await asyncio.sleep(PAUSE_S)
    await comm.send_json_to({"type": "resume"})
    done = (await until(comm, "done"))[-1]
    assert done["timing"]["total_ms"] < PAUSE_S * 1e3, done["timing"]  # 4.5 s of pauses left out
    assert done["timing"]["tokens_per_s"] > 3 / PAUSE_S, done["timing"]
    await comm.disconnect()

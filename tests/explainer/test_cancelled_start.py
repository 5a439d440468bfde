"""No slot outlives its socket (issue 22, N1): sockets closed mid-prefill on SmolLM2 under the Makefile's Daphne
flags. The prefill runs in the run's own task (issue 24), so the disconnect is read while it computes and ends
it; where Daphne still cancels an instance slow to close (--application-close-timeout), the cancellation must
give back the generation slot and the address's connection count too. Then a random open/start/close/cancel
walk (hypothesis) on the in-process consumer: every counter comes back to 0."""
from __future__ import annotations

import asyncio
import json
import time
import urllib.request

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st
from websockets.asyncio.client import connect as ws_connect

from explainer.services.admission import limits
from explainer.services.admission.capacity import generating
from explainer.services.run.visitor_run import live_sessions
from tests.explainer.live_server import daphne_flag, start_daphne
from tests.support import connect, until

VISITORS = 8
# About 370 SmolLM2 tokens with the template (the cap is 384): a prefill of seconds on the CPU, and 8 of them
# queue behind each other on the one model thread, far past the close timeout.
LONG = "The quick brown fox jumps over the lazy dog near the river bank while children play. " * 19


def load(server) -> dict:
    with urllib.request.urlopen(server.url + "/healthz", timeout=10) as response:
        return json.loads(response.read())["load"]


async def wait_for(condition, what: str, limit_s: float):
    """Poll `condition()` (blocking, run in a thread) until true; fail naming `what` after limit_s."""
    deadline = time.monotonic() + limit_s
    while not await asyncio.to_thread(condition):
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {limit_s} s")
        await asyncio.sleep(0.5)


async def open_visitor(server, messages: list[dict], max_new_tokens: int):
    ws = await ws_connect(server.ws_url, origin=server.origin, proxy=None, max_size=2**24)
    assert json.loads(await ws.recv())["state"] == "ready"
    await ws.send(json.dumps({"type": "start", "messages": messages, "params": {"max_new_tokens": max_new_tokens}}))
    return ws


async def first_of(ws, kinds: set[str]) -> dict:
    while (message := json.loads(await ws.recv()))["type"] not in kinds:
        pass
    return message


async def test_sockets_closed_mid_prefill_give_back_their_slots_and_counts(tmp_path):
    close_timeout = float(daphne_flag("--application-close-timeout"))
    env = {"EXPLAINER_MAX_SESSIONS": str(VISITORS), "EXPLAINER_MAX_RUNS_PER_ADDRESS": str(VISITORS),
           "EXPLAINER_MAX_CONNECTIONS_PER_IP": str(VISITORS)}
    server = await asyncio.to_thread(start_daphne, tmp_path, "smollm2-135m-instruct", env)
    try:
        sockets = [await open_visitor(server, [{"role": "user", "content": LONG}], 8) for _ in range(VISITORS)]
        for ws in sockets:
            await first_of(ws, {"session"})  # every one is prefilling (or queued for the model thread)
        assert load(server)["generating"] == VISITORS
        for ws in sockets:
            await ws.close()
        await wait_for(lambda: load(server) == {"generating": 0, "slots": VISITORS, "sockets": 0},
                       "every slot and connection coming back", close_timeout + 120)
        # 8 new visitors from the same address: each is admitted and runs (none hears `busy`)
        sockets = [await open_visitor(server, [{"role": "user", "content": "Hi"}], 2) for _ in range(VISITORS)]
        for ws in sockets:
            assert (await first_of(ws, {"prefill", "busy", "error"}))["type"] == "prefill"
            await ws.close()
    finally:
        await asyncio.to_thread(server.stop)


# ---- the same promise, walked at random on the in-process consumer ------------------------------------------
ADDRESS = "192.0.2.77"
ACTIONS = st.lists(st.sampled_from(["open", "start", "close", "cancel", "wait"]), min_size=1, max_size=12)


async def walk(actions: list[str]) -> None:
    open_sockets = []
    for action in actions:
        if action == "open":
            open_sockets.append(await connect(ADDRESS))
        elif not open_sockets:
            continue
        elif action == "start":
            await open_sockets[-1].send_json_to({"type": "start", "messages": [{"role": "user", "content": "<t403> <t407>"}],
                                                 "params": {"max_new_tokens": 40}})
        elif action == "wait":
            await asyncio.sleep(0.02)  # a moment for a prefill or a step to be under way
        elif action == "close":
            await open_sockets.pop(0).disconnect(timeout=30)
        else:  # Daphne's cancellation of an instance slow to close
            comm = open_sockets.pop()
            comm.future.cancel()
            with pytest.raises(asyncio.CancelledError):
                await comm.future
    for comm in open_sockets:
        await comm.disconnect(timeout=30)


@pytest.fixture
def walk_settings(stories_model):
    stories_model.EXPLAINER_RATE_PER_S = 0  # the walk's frames come faster than a person's
    stories_model.EXPLAINER_MAX_RUNS_PER_ADDRESS = 0
    return stories_model


def test_random_open_start_close_cancel_leaves_no_count_behind(walk_settings):
    loop = asyncio.new_event_loop()

    @hsettings(max_examples=40, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(actions=ACTIONS)
    def walk_once(actions):
        loop.run_until_complete(walk(actions))
        assert (generating.active, limits.open_connections(ADDRESS), live_sessions()) == (0, 0, 0), actions

    try:
        walk_once()
    finally:
        loop.close()
